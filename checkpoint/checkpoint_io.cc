// Checkpoint flatbuffer encoding and decoding (schema: ort_checkpoint.fbs).
#include "checkpoint/checkpoint_io.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <unistd.h>

#include "checkpoint/ort_checkpoint_generated.h"
#include "core/file_io.h"

namespace ontrain {

namespace fb = ::ontrain::fbs;

std::string ExternalCheckpointDataPath(const std::string& checkpoint_path) { return checkpoint_path + ".data"; }

namespace {

// The previous data file while a save replaces it (see SaveCheckpoint).
std::string PreviousDataPath(const std::string& checkpoint_path) { return checkpoint_path + ".data.prev"; }

// ---- writing ----

struct Writer {
  flatbuffers::FlatBufferBuilder builder{1 << 20};
  const CheckpointSaveOptions* options;
  bool external = false;
  std::string side;  // external data bytes

  std::vector<IDataTransfer*> devices;  // the state's and the options'

  StatusOr<Tensor> ToHost(const Tensor& t) { return CopyToHost(t, devices); }

  StatusOr<flatbuffers::Offset<fb::Tensor>> AddTensor(const std::string& name, const Tensor& t, bool nominal) {
    auto fname = builder.CreateString(name);
    if (nominal) {
      fb::TensorBuilder tb(builder);
      tb.add_name(fname);
      tb.add_data_type(static_cast<fb::TensorDataType>(t.defined() ? t.dtype() : DType::kFloat32));
      return tb.Finish();
    }
    if (t.dtype() == DType::kString || DTypeSize(t.dtype()) == 0) {
      return InvalidArgument("tensor \"", name, "\" has dtype ", DTypeName(t.dtype()), ", which a checkpoint cannot hold");
    }
    ONT_ASSIGN_OR_RETURN(Tensor host, ToHost(t));
    auto dims = builder.CreateVector(host.shape().data(), host.shape().size());
    flatbuffers::Offset<flatbuffers::Vector<uint8_t>> raw;
    int64_t offset = -1;
    if (external) {
      size_t align = DTypeSize(host.dtype()) >= 8 ? 8 : 4;
      side.resize((side.size() + align - 1) / align * align, '\0');
      offset = static_cast<int64_t>(side.size());
      side.append(static_cast<const char*>(host.raw_data()), host.SizeInBytes());
    } else {
      raw = builder.CreateVector(static_cast<const uint8_t*>(host.raw_data()), host.SizeInBytes());
    }
    fb::TensorBuilder tb(builder);
    tb.add_name(fname);
    tb.add_dims(dims);
    tb.add_data_type(static_cast<fb::TensorDataType>(host.dtype()));
    if (external) tb.add_external_data_offset(offset);
    else tb.add_raw_data(raw);
    return tb.Finish();
  }
};

template <typename T>
std::vector<std::string> SortedKeys(const std::map<std::string, T>& m) {
  std::vector<std::string> keys;
  for (const auto& kv : m) keys.push_back(kv.first);  // std::map iterates sorted
  return keys;
}

StatusOr<flatbuffers::Offset<fb::ModuleState>> WriteModuleState(Writer& w, const CheckpointState& s) {
  std::vector<std::string> order = w.options->keep_parameter_order ? s.parameter_order : SortedKeys(s.parameters);
  std::vector<flatbuffers::Offset<fb::Tensor>> trainable, frozen;
  for (const std::string& name : order) {
    const Parameter* p = s.FindParameter(name);
    if (p == nullptr) return Internal("parameter_order names unknown parameter \"", name, "\"");
    ONT_ASSIGN_OR_RETURN(auto t, w.AddTensor(name, p->data, s.is_nominal));
    (p->requires_grad ? trainable : frozen).push_back(t);
  }
  auto tv = w.builder.CreateVector(trainable);
  auto fv = w.builder.CreateVector(frozen);  // always present: ONNX Runtime 1.19.2 requires it
  fb::ModuleStateBuilder mb(w.builder);
  mb.add_requires_grad_params(tv);
  mb.add_frozen_params(fv);
  mb.add_is_nominal_state(s.is_nominal);
  mb.add_has_external_data(w.external);
  return mb.Finish();
}

StatusOr<flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::OptimizerGroup>>>> WriteGroups(
    Writer& w, const CheckpointState& s) {
  std::vector<flatbuffers::Offset<fb::OptimizerGroup>> groups;
  if (w.options->include_optimizer_state) {
    for (const auto& [gname, g] : s.optimizer_groups) {
      std::vector<flatbuffers::Offset<fb::ParameterOptimizerState>> states;
      for (const auto& [pname, ps] : g.param_states) {
        std::vector<flatbuffers::Offset<fb::Tensor>> moms;
        for (const auto& [mname, m] : ps.momentums) {
          ONT_ASSIGN_OR_RETURN(auto t, w.AddTensor(mname, m, false));
          moms.push_back(t);
        }
        auto pn = w.builder.CreateString(pname);
        auto mv = w.builder.CreateVector(moms);
        states.push_back(fb::CreateParameterOptimizerState(w.builder, pn, mv));
      }
      auto gn = w.builder.CreateString(gname);
      auto sv = w.builder.CreateVector(states);
      groups.push_back(fb::CreateOptimizerGroup(w.builder, gn, g.step, g.initial_learning_rate, sv));
    }
  }
  return w.builder.CreateVector(groups);
}

flatbuffers::Offset<fb::PropertyBag> WriteProperties(Writer& w, const PropertyBag& bag) {
  std::vector<flatbuffers::Offset<fb::IntProperty>> ints;
  std::vector<flatbuffers::Offset<fb::FloatProperty>> floats;
  std::vector<flatbuffers::Offset<fb::StringProperty>> strings;
  for (const auto& [name, v] : bag.values()) {  // sorted by name
    auto n = w.builder.CreateString(name);
    if (auto* i = std::get_if<int64_t>(&v)) ints.push_back(fb::CreateIntProperty(w.builder, n, *i));
    else if (auto* f = std::get_if<float>(&v)) floats.push_back(fb::CreateFloatProperty(w.builder, n, *f));
    else strings.push_back(fb::CreateStringProperty(w.builder, n, w.builder.CreateString(std::get<std::string>(v))));
  }
  auto iv = w.builder.CreateVector(ints);
  auto fv = w.builder.CreateVector(floats);
  auto sv = w.builder.CreateVector(strings);
  return fb::CreatePropertyBag(w.builder, iv, fv, sv);
}

int64_t TotalTensorBytes(const CheckpointState& s, bool with_optimizer) {
  int64_t total = 0;
  for (const auto& kv : s.parameters) total += static_cast<int64_t>(kv.second.data.SizeInBytes());
  if (with_optimizer) {
    for (const auto& g : s.optimizer_groups)
      for (const auto& ps : g.second.param_states)
        for (const auto& m : ps.second.momentums) total += static_cast<int64_t>(m.second.SizeInBytes());
  }
  return total;
}

// The property that ties a checkpoint to its external data file: "bytes=N fnv64=H", H the FNV-1a hash of the
// file's little-endian 64-bit words (and its last bytes), in hex. The two files are renamed one after the
// other, so a save interrupted between the renames leaves a main file beside another save's data file; the
// reader checks this property (where present: ONNX Runtime does not write it) and refuses such a pair
// instead of reading tensors at the wrong offsets. Not shown to the state's user.
constexpr char kExternalDataProperty[] = "ontrain.external_data";

std::string ExternalDataFingerprint(const std::string& data) {
  uint64_t h = 0xcbf29ce484222325ull;
  const uint64_t prime = 0x100000001b3ull;
  size_t i = 0;
  for (; i + 8 <= data.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, data.data() + i, 8);
    h = (h ^ word) * prime;
  }
  for (; i < data.size(); ++i) h = (h ^ static_cast<unsigned char>(data[i])) * prime;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "bytes=%zu fnv64=%016llx", data.size(), static_cast<unsigned long long>(h));
  return buf;
}

StatusOr<std::string> Encode(const CheckpointState& state, const CheckpointSaveOptions& options, bool allow_external,
                             std::string* side) {
  Writer w;
  w.options = &options;
  w.devices = state.devices;
  w.devices.insert(w.devices.end(), options.devices.begin(), options.devices.end());
  w.external = allow_external && !state.is_nominal &&
               TotalTensorBytes(state, options.include_optimizer_state) > options.external_data_threshold;
  ONT_ASSIGN_OR_RETURN(auto module, WriteModuleState(w, state));
  ONT_ASSIGN_OR_RETURN(auto groups, WriteGroups(w, state));
  flatbuffers::Offset<fb::PropertyBag> props;
  PropertyBag bag = state.properties;
  if (w.external) bag.Set(kExternalDataProperty, ExternalDataFingerprint(w.side));
  if (bag.size() > 0) props = WriteProperties(w, bag);
  fb::CheckpointBuilder cb(w.builder);
  cb.add_version(kCheckpointVersion);
  cb.add_module_state(module);
  cb.add_optimizer_groups(groups);
  if (bag.size() > 0) cb.add_property_bag(props);
  w.builder.Finish(cb.Finish(), fb::CheckpointIdentifier());
  if (side) *side = std::move(w.side);
  return std::string(reinterpret_cast<const char*>(w.builder.GetBufferPointer()), w.builder.GetSize());
}

// ---- reading ----

struct Reader {
  const std::string* side = nullptr;  // external data, when present
  bool nominal = false;

  StatusOr<Tensor> ReadTensor(const fb::Tensor* t, const char* where) {
    if (t == nullptr || t->name() == nullptr) return DataLoss(where, ": a tensor has no name");
    std::string name = t->name()->str();
    auto dt = DTypeFromOnnx(static_cast<int32_t>(t->data_type()));
    if (!dt.ok() || dt.value() == DType::kString) {
      return DataLoss(where, ": tensor \"", name, "\" has unsupported data type ", static_cast<int>(t->data_type()));
    }
    if (nominal) return Tensor::View(dt.value(), {0}, nullptr);
    Shape shape;
    // The verifier aligns a vector's length, not its 8-byte elements: a damaged file can leave dims 4 bytes
    // off, so they are copied out rather than loaded in place.
    if (const auto* dims = t->dims()) {
      const uint8_t* raw = reinterpret_cast<const uint8_t*>(dims->Data());
      for (flatbuffers::uoffset_t i = 0; i < dims->size(); ++i) {
        int64_t d;
        std::memcpy(&d, raw + sizeof(int64_t) * i, sizeof(d));
        shape.push_back(d);
      }
    }
    int64_t n = ShapeNumElements(shape);
    if (n < 0 || static_cast<uint64_t>(n) > (uint64_t{1} << 62) / DTypeSize(dt.value())) {
      return DataLoss(where, ": tensor \"", name, "\" has invalid dims ", ShapeToString(shape), " (negative, or more bytes than",
                      " any file holds)");
    }
    uint64_t need = static_cast<uint64_t>(n) * DTypeSize(dt.value());
    const uint8_t* src = nullptr;
    if (t->external_data_offset() >= 0) {
      if (side == nullptr) return DataLoss(where, ": tensor \"", name, "\" is in external data, which is missing");
      uint64_t off = static_cast<uint64_t>(t->external_data_offset());
      if (off > side->size() || need > side->size() - off) {
        return DataLoss(where, ": external data of tensor \"", name, "\" lies outside the ", side->size(), "-byte data file");
      }
      src = reinterpret_cast<const uint8_t*>(side->data()) + off;
    } else {
      uint64_t have = t->raw_data() ? t->raw_data()->size() : 0;
      if (have != need) {
        return DataLoss(where, ": tensor \"", name, "\" has ", have, " bytes of data but ", DTypeName(dt.value()),
                        ShapeToString(shape), " needs ", need);
      }
      src = t->raw_data() ? t->raw_data()->data() : nullptr;
    }
    ONT_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(dt.value(), shape, HostAllocator()));
    if (need) std::memcpy(out.raw_data(), src, need);
    out.CanonicalizeBools();
    return out;
  }
};

Status ReadParams(Reader& r, const flatbuffers::Vector<flatbuffers::Offset<fb::Tensor>>* v, bool trainable,
                  CheckpointState* s) {
  if (v == nullptr) return Status::OK();
  for (const fb::Tensor* t : *v) {
    ONT_ASSIGN_OR_RETURN(Tensor data, r.ReadTensor(t, trainable ? "trainable parameters" : "frozen parameters"));
    std::string name = t->name()->str();
    if (s->parameters.count(name)) return DataLoss("parameter \"", name, "\" appears twice");
    s->AddParameter(name, std::move(data), trainable);
  }
  return Status::OK();
}

Status ReadGroups(Reader& r, const fb::Checkpoint* c, CheckpointState* s) {
  if (c->optimizer_groups() == nullptr) return Status::OK();
  for (const fb::OptimizerGroup* g : *c->optimizer_groups()) {
    if (g == nullptr || g->group_name() == nullptr) return DataLoss("an optimizer group has no name");
    std::string gname = g->group_name()->str();
    if (s->optimizer_groups.count(gname)) return DataLoss("optimizer group \"", gname, "\" appears twice");
    OptimizerGroup& og = s->optimizer_groups[gname];
    og.step = g->step();
    og.initial_learning_rate = g->initial_learning_rate();
    og.learning_rate = og.initial_learning_rate;
    if (g->optimizer_states() == nullptr) continue;
    for (const fb::ParameterOptimizerState* ps : *g->optimizer_states()) {
      if (ps == nullptr || ps->param_name() == nullptr) return DataLoss("optimizer state without a parameter name");
      ParameterOptimizerState& st = og.param_states[ps->param_name()->str()];
      if (ps->momentums() == nullptr) continue;
      Reader plain = r;
      plain.nominal = false;
      for (const fb::Tensor* m : *ps->momentums()) {
        ONT_ASSIGN_OR_RETURN(Tensor t, plain.ReadTensor(m, "optimizer state"));
        st.momentums[m->name()->str()] = std::move(t);
      }
    }
  }
  return Status::OK();
}

Status ReadProperties(const fb::Checkpoint* c, CheckpointState* s) {
  const fb::PropertyBag* bag = c->property_bag();
  if (bag == nullptr) return Status::OK();
  if (bag->ints()) {
    for (const fb::IntProperty* p : *bag->ints()) {
      if (!p || !p->name()) return DataLoss("an int property has no name");
      s->properties.Set(p->name()->str(), p->value());
    }
  }
  if (bag->floats()) {
    for (const fb::FloatProperty* p : *bag->floats()) {
      if (!p || !p->name()) return DataLoss("a float property has no name");
      s->properties.Set(p->name()->str(), p->value());
    }
  }
  if (bag->strings()) {
    for (const fb::StringProperty* p : *bag->strings()) {
      if (!p || !p->name() || !p->value()) return DataLoss("a string property has no name or value");
      s->properties.Set(p->name()->str(), p->value()->str());
    }
  }
  return Status::OK();
}

StatusOr<CheckpointState> Decode(const void* data, size_t size, const std::string* side) {
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  if (data == nullptr || size < 8) return DataLoss("the checkpoint is ", size, " bytes: too short to be one");
  if (!flatbuffers::BufferHasIdentifier(bytes, fb::CheckpointIdentifier())) {
    return DataLoss("not an ONNX Runtime checkpoint: file identifier is not \"ODTC\"");
  }
  flatbuffers::Verifier verifier(bytes, size);
  if (!fb::VerifyCheckpointBuffer(verifier)) {
    return DataLoss("checkpoint verification failed: the ", size, "-byte buffer is truncated or corrupt");
  }
  const fb::Checkpoint* c = fb::GetCheckpoint(bytes);
  if (c->version() < 1 || c->version() > kCheckpointVersion) {
    return Unimplemented("checkpoint version ", c->version(), " is not supported (ontrain reads versions 1 and 2)");
  }
  CheckpointState s;
  Reader r;
  const fb::ModuleState* ms = c->module_state();
  if (ms) {
    s.is_nominal = ms->is_nominal_state();
    r.nominal = s.is_nominal;
    if (ms->has_external_data() || side) r.side = side;
    if (ms->has_external_data() && side == nullptr) {
      return DataLoss("the checkpoint keeps its tensors in an external data file, which was not found");
    }
    ONT_RETURN_IF_ERROR(ReadParams(r, ms->requires_grad_params(), true, &s));
    ONT_RETURN_IF_ERROR(ReadParams(r, ms->frozen_params(), false, &s));
  }
  ONT_RETURN_IF_ERROR(ReadGroups(r, c, &s));
  ONT_RETURN_IF_ERROR(ReadProperties(c, &s));
  if (s.properties.Contains(kExternalDataProperty)) {
    auto expected = s.properties.Get<std::string>(kExternalDataProperty);
    const std::string found = side != nullptr && expected.ok() ? ExternalDataFingerprint(*side) : "";
    if (!found.empty() && found != expected.value()) {
      return DataLoss("the external data file does not belong to this checkpoint (", found,
                      ", the checkpoint expects ", expected.value(),
                      "): a save was interrupted between writing the two files, or one was replaced");
    }
    s.properties.Remove(kExternalDataProperty);
  }
  return s;
}

// True when a well-formed checkpoint says its tensors are in the side file.
bool UsesExternalData(const std::string& bytes) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() < 8 || !flatbuffers::BufferHasIdentifier(p, fb::CheckpointIdentifier())) return false;
  flatbuffers::Verifier verifier(p, bytes.size());
  if (!fb::VerifyCheckpointBuffer(verifier)) return false;
  const fb::ModuleState* ms = fb::GetCheckpoint(p)->module_state();
  return ms != nullptr && ms->has_external_data();
}

}  // namespace

StatusOr<std::string> SerializeCheckpoint(const CheckpointState& state, const CheckpointSaveOptions& options) {
  return Encode(state, options, false, nullptr);
}

Status SaveCheckpoint(const CheckpointState& state, const std::string& path, const CheckpointSaveOptions& options) {
  std::string side;
  auto bytes = Encode(state, options, true, &side);
  if (!bytes.ok()) return bytes.status().WithContext(StrCat("saving checkpoint \"", path, "\""));
  if (side.empty()) return WriteFileAtomically(path, bytes.value());
  // The data file is renamed into place first, then the main file. Until the main file is in place the
  // previous data file stays reachable as "<data>.prev" (a hard link): a save interrupted between the two
  // renames leaves the previous main file beside the new data file, which its fingerprint refuses, and
  // LoadCheckpoint then reads the previous pair. A failed main write puts the previous data file back.
  const std::string data = ExternalCheckpointDataPath(path), prev = PreviousDataPath(path);
  ::unlink(prev.c_str());
  bool kept = ::link(data.c_str(), prev.c_str()) == 0;  // fails when there is no previous data file
  Status s = WriteFileAtomically(data, side);
  if (s.ok()) {
    s = WriteFileAtomically(path, bytes.value());
    if (!s.ok() && kept && ::rename(prev.c_str(), data.c_str()) == 0) kept = false;
  }
  if (kept) ::unlink(prev.c_str());
  return s;
}

StatusOr<CheckpointState> LoadCheckpointFromBuffer(const void* data, size_t size) {
  // The verifier checks alignment relative to the buffer's start: a caller's buffer at an odd address is
  // copied to an aligned one first.
  if (reinterpret_cast<uintptr_t>(data) % alignof(int64_t) != 0) {
    std::string aligned(static_cast<const char*>(data), size);
    return Decode(aligned.data(), aligned.size(), nullptr);
  }
  return Decode(data, size, nullptr);
}

StatusOr<CheckpointState> LoadCheckpoint(const std::string& path) {
  auto bytes = ReadFileToString(path);
  if (!bytes.ok()) return bytes.status().WithContext("loading checkpoint");
  std::string side;
  bool has_side = UsesExternalData(bytes.value());
  if (has_side) {
    auto s = ReadFileToString(ExternalCheckpointDataPath(path));
    if (!s.ok()) return s.status().WithContext(StrCat("loading the external data of checkpoint \"", path, "\""));
    side = std::move(s).value();
  }
  auto state = Decode(bytes->data(), bytes->size(), has_side ? &side : nullptr);
  if (!state.ok() && has_side && state.status().code() == StatusCode::kDataLoss) {
    // A save interrupted between its two renames: the previous data file, kept as "<data>.prev", belongs to
    // this main file.
    auto previous = ReadFileToString(PreviousDataPath(path));
    if (previous.ok()) {
      auto older = Decode(bytes->data(), bytes->size(), &previous.value());
      if (older.ok()) return older;
    }
  }
  if (!state.ok()) return state.status().WithContext(StrCat("loading checkpoint \"", path, "\""));
  return state;
}

}  // namespace ontrain
