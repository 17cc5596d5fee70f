// Shape: a tensor's dims, with std::vector<int64_t>'s interface but room for kInline dims inside the object,
// so that making, copying and reshaping the shapes of ordinary tensors never touches the heap (a training
// step builds thousands of them). Longer shapes move to the heap. It converts to and from
// std::vector<int64_t> implicitly, for the code that keeps dims in plain vectors (permutations, pads).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <type_traits>
#include <vector>

namespace ontrain {

class Shape {
 public:
  static constexpr size_t kInline = 6;
  using value_type = int64_t;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = int64_t&;
  using const_reference = const int64_t&;
  using pointer = int64_t*;
  using const_pointer = const int64_t*;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  Shape() = default;
  explicit Shape(size_t n, int64_t v = 0) { assign(n, v); }
  Shape(std::initializer_list<int64_t> il) { assign(il.begin(), il.end()); }
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  Shape(It first, It last) {
    assign(first, last);
  }
  Shape(const std::vector<int64_t>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit on purpose
  Shape(const Shape& o) { assign(o.begin(), o.end()); }
  Shape(Shape&& o) noexcept { Take(o); }
  ~Shape() { delete[] heap_; }

  Shape& operator=(const Shape& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  Shape& operator=(Shape&& o) noexcept {
    if (this != &o) {
      delete[] heap_;
      heap_ = nullptr;
      cap_ = kInline;
      Take(o);
    }
    return *this;
  }
  Shape& operator=(std::initializer_list<int64_t> il) {
    assign(il.begin(), il.end());
    return *this;
  }
  operator std::vector<int64_t>() const { return std::vector<int64_t>(begin(), end()); }  // NOLINT

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return cap_; }
  int64_t* data() { return heap_ ? heap_ : inline_; }
  const int64_t* data() const { return heap_ ? heap_ : inline_; }
  int64_t& operator[](size_t i) { return data()[i]; }
  const int64_t& operator[](size_t i) const { return data()[i]; }
  int64_t& at(size_t i) { return data()[i]; }
  const int64_t& at(size_t i) const { return data()[i]; }
  int64_t& front() { return data()[0]; }
  const int64_t& front() const { return data()[0]; }
  int64_t& back() { return data()[size_ - 1]; }
  const int64_t& back() const { return data()[size_ - 1]; }
  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  const_iterator cbegin() const { return begin(); }
  const_iterator cend() const { return end(); }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }

  void clear() { size_ = 0; }
  void reserve(size_t n) {
    if (n <= cap_) return;
    int64_t* p = new int64_t[n];
    std::copy(begin(), end(), p);
    delete[] heap_;
    heap_ = p;
    cap_ = n;
  }
  void resize(size_t n, int64_t v = 0) {
    reserve(n);
    if (n > size_) std::fill(data() + size_, data() + n, v);
    size_ = n;
  }
  void push_back(int64_t v) {
    if (size_ == cap_) reserve(cap_ * 2);
    data()[size_++] = v;
  }
  void emplace_back(int64_t v) { push_back(v); }
  void pop_back() { --size_; }

  void assign(size_t n, int64_t v) {
    size_ = 0;
    resize(n, v);
  }
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  void assign(It first, It last) {
    const size_t n = static_cast<size_t>(std::distance(first, last));
    if (n > cap_) {  // a range inside this shape is read before the old buffer goes
      int64_t* p = new int64_t[n];
      std::copy(first, last, p);
      delete[] heap_;
      heap_ = p;
      cap_ = n;
    } else {
      std::copy(first, last, data());
    }
    size_ = n;
  }
  void assign(std::initializer_list<int64_t> il) { assign(il.begin(), il.end()); }

  iterator insert(const_iterator pos, int64_t v) { return insert(pos, &v, &v + 1); }
  iterator insert(const_iterator pos, size_t n, int64_t v) {
    Shape fill(n, v);
    return insert(pos, fill.begin(), fill.end());
  }
  iterator insert(const_iterator pos, std::initializer_list<int64_t> il) { return insert(pos, il.begin(), il.end()); }
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  iterator insert(const_iterator pos, It first, It last) {
    const size_t at = static_cast<size_t>(pos - begin());
    Shape items;  // the inserted values first: the range may point into this shape
    items.assign(first, last);
    const size_t n = items.size();
    if (size_ + n > cap_) reserve(std::max(size_ + n, cap_ * 2));
    int64_t* d = data();
    std::copy_backward(d + at, d + size_, d + size_ + n);
    std::copy(items.begin(), items.end(), d + at);
    size_ += n;
    return d + at;
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    int64_t* d = data();
    const size_t a = static_cast<size_t>(first - d), b = static_cast<size_t>(last - d);
    std::copy(d + b, d + size_, d + a);
    size_ -= b - a;
    return d + a;
  }
  void swap(Shape& o) noexcept {
    Shape t(std::move(o));
    o = std::move(*this);
    *this = std::move(t);
  }

  friend bool operator==(const Shape& a, const Shape& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }
  friend bool operator<(const Shape& a, const Shape& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  void Take(Shape& o) {
    size_ = o.size_;
    if (o.heap_) {
      heap_ = o.heap_;
      cap_ = o.cap_;
      o.heap_ = nullptr;
      o.cap_ = kInline;
    } else {
      std::copy(o.inline_, o.inline_ + o.size_, inline_);
    }
    o.size_ = 0;
  }

  size_t size_ = 0;
  size_t cap_ = kInline;
  int64_t* heap_ = nullptr;
  int64_t inline_[kInline] = {};
};

}  // namespace ontrain
