// `ontrain bench`: times full training steps (TrainStep + OptimizerStep + LazyResetGrad) of any artifacts
// folder on a provider list, with synthetic inputs of the training model's input shapes: float inputs
// uniform in [-1, 1) from a fixed seed, integer inputs (class labels) zero. Symbolic dims take
// --batch-size. Prints the median step time with its 10th and 90th percentiles, the steps per second that
// the median gives, the median of each part, peak RSS and C++ heap allocations per step after warm-up;
// --json FILE writes the same; --profile adds kernel time per op type, --profile-shapes per op type and
// input shapes, both with the GFLOP/s of the matrix ops and the step against its floor: the step's matrix
// FLOPs (engine/op_flops.h) at the FMA peak measured on this core, on the cores the run used. With a device
// provider it also says whether each graph's runs were recorded and replayed (graph capture; the JSON counts
// the replayed runs), and --no-graph-capture times every kernel launched eagerly instead.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>


#include "core/file_io.h"
#include "engine/op_profile.h"
#include "tools/cli/commands.h"
#include "tools/cli/flags.h"
#include "tools/cli/heap_count.h"
#include "tools/cli/session_loader.h"

namespace ontrain {
namespace cli {
namespace {

StatusOr<std::vector<Tensor>> SyntheticInputs(const OpenSession& o, int64_t batch) {
  std::vector<Tensor> inputs;
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (const std::string& name : o.session->training_input_names()) {
    const ValueInfo* info = nullptr;
    for (const ValueInfo& v : o.training_model.graph.inputs) if (v.name == name) info = &v;
    if (info == nullptr || !info->has_shape) return InvalidArgument("training input \"", name, "\" has no declared shape");
    Shape shape;
    for (const Dim& d : info->dims) shape.push_back(d.known() ? d.value : batch);
    ONT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(info->dtype, shape, HostAllocator()));
    std::memset(t.raw_data(), 0, t.SizeInBytes());
    if (info->dtype == DType::kFloat32) {
      for (int64_t i = 0; i < t.NumElements(); ++i) t.data<float>()[i] = uni(rng);
    } else if (IsFloatingPoint(info->dtype)) {
      return Unimplemented("bench fills float32 and integer inputs; \"", name, "\" is ", DTypeName(info->dtype));
    }
    inputs.push_back(t);
  }
  return inputs;
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

// This process's peak resident set (VmHWM). Not getrusage's ru_maxrss: Linux carries that across exec, so a
// process started by a large one (PyTorch running the comparison) would report its parent's size.
double PeakRssMb() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  double kb = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "VmHWM:", 6) == 0) kb = std::atof(line + 6);
  }
  std::fclose(f);
  return kb / 1024.0;
}

}  // namespace

Status Bench(const std::vector<std::string>& args) {
  ONT_ASSIGN_OR_RETURN(Flags f, Flags::Parse(args, {"artifacts", "provider", "batch-size", "steps", "warmup", "threads",
                                                    "json"},
                                             {"profile", "profile-shapes", "gemm", "no-pool-tuning", "no-graph-capture",
                                              "flush-denormals", "nondeterministic"}));
  ONT_ASSIGN_OR_RETURN(int64_t batch, f.GetInt("batch-size", 64));
  ONT_ASSIGN_OR_RETURN(int64_t steps, f.GetInt("steps", 200));
  ONT_ASSIGN_OR_RETURN(int64_t warmup, f.GetInt("warmup", 40));
  ONT_ASSIGN_OR_RETURN(int64_t threads, f.GetInt("threads", 0));
  if (f.Has("gemm")) return BenchGemm(threads > 0 ? static_cast<int>(threads) : 2);
  if (batch < 1 || steps < 1 || warmup < 0) return InvalidArgument("--batch-size and --steps must be >= 1");
  OpenOptions oo;
  oo.threads = static_cast<int>(threads);
  oo.tune_pool = !f.Has("no-pool-tuning");
  oo.graph_capture = !f.Has("no-graph-capture");
  oo.flush_denormals = f.Has("flush-denormals");
  oo.deterministic = !f.Has("nondeterministic");
  oo.providers = f.Get("provider", "cpu");
  ONT_ASSIGN_OR_RETURN(OpenSession o, OpenArtifacts(f.Get("artifacts"), oo));
  ONT_ASSIGN_OR_RETURN(std::vector<Tensor> inputs, SyntheticInputs(o, batch));
  // Per step: the whole step and its three parts (milliseconds), and the heap allocations it made.
  std::vector<double> ms, train_ms, opt_ms, reset_ms;
  int64_t allocs_before = 0;
  float loss = 0;
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  std::vector<Tensor> out;
  for (auto* v : {&ms, &train_ms, &opt_ms, &reset_ms}) v->reserve(static_cast<size_t>(steps));  // no growth while counting
  const bool profile = f.Has("profile") || f.Has("profile-shapes");
  for (int64_t s = 0; s < warmup + steps; ++s) {
    // Profiling starts a step before the timed ones, whose tally then starts from zero: the first profiled
    // step makes the tally's entries, and its allocations are not the step's.
    if (profile && s == std::max<int64_t>(warmup - 1, 0)) EnableOpProfile(true, f.Has("profile-shapes"));
    if (s == warmup) {
      if (profile) ResetOpProfile();
      allocs_before = HeapAllocations();
    }
    auto t0 = Clock::now();
    Status st = o.session->TrainStep(inputs, &out);
    if (!st.ok()) return st.WithContext(StrCat("step ", s));  // the context string only when needed
    auto t1 = Clock::now();
    ONT_RETURN_IF_ERROR(o.session->OptimizerStep());
    auto t2 = Clock::now();
    o.session->LazyResetGrad();
    auto t3 = Clock::now();
    if (s >= warmup) {
      ms.push_back(since(t0, t3));
      train_ms.push_back(since(t0, t1));
      opt_ms.push_back(since(t1, t2));
      reset_ms.push_back(since(t2, t3));
    }
    if (!out.empty() && out[0].dtype() == DType::kFloat32 && out[0].NumElements() > 0) loss = out[0].data<float>()[0];
  }
  double allocs_per_step = static_cast<double>(HeapAllocations() - allocs_before) / static_cast<double>(steps);
  double peak_rss_mb = PeakRssMb();
  double median = Percentile(ms, 0.5), p10 = Percentile(ms, 0.1), p90 = Percentile(ms, 0.9);
  std::string providers;
  for (IExecutionProvider* p : o.providers.ordered) providers += (providers.empty() ? "" : ",") + p->name();
  std::printf("bench %s on %s, batch %lld: %.3f ms/step median (p10 %.3f, p90 %.3f) over %lld steps, %.1f steps/s, "
              "last loss %g\n",
              f.Get("artifacts").c_str(), providers.c_str(), static_cast<long long>(batch), median, p10, p90,
              static_cast<long long>(steps), 1000.0 / median, loss);
  std::printf("  parts (median ms): TrainStep %.3f, OptimizerStep %.3f, LazyResetGrad %.3f; peak RSS %.1f MB; "
              "%.1f heap allocations per step\n",
              Percentile(train_ms, 0.5), Percentile(opt_ms, 0.5), Percentile(reset_ms, 0.5), peak_rss_mb,
              allocs_per_step);
  // The optimizer graph follows the training graph's choice; their times are decided together.
  std::printf("  intra-op pool per step: %s\n", o.session->train_executor().PoolChoice().c_str());
  const std::string train_capture = o.session->train_executor().CaptureStatus();
  if (o.providers.ordered.size() > 1) {  // a device provider: whether its runs were recorded and replayed
    std::printf("  graph capture: training graph %s; optimizer graph %s\n", train_capture.c_str(),
                o.session->optimizer()->executor().CaptureStatus().c_str());
  }
  // Matrix work: its FLOPs per step against one core's measured FMA peak, the floor no engine can beat.
  std::string profile_json;
  if (f.Has("profile") || f.Has("profile-shapes")) {
    EnableOpProfile(false);
    double total = 0, matrix_nanos = 0, matrix_flops = 0;
    for (const OpTime& t : OpProfile()) {
      total += static_cast<double>(t.nanos);
      if (t.flops > 0) {
        matrix_nanos += static_cast<double>(t.nanos);
        matrix_flops += static_cast<double>(t.flops);
      }
    }
    const double per_step = 1.0 / static_cast<double>(steps);
    std::printf("%-48s %8s %10s %7s %9s\n", "op", "calls", "ms/step", "share", "GFLOP/s");
    for (const OpTime& t : OpProfile()) {
      std::printf("%-48s %8lld %10.3f %6.1f%%", t.op.c_str(), static_cast<long long>(t.calls / steps),
                  static_cast<double>(t.nanos) / 1e6 * per_step, 100.0 * static_cast<double>(t.nanos) / total);
      if (t.flops > 0 && t.nanos > 0) std::printf(" %9.1f", static_cast<double>(t.flops) / static_cast<double>(t.nanos));
      std::printf("\n");
    }
    std::printf("kernels: %.3f ms/step of the %.3f ms median step\n", total / 1e6 * per_step, median);
    // The floor only where every kernel ran on the CPU, whose FMA peak it is.
    bool cpu_only = true;
    for (IExecutionProvider* p : o.providers.ordered) cpu_only &= p->name() == "CPU";
    if (matrix_flops > 0 && cpu_only) {
      const char* isa = "";
      const double peak = FmaPeakGflops(&isa);
      const int cores = threads > 0 ? static_cast<int>(threads)
                                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      const double gflop = matrix_flops * per_step / 1e9, matrix_ms = matrix_nanos / 1e6 * per_step;
      const double floor_ms = gflop / (peak * cores) * 1e3;
      // FLOPs as the definitions count them: Winograd's 3x3 convolutions (winograd.h) do fewer products, so
      // a model that runs them may finish below this floor.
      std::printf("matrix ops (MatMul, Gemm, convolutions, their gradients): %.3f GFLOP/step in %.3f ms, %.1f "
                  "GFLOP/s; one core's %s FMA peak %.1f GFLOP/s, so on %d core%s they need at least %.3f ms "
                  "(direct products; Winograd convolutions do fewer): the median step is %.2fx that floor\n",
                  gflop, matrix_ms, gflop / matrix_ms * 1e3, isa, peak, cores, cores == 1 ? "" : "s", floor_ms,
                  median / floor_ms);
      profile_json = StrCat(", \"matrix_gflop_per_step\": ", gflop, ", \"matrix_ms_per_step\": ", matrix_ms,
                            ", \"peak_gflops_per_core\": ", peak, ", \"cores\": ", cores, ", \"floor_ms\": ", floor_ms);
    }
  }
  if (f.Has("json")) {
    std::string json = StrCat("{\"artifacts\": \"", f.Get("artifacts"), "\", \"providers\": \"", providers,
                              "\", \"threads\": ", threads, ", \"batch_size\": ", batch, ", \"steps\": ", steps,
                              ", \"median_ms\": ", median, ", \"p10_ms\": ", p10, ", \"p90_ms\": ", p90,
                              ", \"steps_per_s\": ", 1000.0 / median, ", \"train_step_ms\": ", Percentile(train_ms, 0.5),
                              ", \"optimizer_step_ms\": ", Percentile(opt_ms, 0.5), ", \"peak_rss_mb\": ", peak_rss_mb,
                              ", \"allocs_per_step\": ", allocs_per_step, ", \"last_loss\": ", loss,
                              ", \"train_runs_replayed\": ", o.session->train_executor().capture_stats().replayed,
                              ", \"optimizer_runs_replayed\": ", o.session->optimizer()->executor().capture_stats().replayed,
                              ", \"deterministic\": ", oo.deterministic ? "true" : "false", profile_json, "}\n");
    ONT_RETURN_IF_ERROR(WriteFileAtomically(f.Get("json"), json));
  }
  return Status::OK();
}

}  // namespace cli
}  // namespace ontrain
