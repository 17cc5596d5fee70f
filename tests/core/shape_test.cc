// core/shape.h: std::vector's semantics for every member the code base uses, across the move from the
// inline dims to the heap, and the conversions to and from std::vector<int64_t>.
#include "core/shape.h"

#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace ontrain {
namespace {

std::vector<int64_t> V(const Shape& s) { return std::vector<int64_t>(s.begin(), s.end()); }

TEST(ShapeTest, BehavesLikeAVectorAcrossTheInlineCapacity) {
  // The same edits on a Shape and a std::vector, at every length from empty to twice the inline capacity.
  for (size_t n = 0; n <= 2 * Shape::kInline; ++n) {
    std::vector<int64_t> ref(n);
    std::iota(ref.begin(), ref.end(), 1);
    Shape s(ref.begin(), ref.end());
    ASSERT_EQ(V(s), ref) << n;
    s.push_back(99);
    ref.push_back(99);
    s.insert(s.begin(), -1);
    ref.insert(ref.begin(), -1);
    s.insert(s.begin() + 1, {7, 8, 9});
    ref.insert(ref.begin() + 1, {7, 8, 9});
    s.insert(s.end() - 1, 2, 5);
    ref.insert(ref.end() - 1, 2, 5);
    ASSERT_EQ(V(s), ref) << n;
    s.erase(s.begin() + 2);
    ref.erase(ref.begin() + 2);
    s.erase(s.begin(), s.begin() + 2);
    ref.erase(ref.begin(), ref.begin() + 2);
    ASSERT_EQ(V(s), ref) << n;
    s.resize(n + 3, 4);
    ref.resize(n + 3, 4);
    ASSERT_EQ(V(s), ref) << n;
    s.pop_back();
    ref.pop_back();
    EXPECT_EQ(s.size(), ref.size());
    EXPECT_EQ(s.back(), ref.back());
    EXPECT_EQ(s.front(), ref.front());
    EXPECT_EQ(std::vector<int64_t>(s.rbegin(), s.rend()), std::vector<int64_t>(ref.rbegin(), ref.rend()));
  }
}

TEST(ShapeTest, InsertingItsOwnElementsAndSelfAssignment) {
  for (size_t n : {size_t{3}, Shape::kInline, Shape::kInline + 4}) {
    std::vector<int64_t> ref(n);
    std::iota(ref.begin(), ref.end(), 10);
    Shape s(ref.begin(), ref.end());
    s.insert(s.begin() + 1, s.begin(), s.end());  // the range is read before the dims move
    std::vector<int64_t> copy = ref;
    ref.insert(ref.begin() + 1, copy.begin(), copy.end());
    EXPECT_EQ(V(s), ref) << n;
    const Shape& alias = s;
    s = alias;
    EXPECT_EQ(V(s), ref) << n;
    s.assign(s.begin() + 1, s.end());  // a suffix of itself
    ref.assign(copy.begin(), copy.end());
    ref.insert(ref.end(), copy.begin() + 1, copy.end());
    EXPECT_EQ(V(s), ref) << n;
  }
}

TEST(ShapeTest, CopiesMovesAndConversions) {
  Shape small = {2, 3}, big = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  Shape small_copy = small, big_copy = big;
  EXPECT_EQ(small_copy, small);
  EXPECT_EQ(big_copy, big);
  Shape moved = std::move(big_copy);  // the heap buffer moves; the source is left empty
  EXPECT_EQ(moved, big);
  EXPECT_TRUE(big_copy.empty());
  moved = std::move(small_copy);
  EXPECT_EQ(moved, small);
  moved.swap(big_copy);
  EXPECT_TRUE(moved.empty());
  EXPECT_EQ(big_copy, small);
  std::vector<int64_t> v = big;  // to a vector and back
  EXPECT_EQ(v, std::vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8, 9}));
  Shape back = v;
  EXPECT_EQ(back, big);
  EXPECT_TRUE(Shape({1, 2}) < Shape({1, 3}));
  EXPECT_TRUE(Shape({1, 2}) < Shape({1, 2, 0}));
  EXPECT_NE(Shape({1, 2}), Shape({1, 2, 0}));
  Shape sized(4);
  EXPECT_EQ(sized, Shape({0, 0, 0, 0}));
  Shape filled(3, 7);
  EXPECT_EQ(filled, Shape({7, 7, 7}));
}

}  // namespace
}  // namespace ontrain
