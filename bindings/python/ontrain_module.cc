// The native half of the Python package (`ontrain._ontrain`): CheckpointState and TrainingSession over
// numpy arrays. ontrain/api.py builds ONNX Runtime's Python training API (CheckpointState, Module,
// Optimizer, the schedulers) on these. Engine errors become RuntimeError with the engine's message; steps
// release the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/checkpoint_state.h"
#include "engine/provider_list.h"
#include "engine/training_session.h"
#include "graph/artifacts.h"
#include "graph/model_io.h"
#include "scheduler/lr_scheduler.h"

namespace py = pybind11;

namespace ontrain {
namespace {

// Engine errors become RuntimeError, except going over a memory limit, which is MemoryError.
void Check(const Status& s) {
  if (s.ok()) return;
  if (s.code() == StatusCode::kResourceExhausted) {
    PyErr_SetString(PyExc_MemoryError, s.ToString().c_str());
    throw py::error_already_set();
  }
  throw std::runtime_error(s.ToString());
}

template <typename T>
T Unwrap(StatusOr<T> v) {
  Check(v.status());
  return std::move(v).value();
}

// numpy dtype -> DType (the element types a Tensor can hold).
DType FromNumpy(const py::dtype& dt, const std::string& what) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'f' && size == 4) return DType::kFloat32;
  if (kind == 'f' && size == 8) return DType::kFloat64;
  if (kind == 'f' && size == 2) return DType::kFloat16;
  if (kind == 'i' && size == 8) return DType::kInt64;
  if (kind == 'i' && size == 4) return DType::kInt32;
  if (kind == 'i' && size == 2) return DType::kInt16;
  if (kind == 'i' && size == 1) return DType::kInt8;
  if (kind == 'u' && size == 1) return DType::kUInt8;
  if (kind == 'u' && size == 2) return DType::kUInt16;
  if (kind == 'u' && size == 4) return DType::kUInt32;
  if (kind == 'u' && size == 8) return DType::kUInt64;
  if (kind == 'b' && size == 1) return DType::kBool;
  throw std::invalid_argument(what + ": numpy dtype " + dt.attr("name").cast<std::string>() + " has no ONNX tensor type");
}

py::dtype ToNumpy(DType t) {
  switch (t) {
    case DType::kFloat32: return py::dtype::of<float>();
    case DType::kFloat64: return py::dtype::of<double>();
    case DType::kFloat16: return py::dtype("float16");
    case DType::kInt64: return py::dtype::of<int64_t>();
    case DType::kInt32: return py::dtype::of<int32_t>();
    case DType::kInt16: return py::dtype::of<int16_t>();
    case DType::kInt8: return py::dtype::of<int8_t>();
    case DType::kUInt8: return py::dtype::of<uint8_t>();
    case DType::kUInt16: return py::dtype::of<uint16_t>();
    case DType::kUInt32: return py::dtype::of<uint32_t>();
    case DType::kUInt64: return py::dtype::of<uint64_t>();
    case DType::kBool: return py::dtype::of<bool>();
    default: throw std::invalid_argument(std::string("tensor type ") + DTypeName(t) + " has no numpy dtype");
  }
}

// A C-contiguous numpy array (a copy when `a` is not one already) and a Tensor viewing it.
struct Fed {
  py::array array;
  Tensor tensor;
};

Fed FromArray(const py::handle& obj, const std::string& what) {
  py::array a = py::module_::import("numpy").attr("ascontiguousarray")(obj);
  DType t = FromNumpy(a.dtype(), what);
  Shape shape;
  for (py::ssize_t d = 0; d < a.ndim(); ++d) shape.push_back(a.shape(d));
  Tensor view = Tensor::View(t, shape, a.mutable_data());
  return {a, view};
}

// A host tensor copied into a new numpy array.
py::array ToArray(const Tensor& t, const std::string& what) {
  if (!t.device().is_host()) throw std::runtime_error(what + " is not on the host");
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  py::array a(ToNumpy(t.dtype()), shape);
  if (t.SizeInBytes() > 0) std::memcpy(a.mutable_data(), t.raw_data(), t.SizeInBytes());
  return a;
}

Parameter& FindOrThrow(CheckpointState& s, const std::string& name) {
  Parameter* p = s.FindParameter(name);
  if (p == nullptr) throw py::key_error("no parameter named '" + name + "' in the checkpoint");
  return *p;
}

// A session with the providers it runs on and the state it binds (kept alive with it).
class Session {
 public:
  Session(std::shared_ptr<CheckpointState> state, const std::string& train, const std::string& eval,
          const std::string& optimizer, const std::string& providers, int threads, int64_t memory_limit_bytes,
          bool graph_capture, bool deterministic)
      : state_(std::move(state)) {
    if (memory_limit_bytes < 0) throw std::invalid_argument("memory_limit_bytes must be >= 0 (0: no limit)");
    for (const std::string& path : {train, eval}) {
      if (path.empty()) continue;
      Model m = Unwrap(LoadModel(path));
      for (const ValueInfo& vi : m.graph.inputs) declared_[vi.name] = vi;
    }
    ProviderListOptions po;
    po.threads = threads;
    po.graph_capture = graph_capture;
    po.deterministic = deterministic;
    providers_ = Unwrap(CreateProviders(providers, po));
    TrainingSessionOptions options;
    options.providers = providers_.ordered;
    options.memory_limit_bytes = memory_limit_bytes;
    session_ = Unwrap(TrainingSession::Create(options, state_.get(), ModelSource::FromPath(train),
                                             eval.empty() ? ModelSource{} : ModelSource::FromPath(eval),
                                             optimizer.empty() ? ModelSource{} : ModelSource::FromPath(optimizer)));
  }

  py::list Step(const py::sequence& inputs, bool train) {
    const auto& names = train ? session_->training_input_names() : session_->eval_input_names();
    if (py::len(inputs) != names.size()) {
      throw std::invalid_argument(std::string(train ? "train" : "eval") + " step takes " +
                                  std::to_string(names.size()) + " inputs, got " + std::to_string(py::len(inputs)));
    }
    std::vector<Fed> fed;
    std::vector<Tensor> tensors;
    for (size_t i = 0; i < names.size(); ++i) {
      fed.push_back(FromArray(Conform(names[i], inputs[i]), "input '" + names[i] + "'"));
      tensors.push_back(fed.back().tensor);
    }
    std::vector<Tensor> outputs;
    Status s;
    {
      py::gil_scoped_release release;
      s = train ? session_->TrainStep(tensors, &outputs) : session_->EvalStep(tensors, &outputs);
    }
    Check(s);
    const auto& out_names = train ? session_->training_output_names() : session_->eval_output_names();
    py::list result;
    for (size_t i = 0; i < outputs.size(); ++i) {
      result.append(ToArray(outputs[i], "output '" + (i < out_names.size() ? out_names[i] : std::to_string(i)) + "'"));
    }
    return result;
  }

  TrainingSession& get() { return *session_; }

 private:
  // The array for a declared input: cast to the declared element type where numpy calls the cast safe
  // (no value changes: int32 -> int64, float32 -> float64, bool -> any), and its shape checked against the
  // declared one; anything else is a ValueError naming the input and both types.
  py::object Conform(const std::string& name, const py::handle& obj) const {
    py::module_ np = py::module_::import("numpy");
    py::array a = np.attr("asarray")(obj);
    auto it = declared_.find(name);
    // Undeclared, or a type numpy lacks (bfloat16, strings): the engine checks the array as given.
    if (it == declared_.end() || it->second.dtype == DType::kUndefined || it->second.dtype == DType::kBFloat16 ||
        it->second.dtype == DType::kString) {
      return std::move(a);
    }
    const ValueInfo& vi = it->second;
    py::dtype want = ToNumpy(vi.dtype);
    if (!a.dtype().equal(want)) {
      if (!np.attr("can_cast")(a.dtype(), want, "safe").cast<bool>()) {
        throw std::invalid_argument("input '" + name + "' is declared " + vi.TypeString() + "; a " +
                                    a.dtype().attr("name").cast<std::string>() + " array cannot become " +
                                    DTypeName(vi.dtype) + " without changing values");
      }
      a = a.attr("astype")(want);
    }
    if (vi.has_shape) {
      bool ok = static_cast<size_t>(a.ndim()) == vi.dims.size();
      for (size_t d = 0; ok && d < vi.dims.size(); ++d) ok = !vi.dims[d].known() || vi.dims[d].value == a.shape(d);
      if (!ok) {
        std::string got = "[";
        for (py::ssize_t d = 0; d < a.ndim(); ++d) got += (d ? "," : "") + std::to_string(a.shape(d));
        throw std::invalid_argument("input '" + name + "' is declared " + vi.TypeString() + ", got shape " + got + "]");
      }
    }
    return std::move(a);
  }

  std::map<std::string, ValueInfo> declared_;  // the train and eval models' inputs
  std::shared_ptr<CheckpointState> state_;
  ProviderList providers_;
  std::unique_ptr<TrainingSession> session_;
};

}  // namespace
}  // namespace ontrain

PYBIND11_MODULE(_ontrain, m) {
  using namespace ontrain;
  m.doc() = "ontrain's native training engine (use ontrain.api)";

  py::class_<CheckpointState, std::shared_ptr<CheckpointState>>(m, "CheckpointState")
      .def_static("load", [](const std::string& path) {
        return std::make_shared<CheckpointState>(Unwrap(LoadCheckpoint(path)));
      })
      .def("save", [](const CheckpointState& s, const std::string& path, bool include_optimizer_state) {
        CheckpointSaveOptions options;
        options.include_optimizer_state = include_optimizer_state;
        Check(SaveCheckpoint(s, path, options));
      })
      .def("parameter_names", [](const CheckpointState& s) { return s.parameter_order; })
      .def("get_parameter", [](CheckpointState& s, const std::string& name) {
        return ToArray(FindOrThrow(s, name).data, "parameter '" + name + "'");
      })
      .def("requires_grad", [](CheckpointState& s, const std::string& name) { return FindOrThrow(s, name).requires_grad; })
      .def("set_parameter", [](CheckpointState& s, const std::string& name, const py::object& value) {
        Parameter& p = FindOrThrow(s, name);
        Fed f = FromArray(value, "value for parameter '" + name + "'");
        if (f.tensor.dtype() != p.data.dtype() || f.tensor.shape() != p.data.shape()) {
          throw std::invalid_argument("parameter '" + name + "' is " + DTypeName(p.data.dtype()) + " " +
                                      ShapeToString(p.data.shape()) + ", the value is " + DTypeName(f.tensor.dtype()) +
                                      " " + ShapeToString(f.tensor.shape()));
        }
        if (!p.data.device().is_host()) throw std::runtime_error("parameter '" + name + "' is not on the host");
        std::memcpy(p.data.raw_data(), f.tensor.raw_data(), p.data.SizeInBytes());
      })
      .def("property_names", [](const CheckpointState& s) {
        std::vector<std::string> names;
        for (const auto& kv : s.properties.values()) names.push_back(kv.first);
        return names;
      })
      .def("has_property", [](const CheckpointState& s, const std::string& name) { return s.properties.Contains(name); })
      .def("get_property", [](const CheckpointState& s, const std::string& name) -> py::object {
        if (!s.properties.Contains(name)) throw py::key_error("no property named '" + name + "' in the checkpoint");
        PropertyValue v = Unwrap(s.properties.GetValue(name));
        if (auto* i = std::get_if<int64_t>(&v)) return py::int_(*i);
        if (auto* f = std::get_if<float>(&v)) return py::float_(*f);
        return py::str(std::get<std::string>(v));
      })
      .def("set_property", [](CheckpointState& s, const std::string& name, const py::object& value) {
        if (py::isinstance<py::bool_>(value)) throw std::invalid_argument("property '" + name + "': bool is not a property type");
        if (py::isinstance<py::int_>(value)) s.properties.Set(name, value.cast<int64_t>());
        else if (py::isinstance<py::float_>(value)) s.properties.Set(name, value.cast<float>());
        else if (py::isinstance<py::str>(value)) s.properties.Set(name, value.cast<std::string>());
        else throw std::invalid_argument("property '" + name + "' must be an int, a float or a str");
      })
      .def("remove_property", [](CheckpointState& s, const std::string& name) { s.properties.Remove(name); });

  // Training artifacts from a forward model given as serialized bytes or as a path (ontrain's generator,
  // graph/artifacts.h), written into out_dir.
  m.def("generate_artifacts", [](const py::bytes& model, const std::string& path, const std::string& out_dir,
                                 const std::string& loss, const std::string& optimizer,
                                 const std::vector<std::string>& requires_grad, const std::vector<std::string>& frozen,
                                 const std::vector<std::string>& extra_outputs) {
    std::string bytes = model;
    ArtifactOptions o;
    o.loss = Unwrap(ParseLossKind(loss));
    if (optimizer == "AdamW") o.optimizer = OptimizerKind::kAdamW;
    else if (optimizer == "SGD") o.optimizer = OptimizerKind::kSGD;
    else throw std::invalid_argument("unknown optimizer '" + optimizer + "'; expected AdamW or SGD");
    o.requires_grad = requires_grad;
    o.frozen = frozen;
    o.extra_outputs = extra_outputs;
    Status st;
    {
      py::gil_scoped_release release;
      StatusOr<Model> forward = path.empty() ? LoadModelFromBuffer(bytes.data(), bytes.size()) : LoadModel(path);
      if (!forward.ok()) {
        st = forward.status();
      } else {
        StatusOr<Artifacts> a = GenerateArtifacts(forward.value(), o);
        st = a.ok() ? WriteArtifacts(a.value(), out_dir) : a.status();
      }
    }
    Check(st);
  }, py::arg("model_bytes"), py::arg("model_path"), py::arg("out_dir"), py::arg("loss"), py::arg("optimizer"),
     py::arg("requires_grad"), py::arg("frozen"), py::arg("extra_outputs"));

  py::class_<Session>(m, "TrainingSession")
      .def(py::init<std::shared_ptr<CheckpointState>, const std::string&, const std::string&, const std::string&,
                    const std::string&, int, int64_t, bool, bool>(),
           py::arg("state"), py::arg("train_model"), py::arg("eval_model") = "", py::arg("optimizer_model") = "",
           py::arg("providers") = "cpu", py::arg("threads") = 0, py::arg("memory_limit_bytes") = 0,
           py::arg("graph_capture") = true, py::arg("deterministic") = true)
      .def("train_step", [](Session& s, const py::sequence& in) { return s.Step(in, true); })
      .def("eval_step", [](Session& s, const py::sequence& in) { return s.Step(in, false); })
      .def("lazy_reset_grad", [](Session& s) { s.get().LazyResetGrad(); })
      .def("optimizer_step", [](Session& s) {
        Status st;
        {
          py::gil_scoped_release release;
          st = s.get().OptimizerStep();
        }
        Check(st);
      })
      .def("set_learning_rate", [](Session& s, float lr) { Check(s.get().SetLearningRate(lr)); })
      .def("get_learning_rate", [](Session& s) { return Unwrap(s.get().GetLearningRate()); })
      .def("register_scheduler", [](Session& s, const std::string& kind, int64_t warmup, int64_t total, float initial_lr,
                                    int64_t step_size, float gamma, float min_ratio) {
        LrSchedule sched;
        sched.kind = Unwrap(ParseScheduleKind(kind));
        sched.warmup_steps = warmup;
        sched.total_steps = total;
        sched.step_size = step_size;
        sched.gamma = gamma;
        sched.min_ratio = min_ratio;
        Check(s.get().RegisterScheduler(sched, initial_lr));
      }, py::arg("kind"), py::arg("warmup_step_count"), py::arg("total_step_count"), py::arg("initial_lr"),
         py::arg("step_size") = 1, py::arg("gamma") = 0.1f, py::arg("min_ratio") = 0.0f)
      .def("scheduler_step", [](Session& s) { Check(s.get().SchedulerStep()); })
      .def("get_parameters_size", [](Session& s, bool trainable_only) {
        return Unwrap(s.get().GetParametersSize(trainable_only));
      })
      .def("copy_parameters_to_buffer", [](Session& s, bool trainable_only) {
        size_t n = Unwrap(s.get().GetParametersSize(trainable_only));
        py::array_t<float> out(static_cast<py::ssize_t>(n));
        Tensor view = Tensor::View(DType::kFloat32, {static_cast<int64_t>(n)}, out.mutable_data());
        Check(s.get().CopyParametersToBuffer(&view, trainable_only));
        return out;
      })
      .def("copy_buffer_to_parameters", [](Session& s, const py::object& buffer, bool trainable_only) {
        Fed f = FromArray(buffer, "parameter buffer");
        Check(s.get().CopyBufferToParameters(f.tensor, trainable_only));
      })
      .def("export_model_for_inferencing", [](Session& s, const std::string& path, const std::vector<std::string>& outputs) {
        Check(s.get().ExportModelForInferencing(path, outputs));
      })
      .def("gradient", [](Session& s, const std::string& name) -> py::object {
        const Tensor* g = s.get().gradient(name);
        if (g == nullptr) return py::none();
        Tensor host = g->device().is_host() ? *g : Unwrap(s.get().train_executor().ToHost(*g));
        return ToArray(host, "gradient of '" + name + "'");
      })
      .def("has_eval_model", [](Session& s) { return s.get().has_eval_model(); })
      .def("has_optimizer", [](Session& s) { return s.get().has_optimizer(); })
      .def("train_input_names", [](Session& s) { return s.get().training_input_names(); })
      .def("train_output_names", [](Session& s) { return s.get().training_output_names(); })
      .def("eval_input_names", [](Session& s) { return s.get().eval_input_names(); })
      .def("eval_output_names", [](Session& s) { return s.get().eval_output_names(); });
}
