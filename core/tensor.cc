// Tensor construction, reshaping and copying.
#include "core/tensor.h"

#include <cstring>

namespace ontrain {

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int64_t ShapeNumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > INT64_MAX / d) return -1;
    n *= d;
  }
  return n;
}

StatusOr<Tensor> Tensor::Allocate(DType dtype, Shape shape, IAllocator* allocator) {
  int64_t n = ShapeNumElements(shape);
  if (n < 0) return InvalidArgument("cannot allocate a tensor of shape ", ShapeToString(shape));
  if (DTypeSize(dtype) == 0) return Unimplemented("cannot allocate a tensor of dtype ", DTypeName(dtype));
  if (static_cast<uint64_t>(n) > (uint64_t{1} << 62) / DTypeSize(dtype)) {
    return ResourceExhausted("a ", DTypeName(dtype), ShapeToString(shape), " tensor would need more than 2^62 bytes");
  }
  size_t bytes = static_cast<size_t>(n) * DTypeSize(dtype);
  void* p = allocator->Allocate(bytes);
  if (p == nullptr) {
    return ResourceExhausted("out of memory allocating ", bytes, " bytes on ", allocator->device().ToString());
  }
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.num_elements_ = ShapeNumElements(t.shape_);
  t.device_ = allocator->device();
  t.data_ = p;
  std::shared_ptr<IAllocator> keep = allocator->weak_from_this().lock();  // null if not shared-owned
  t.holder_ = std::shared_ptr<void>(p, [allocator, keep](void* q) { allocator->Free(q); });
  return t;
}

Tensor Tensor::View(DType dtype, Shape shape, void* data, Device device) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.num_elements_ = ShapeNumElements(t.shape_);
  t.device_ = device;
  t.data_ = data;
  return t;
}

Tensor Tensor::SubView(size_t byte_offset, DType dtype, Shape shape) const {
  Tensor t = *this;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.num_elements_ = ShapeNumElements(t.shape_);
  t.data_ = static_cast<uint8_t*>(data_) + byte_offset;
  return t;
}

StatusOr<Tensor> Tensor::Reshaped(Shape shape) const {
  if (ShapeNumElements(shape) != NumElements()) {
    return InvalidArgument("cannot reshape ", ShapeToString(shape_), " to ", ShapeToString(shape));
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  t.num_elements_ = ShapeNumElements(t.shape_);
  return t;
}

Tensor Tensor::Clone() const {
  Tensor t = Allocate(dtype_, shape_, HostAllocator()).value();
  if (SizeInBytes() > 0) std::memcpy(t.data_, data_, SizeInBytes());
  return t;
}

void Tensor::CanonicalizeBools() {
  if (dtype_ != DType::kBool || data_ == nullptr) return;
  uint8_t* b = static_cast<uint8_t*>(data_);
  for (int64_t i = 0; i < num_elements_; ++i) b[i] = b[i] != 0;
}

template <>
Tensor Tensor::FromVector<bool>(const std::vector<bool>& values, Shape shape) {
  Tensor t = Allocate(DType::kBool, std::move(shape), HostAllocator()).value();
  for (size_t i = 0; i < values.size(); ++i) t.data<bool>()[i] = values[i];
  return t;
}

}  // namespace ontrain
