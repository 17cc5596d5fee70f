// TensorProto <-> Tensor. Every size is validated before any copy so that a malformed proto yields an error,
// never an out-of-bounds read.
#include "graph/tensor_proto.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace ontrain {
namespace {

// Copies a repeated numeric field into `out`, converting each element with static_cast or bit reinterpretation.
template <typename Dst, typename Field>
void CopyField(const Field& field, Tensor* out) {
  Dst* dst = out->data<Dst>();
  int i = 0;
  for (auto v : field) dst[i++] = static_cast<Dst>(v);
}

template <typename Field>
void CopyBits16(const Field& field, Tensor* out) {
  uint16_t* dst = out->data<uint16_t>();
  int i = 0;
  for (auto v : field) dst[i++] = static_cast<uint16_t>(v);
}

// Checks an external-data reference against its file before anything is allocated; on success `*path`,
// `*offset` name the bytes to read.
Status CheckExternal(const onnx::TensorProto& proto, const std::string& base_dir, int64_t need, std::string* path,
                     int64_t* offset) {
  std::string location;
  int64_t length = -1;
  *offset = 0;
  for (const auto& kv : proto.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset" || kv.key() == "length") {
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(kv.value().c_str(), &end, 10);
      if (kv.value().empty() || *end != '\0' || errno == ERANGE || v < 0) {
        return InvalidArgument("external data of tensor \"", proto.name(), "\": ", kv.key(), " \"", kv.value(),
                               "\" is not a non-negative integer");
      }
      (kv.key() == "offset" ? *offset : length) = v;
    }
  }
  if (location.empty()) return InvalidArgument("external data of tensor \"", proto.name(), "\" has no location");
  if (base_dir.empty()) {
    return InvalidArgument("tensor \"", proto.name(), "\" uses external data file \"", location,
                           "\" but the model was loaded from memory without a base directory");
  }
  if (location[0] == '/' || location.find("..") != std::string::npos || location.find('\0') != std::string::npos) {
    return InvalidArgument("external data location \"", location, "\" of tensor \"", proto.name(),
                           "\" must be a relative path inside the model's directory");
  }
  *path = base_dir + "/" + location;
  std::ifstream f(*path, std::ios::binary | std::ios::ate);
  if (!f) return NotFound("external data file \"", *path, "\" of tensor \"", proto.name(), "\" cannot be opened");
  int64_t file_size = static_cast<int64_t>(f.tellg());
  if (length >= 0 && length != need) {
    return InvalidArgument("external data of tensor \"", proto.name(), "\" has length ", length, " but its shape needs ",
                           need, " bytes");
  }
  if (*offset > file_size || need > file_size - *offset) {
    return DataLoss("external data file \"", *path, "\" is ", file_size, " bytes; tensor \"", proto.name(),
                    "\" needs ", need, " bytes from offset ", *offset);
  }
  return Status::OK();
}

Status ReadExternal(const std::string& path, int64_t offset, const std::string& name, Tensor* out) {
  std::ifstream f(path, std::ios::binary);
  f.seekg(offset);
  f.read(static_cast<char*>(out->raw_data()), static_cast<std::streamsize>(out->SizeInBytes()));
  if (!f) return IoError("reading external data file \"", path, "\" for tensor \"", name, "\" failed");
  return Status::OK();
}

}  // namespace

StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto, const std::string& base_dir) {
  const std::string where = StrCat("tensor \"", proto.name(), "\"");
  ONT_ASSIGN_OR_RETURN(DType dtype, DTypeFromOnnx(proto.data_type()));
  if (dtype == DType::kString) return Unimplemented(where, ": string tensors are not supported");
  Shape shape(proto.dims().begin(), proto.dims().end());
  for (int64_t d : shape) ONT_CHECK_ARG(d >= 0, where, ": negative dimension in ", ShapeToString(shape));
  int64_t n = ShapeNumElements(shape);
  ONT_CHECK_ARG(n >= 0 && n < (int64_t{1} << 40), where, ": shape ", ShapeToString(shape), " is too large");
  // Every size a proto declares is checked against the bytes that back it before anything is allocated:
  // a 20-byte proto claiming a terabyte tensor is an error, not an allocation.
  const size_t bytes = static_cast<size_t>(n) * DTypeSize(dtype);

  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string path;
    int64_t offset = 0;
    ONT_RETURN_IF_ERROR(CheckExternal(proto, base_dir, static_cast<int64_t>(bytes), &path, &offset));
    ONT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, shape, HostAllocator()));
    ONT_RETURN_IF_ERROR(ReadExternal(path, offset, proto.name(), &t));
    t.CanonicalizeBools();
    return t;
  }
  if (proto.has_raw_data()) {
    if (proto.raw_data().size() != bytes) {
      return InvalidArgument(where, ": raw_data has ", proto.raw_data().size(), " bytes, but ", DTypeName(dtype),
                             ShapeToString(shape), " needs ", bytes);
    }
    ONT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, shape, HostAllocator()));
    if (bytes) std::memcpy(t.raw_data(), proto.raw_data().data(), bytes);
    t.CanonicalizeBools();
    return t;
  }
  // Typed fields: which one holds the data depends on the dtype (onnx.proto's comments).
  int64_t count = 0;
  switch (dtype) {
    case DType::kFloat32: count = proto.float_data_size(); break;
    case DType::kFloat64: count = proto.double_data_size(); break;
    case DType::kInt64: count = proto.int64_data_size(); break;
    case DType::kUInt32: case DType::kUInt64: count = proto.uint64_data_size(); break;
    default: count = proto.int32_data_size(); break;
  }
  if (count != n) {
    return InvalidArgument(where, ": holds ", count, " values but its shape ", ShapeToString(shape), " needs ", n);
  }
  ONT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, shape, HostAllocator()));
  switch (dtype) {
    case DType::kFloat32: CopyField<float>(proto.float_data(), &t); break;
    case DType::kFloat64: CopyField<double>(proto.double_data(), &t); break;
    case DType::kInt64: CopyField<int64_t>(proto.int64_data(), &t); break;
    case DType::kUInt32: CopyField<uint32_t>(proto.uint64_data(), &t); break;
    case DType::kUInt64: CopyField<uint64_t>(proto.uint64_data(), &t); break;
    case DType::kInt32: CopyField<int32_t>(proto.int32_data(), &t); break;
    case DType::kInt16: CopyField<int16_t>(proto.int32_data(), &t); break;
    case DType::kInt8: CopyField<int8_t>(proto.int32_data(), &t); break;
    case DType::kUInt16: CopyField<uint16_t>(proto.int32_data(), &t); break;
    case DType::kUInt8: CopyField<uint8_t>(proto.int32_data(), &t); break;
    case DType::kBool: CopyField<bool>(proto.int32_data(), &t); break;
    case DType::kFloat16: case DType::kBFloat16: CopyBits16(proto.int32_data(), &t); break;
    default: return Unimplemented(where, ": dtype ", DTypeName(dtype));
  }
  return t;
}

onnx::TensorProto TensorToProto(const Tensor& tensor, const std::string& name) {
  onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(static_cast<int32_t>(tensor.dtype()));
  for (int64_t d : tensor.shape()) p.add_dims(d);
  p.set_raw_data(std::string(static_cast<const char*>(tensor.raw_data()), tensor.SizeInBytes()));
  return p;
}

StatusOr<Tensor> ConstantNodeValue(const Node& n) {
  if (n.HasAttribute("value")) return TensorFromProto(n.attributes.at("value").t(), "");
  if (n.HasAttribute("value_float")) return Tensor::FromVector<float>({n.GetFloat("value_float", 0)}, {});
  if (n.HasAttribute("value_floats")) {
    std::vector<float> v = n.GetFloats("value_floats");
    return Tensor::FromVector<float>(v, {static_cast<int64_t>(v.size())});
  }
  if (n.HasAttribute("value_int")) return Tensor::FromVector<int64_t>({n.GetInt("value_int", 0)}, {});
  if (n.HasAttribute("value_ints")) {
    std::vector<int64_t> v = n.GetInts("value_ints");
    return Tensor::FromVector<int64_t>(v, {static_cast<int64_t>(v.size())});
  }
  if (n.HasAttribute("sparse_value") || n.HasAttribute("value_string") || n.HasAttribute("value_strings")) {
    return Unimplemented("sparse and string constants are not supported");
  }
  return InvalidArgument("Constant has no value attribute");
}

void FoldConstantNodes(Graph* g) {
  std::vector<Node> kept;
  for (Node& n : g->nodes) {
    bool constant = n.op_type == "Constant" && NormalizeDomain(n.domain).empty() && n.outputs.size() == 1 &&
                    !n.outputs[0].empty() && !g->initializers.count(n.outputs[0]);
    if (constant) {
      auto value = ConstantNodeValue(n);
      if (value.ok()) {
        g->AddInitializer(n.outputs[0], std::move(value).value());
        continue;
      }
    }
    kept.push_back(std::move(n));
  }
  g->nodes = std::move(kept);
}

}  // namespace ontrain
