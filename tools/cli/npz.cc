// .npy / .npz reading and writing. Every offset and size read from a file is checked against the file's
// length before use, so a truncated or corrupt archive is an error.
#include "tools/cli/npz.h"

#include <zlib.h>

#include <cstring>

#include "graph/model_io.h"

namespace ontrain {
namespace cli {

namespace {

struct Descr {
  const char* code;
  DType dtype;
};
const Descr kDescrs[] = {{"<f4", DType::kFloat32}, {"<f8", DType::kFloat64}, {"<f2", DType::kFloat16},
                         {"<i1", DType::kInt8},    {"|i1", DType::kInt8},    {"<i2", DType::kInt16},
                         {"<i4", DType::kInt32},   {"<i8", DType::kInt64},   {"|u1", DType::kUInt8},
                         {"<u1", DType::kUInt8},   {"<u2", DType::kUInt16},  {"<u4", DType::kUInt32},
                         {"<u8", DType::kUInt64},  {"|b1", DType::kBool}};

uint32_t Le32(const std::string& s, size_t off) {
  uint32_t v = 0;
  for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<uint8_t>(s[off + k]);
  return v;
}
uint64_t Le64(const std::string& s, size_t off) {
  return static_cast<uint64_t>(Le32(s, off)) | (static_cast<uint64_t>(Le32(s, off + 4)) << 32);
}
uint16_t Le16(const std::string& s, size_t off) {
  return static_cast<uint16_t>(static_cast<uint8_t>(s[off]) | (static_cast<uint8_t>(s[off + 1]) << 8));
}
void Put16(std::string* s, uint16_t v) {
  s->push_back(static_cast<char>(v & 0xff));
  s->push_back(static_cast<char>(v >> 8));
}
void Put32(std::string* s, uint32_t v) {
  for (int k = 0; k < 4; ++k) s->push_back(static_cast<char>((v >> (8 * k)) & 0xff));
}

// The value of 'key': in a NumPy header dict, up to the next ',' outside parentheses.
std::string HeaderField(const std::string& header, const std::string& key) {
  size_t p = header.find("'" + key + "'");
  if (p == std::string::npos) return "";
  p = header.find(':', p);
  if (p == std::string::npos) return "";
  size_t e = p + 1;
  int depth = 0;
  while (e < header.size() && !(depth == 0 && (header[e] == ',' || header[e] == '}'))) {
    if (header[e] == '(') depth++;
    if (header[e] == ')') depth--;
    e++;
  }
  std::string v = header.substr(p + 1, e - p - 1);
  size_t a = v.find_first_not_of(" '"), b = v.find_last_not_of(" '");
  return a == std::string::npos ? "" : v.substr(a, b - a + 1);
}

StatusOr<std::string> Inflate(const std::string& data, size_t expected, const std::string& where) {
  std::string out(expected, '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) return Internal("zlib initialisation failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(&out[0]);
  z.avail_out = static_cast<uInt>(out.size());
  int rc = inflate(&z, Z_FINISH);
  size_t produced = z.total_out;
  inflateEnd(&z);
  if (rc != Z_STREAM_END || produced != expected) return DataLoss(where, ": corrupt deflate data");
  return out;
}

}  // namespace

StatusOr<Tensor> ParseNpy(const std::string& b, const std::string& where) {
  if (b.size() < 10 || b.compare(0, 6, "\x93NUMPY") != 0) return DataLoss(where, " is not a .npy array");
  int major = static_cast<uint8_t>(b[6]);
  size_t header_len = major == 1 ? Le16(b, 8) : (b.size() >= 12 ? Le32(b, 8) : 0);
  size_t start = (major == 1 ? 10 : 12) + header_len;
  if (major < 1 || major > 3 || start > b.size()) return DataLoss(where, ": truncated .npy header");
  std::string header = b.substr(major == 1 ? 10 : 12, header_len);
  std::string descr = HeaderField(header, "descr"), fortran = HeaderField(header, "fortran_order");
  std::string shape_text = HeaderField(header, "shape");
  if (fortran != "False") return Unimplemented(where, ": Fortran-ordered arrays are not supported");
  DType dtype = DType::kUndefined;
  for (const Descr& d : kDescrs) if (descr == d.code) dtype = d.dtype;
  if (dtype == DType::kUndefined) return Unimplemented(where, ": element type '", descr, "' is not supported");
  Shape shape;
  for (size_t i = 0; i < shape_text.size();) {
    size_t j = shape_text.find_first_of("0123456789", i);
    if (j == std::string::npos) break;
    size_t k = shape_text.find_first_not_of("0123456789", j);
    std::string digits = shape_text.substr(j, k == std::string::npos ? std::string::npos : k - j);
    if (digits.size() > 18) return DataLoss(where, ": dimension ", digits, " in the .npy header is too large");
    shape.push_back(std::stoll(digits));
    i = k == std::string::npos ? shape_text.size() : k;
  }
  int64_t n = ShapeNumElements(shape);
  // The declared size is checked against the bytes present before anything is allocated.
  if (n < 0 || static_cast<uint64_t>(n) > (b.size() - start) / DTypeSize(dtype) ||
      start + static_cast<size_t>(n) * DTypeSize(dtype) != b.size()) {
    return DataLoss(where, ": holds ", b.size() - start, " bytes of data for shape ", ShapeToString(shape));
  }
  ONT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, shape, HostAllocator()));
  if (t.SizeInBytes()) std::memcpy(t.raw_data(), b.data() + start, t.SizeInBytes());
  t.CanonicalizeBools();
  return t;
}

StatusOr<std::string> SerializeNpy(const Tensor& t) {
  // numpy has no bfloat16: such arrays are written as float32, which holds every bfloat16 value exactly
  // (a bfloat16 is the top half of a float32).
  Tensor data = t;
  if (t.dtype() == DType::kBFloat16) {
    ONT_ASSIGN_OR_RETURN(data, Tensor::Allocate(DType::kFloat32, t.shape(), HostAllocator()));
    const uint16_t* src = t.data<uint16_t>();
    uint32_t* dst = data.data<uint32_t>();
    for (int64_t i = 0; i < t.NumElements(); ++i) dst[i] = static_cast<uint32_t>(src[i]) << 16;
  }
  const char* code = nullptr;
  for (const Descr& d : kDescrs) {
    if (d.dtype == data.dtype()) {
      code = d.code;
      break;
    }
  }
  if (code == nullptr) return Unimplemented("arrays of ", DTypeName(t.dtype()), " cannot be written as .npy");
  std::string shape;
  for (int64_t d : data.shape()) shape += std::to_string(d) + ", ";
  if (data.rank() > 1) shape.resize(shape.size() - 2);
  std::string header = std::string("{'descr': '") + code + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  Put16(&out, static_cast<uint16_t>(header.size()));
  out += header;
  out.append(static_cast<const char*>(data.raw_data()), data.SizeInBytes());
  return out;
}

StatusOr<Tensor> LoadNpy(const std::string& path) {
  ONT_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  return ParseNpy(bytes, path);
}

StatusOr<std::vector<std::pair<std::string, Tensor>>> LoadNpz(const std::string& path) {
  ONT_ASSIGN_OR_RETURN(std::string z, ReadFileToString(path));
  // 1. The end-of-central-directory record: the last "PK\5\6" within the final 64 KiB.
  size_t eocd = std::string::npos;
  for (size_t i = z.size() >= 22 ? z.size() - 22 : 0; z.size() >= 22; --i) {
    if (Le32(z, i) == 0x06054b50) {
      eocd = i;
      break;
    }
    if (i == 0 || z.size() - i > 65557) break;
  }
  if (eocd == std::string::npos) return DataLoss(path, " is not a zip (.npz) archive");
  size_t entries = Le16(z, eocd + 10);
  size_t cd = Le32(z, eocd + 16);
  std::vector<std::pair<std::string, Tensor>> out;
  // 2. Each central-directory entry locates its local header and data.
  for (size_t e = 0, p = cd; e < entries; ++e) {
    if (p + 46 > z.size() || Le32(z, p) != 0x02014b50) return DataLoss(path, ": corrupt zip directory");
    uint16_t method = Le16(z, p + 10);
    uint64_t csize = Le32(z, p + 20), usize = Le32(z, p + 24), local = Le32(z, p + 42);
    size_t name_len = Le16(z, p + 28), extra_len = Le16(z, p + 30), comment_len = Le16(z, p + 32);
    if (p + 46 + name_len + extra_len > z.size()) return DataLoss(path, ": corrupt zip directory");
    std::string name = z.substr(p + 46, name_len);
    // zip64: sizes and offset saturated at 0xFFFFFFFF live in extra field 0x0001, in this order.
    const size_t extra_end = p + 46 + name_len + extra_len;
    for (size_t x = p + 46 + name_len; x + 4 <= extra_end;) {
      uint16_t id = Le16(z, x), len = Le16(z, x + 2);
      if (x + 4 + len > extra_end) return DataLoss(path, ": corrupt zip extra field in entry ", name);
      size_t q = x + 4;
      if (id == 0x0001) {
        if (usize == 0xFFFFFFFFu && q + 8 <= x + 4 + len) { usize = Le64(z, q); q += 8; }
        if (csize == 0xFFFFFFFFu && q + 8 <= x + 4 + len) { csize = Le64(z, q); q += 8; }
        if (local == 0xFFFFFFFFu && q + 8 <= x + 4 + len) { local = Le64(z, q); }
      }
      x += 4 + len;
    }
    p += 46 + name_len + extra_len + comment_len;
    if (local > z.size() || z.size() - local < 30 || Le32(z, local) != 0x04034b50) {
      return DataLoss(path, ": corrupt entry ", name);
    }
    size_t data = local + 30 + Le16(z, local + 26) + Le16(z, local + 28);
    if (data > z.size() || csize > z.size() - data) return DataLoss(path, ": entry ", name, " is truncated");
    // Deflate expands at most ~1032:1; a larger declared size is refused before it is allocated.
    if (method == 8 && usize > csize * 1032 + 1024) {
      return DataLoss(path, ": entry ", name, " declares ", usize, " bytes from ", csize, " compressed ones");
    }
    std::string raw = z.substr(data, csize);
    if (method == 8) {
      ONT_ASSIGN_OR_RETURN(raw, Inflate(raw, usize, path + ":" + name));
    } else if (method != 0) {
      return Unimplemented(path, ": entry ", name, " uses zip compression method ", method);
    }
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) name.resize(name.size() - 4);
    ONT_ASSIGN_OR_RETURN(Tensor t, ParseNpy(raw, path + ":" + name));
    out.push_back({name, t});
  }
  return out;
}

Status SaveNpz(const std::vector<std::pair<std::string, Tensor>>& arrays, const std::string& path) {
  std::string zip, dir;
  for (const auto& [name, t] : arrays) {
    auto npy = SerializeNpy(t);
    if (!npy.ok()) return npy.status().WithContext(StrCat("array \"", name, "\" of \"", path, "\""));
    std::string data = std::move(npy).value(), fname = name + ".npy";
    // Plain zip (no zip64) addresses 4 GiB and names of up to 64 KiB.
    if (data.size() + zip.size() >= 0xFFFFFFFFu || fname.size() > 0xFFFF || arrays.size() > 0xFFFF) {
      return Unimplemented("\"", path, "\": array \"", name, "\" does not fit a plain zip archive (over 4 GiB, or a name ",
                           "over 64 KiB, or over 65535 arrays); write fewer or smaller outputs");
    }
    uint32_t crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
    uint32_t offset = static_cast<uint32_t>(zip.size());
    auto header = [&](std::string* s, bool central) {
      Put32(s, central ? 0x02014b50 : 0x04034b50);
      if (central) Put16(s, 20);  // version made by
      Put16(s, 20);               // version needed
      Put16(s, 0);                // flags
      Put16(s, 0);                // stored
      Put16(s, 0);                // time
      Put16(s, 0x21);             // date: 1980-01-01
      Put32(s, crc);
      Put32(s, static_cast<uint32_t>(data.size()));
      Put32(s, static_cast<uint32_t>(data.size()));
      Put16(s, static_cast<uint16_t>(fname.size()));
      Put16(s, 0);  // extra
      if (central) {
        Put16(s, 0);  // comment
        Put16(s, 0);  // disk
        Put16(s, 0);  // internal attributes
        Put32(s, 0);  // external attributes
        Put32(s, offset);
      }
      *s += fname;
    };
    header(&zip, false);
    zip += data;
    header(&dir, true);
  }
  uint32_t cd = static_cast<uint32_t>(zip.size());
  zip += dir;
  Put32(&zip, 0x06054b50);
  Put16(&zip, 0);
  Put16(&zip, 0);
  Put16(&zip, static_cast<uint16_t>(arrays.size()));
  Put16(&zip, static_cast<uint16_t>(arrays.size()));
  Put32(&zip, static_cast<uint32_t>(dir.size()));
  Put32(&zip, cd);
  Put16(&zip, 0);
  return WriteFileAtomically(path, zip);
}

}  // namespace cli
}  // namespace ontrain
