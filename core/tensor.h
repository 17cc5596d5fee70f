// Tensor: a dtype, a shape and a pointer to contiguous row-major storage on one device.
//
// A tensor either owns its buffer (allocated through a provider's IAllocator and returned to it when the last
// copy of the tensor goes away) or is a view of memory owned elsewhere (an arena, a checkpoint, the caller).
// Copies of a Tensor share storage; Clone() makes a deep host copy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "core/status.h"

namespace ontrain {

std::string ShapeToString(const Shape& shape);
// Product of the dims (1 for a scalar); -1 when a dim is negative or the product overflows int64.
int64_t ShapeNumElements(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;

  // Allocates an uninitialised tensor through `allocator`.
  static StatusOr<Tensor> Allocate(DType dtype, Shape shape, IAllocator* allocator);
  // A non-owning view; `data` must outlive every copy of the view.
  static Tensor View(DType dtype, Shape shape, void* data, Device device = Device());
  // A host tensor owning a copy of `values` (tests and small constants).
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values, Shape shape);

  bool defined() const { return dtype_ != DType::kUndefined; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[i]; }
  int64_t NumElements() const { return num_elements_; }  // computed once, when the shape is set
  size_t SizeInBytes() const { return static_cast<size_t>(NumElements()) * DTypeSize(dtype_); }
  Device device() const { return device_; }
  bool owns_data() const { return holder_ != nullptr; }

  void* raw_data() { return data_; }
  const void* raw_data() const { return data_; }
  template <typename T> T* data() { return static_cast<T*>(data_); }
  template <typename T> const T* data() const { return static_cast<const T*>(data_); }

  // A tensor of `dtype` and `shape` inside this one's buffer, `byte_offset` bytes in (the caller checks
  // that it fits). It keeps this tensor's buffer alive when this tensor owns it.
  Tensor SubView(size_t byte_offset, DType dtype, Shape shape) const;
  // Same storage, new shape with the same element count.
  StatusOr<Tensor> Reshaped(Shape shape) const;
  // Deep copy into new host memory (host tensors only).
  Tensor Clone() const;
  // For a host bool tensor filled from a file's bytes: makes every nonzero byte 1 (reading a bool that holds
  // any other byte is undefined behaviour). Nothing for other dtypes.
  void CanonicalizeBools();
  // Whether this tensor owns its buffer and no other tensor shares it (so writing it changes nothing else).
  bool SoleOwner() const { return holder_ != nullptr && holder_.use_count() == 1; }

 private:
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  int64_t num_elements_ = 1;  // ShapeNumElements(shape_)
  Device device_;
  void* data_ = nullptr;
  std::shared_ptr<void> holder_;  // owns data_ when set
};

template <typename T>
Tensor Tensor::FromVector(const std::vector<T>& values, Shape shape) {
  Tensor t;
  t.dtype_ = DTypeOf<T>::value;
  t.shape_ = std::move(shape);
  t.num_elements_ = ShapeNumElements(t.shape_);
  size_t bytes = values.size() * sizeof(T);
  std::shared_ptr<uint8_t> buf(new uint8_t[bytes > 0 ? bytes : 1], std::default_delete<uint8_t[]>());
  for (size_t i = 0; i < values.size(); ++i) reinterpret_cast<T*>(buf.get())[i] = values[i];
  t.data_ = buf.get();
  t.holder_ = buf;
  return t;
}

// std::vector<bool> is bit-packed; store bools as bytes.
template <>
Tensor Tensor::FromVector<bool>(const std::vector<bool>& values, Shape shape);

}  // namespace ontrain
