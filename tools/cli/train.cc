// `ontrain train`: trains artifacts (ontrain's or ONNX Runtime's) on Fashion-MNIST, evaluates every epoch,
// saves checkpoints and exports an inference model.
//
// Under `mpirun -np N` (or with --distributed) it trains data-parallel: --batch-size is the global batch,
// each rank trains on its own slice of every global batch, so the same command trains the same model at
// any N. Rank 0 alone evaluates, prints, and writes checkpoints, metrics and exports; every rank resumes
// from the same checkpoint. The loss printed is the global batch's, and stopping (a signal, a non-finite
// loss) is decided for all ranks together, so no rank is left waiting in a collective. An error on one rank
// ends every rank with its message (MPI_Abort); saves are atomic, so the last checkpoint stays intact.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <random>

#include "checkpoint/checkpoint_io.h"
#include "distributed/communicator.h"
#include "engine/training_session.h"
#include "graph/model_io.h"
#include "tools/cli/commands.h"
#include "tools/cli/dataset.h"
#include "tools/cli/flags.h"
#include "tools/cli/table_data.h"
#include "tools/cli/report.h"
#include "tools/cli/session_loader.h"

namespace ontrain {
namespace cli {

namespace {

// Set by SIGINT/SIGTERM: the loop finishes its step, saves a checkpoint and stops.
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

// The example order of `epoch`: a function of (seed, epoch) only, so a resumed run sees the same batches.
std::vector<int64_t> EpochOrder(int64_t count, uint64_t seed, int64_t epoch, bool shuffle) {
  std::vector<int64_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  if (shuffle) {
    std::mt19937_64 rng(seed * 1000003u + static_cast<uint64_t>(epoch));
    std::shuffle(order.begin(), order.end(), rng);
  }
  return order;
}

// One line of progress: a bar on a terminal (rewritten in place), a plain line otherwise.
void Progress(bool tty, int64_t step, int64_t steps, double loss, double rate) {
  double eta = rate > 0 ? (steps - step) / rate : 0;
  if (tty) {
    int filled = static_cast<int>(30.0 * step / std::max<int64_t>(1, steps));
    std::printf("\r[%-30s] step %lld/%lld  loss %.4f  %.1f steps/s  ETA %.0fs ", std::string(filled, '=').c_str(),
                static_cast<long long>(step), static_cast<long long>(steps), loss, rate, eta);
    if (step == steps) std::printf("\n");
  } else {
    std::printf("step %lld/%lld  loss %.4f  %.1f steps/s  ETA %.0fs\n", static_cast<long long>(step),
                static_cast<long long>(steps), loss, rate, eta);
  }
  std::fflush(stdout);
}

}  // namespace

bool InterruptedBySignal() { return g_stop; }

namespace {

Status TrainOn(const Flags& f, const std::string& providers, Communicator* comm);

}  // namespace

Status Train(const std::vector<std::string>& args) {
  ONT_ASSIGN_OR_RETURN(Flags f, Flags::Parse(args, {"artifacts", "data", "eval-data", "batch-size", "epochs", "steps",
                                                    "lr", "scheduler", "warmup", "seed", "threads", "out", "metrics",
                                                    "export", "export-outputs", "checkpoint-every", "data-root",
                                                    "stop-after", "provider", "accumulate", "distributed", "bucket-kb",
                                                    "memory-limit-mb"},
                                             {"no-shuffle", "resume", "no-overlap", "no-pool-tuning", "no-graph-capture",
                                              "flush-denormals", "nondeterministic"}));
  // Data parallel when asked (--distributed mpi|nccl) or when started by a launcher with more than one rank.
  std::string kind = f.Get("distributed", "");
  if (kind.empty() && LauncherWorldSize() > 1) {
    kind = f.Get("provider", "cpu").rfind("cuda", 0) == 0 ? "nccl" : "mpi";
  }
  std::string providers = f.Get("provider", "cpu");
  if (kind.empty() || kind == "none") return TrainOn(f, providers, nullptr);
  CommunicatorOptions options;
  if (kind == "nccl") {  // one GPU per rank on each machine: plain "cuda" becomes this rank's device
    options.device_index = LauncherLocalRank();
    if (providers == "cuda" || providers.rfind("cuda,", 0) == 0) {
      providers = "cuda:" + std::to_string(options.device_index) + providers.substr(4);
    }
  }
  ONT_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                       OpenCommunicator(kind, options).WithContext("--distributed " + kind));
  Status s = TrainOn(f, providers, comm.get());
  if (!s.ok() && comm->size() > 1) comm->Abort(s.ToString(), 1);  // the other ranks must not wait for this one
  return s;
}

namespace {

Status TrainOn(const Flags& f, const std::string& providers, Communicator* comm) {
  const int rank = comm ? comm->rank() : 0, ranks = comm ? comm->size() : 1;
  const bool root = rank == 0;
  // 1. Artifacts, named file by file when something is missing; --resume starts from --out's checkpoint.
  std::string dir = f.Get("artifacts");
  // Results go to --out (default DIR/run), so the artifacts' own checkpoint stays the starting point.
  std::string out_dir = f.Get("out", dir.empty() ? "" : dir + "/run");
  if (!out_dir.empty() && root) {  // fail before training, not after it, when --out cannot take the checkpoint
    ONT_RETURN_IF_ERROR(MakeDirectories(out_dir));
    std::string probe = out_dir + "/.ontrain_write_probe";
    Status w = WriteFileAtomically(probe, "");
    if (!w.ok()) return IoError("output folder \"", out_dir, "\" is not writable (", w.message(), ")");
    std::remove(probe.c_str());
  }
  bool resume = f.Has("resume");
  std::string ckpt_path = out_dir + "/checkpoint";
  if (resume && !FileExists(ckpt_path)) {
    return NotFound("--resume: there is no checkpoint in \"", out_dir, "\" to resume from");
  }
  ONT_ASSIGN_OR_RETURN(int64_t threads, f.GetInt("threads", 0));
  OpenOptions open;
  open.threads = static_cast<int>(threads);
  open.tune_pool = !f.Has("no-pool-tuning");
  open.graph_capture = !f.Has("no-graph-capture");
  open.flush_denormals = f.Has("flush-denormals");
  open.deterministic = !f.Has("nondeterministic");
  open.checkpoint = resume ? ckpt_path : "";
  open.providers = providers;
  open.communicator = comm;
  // Averaging starts during the last TrainStep of each window, bucket by bucket, unless --no-overlap.
  ONT_ASSIGN_OR_RETURN(int64_t steps_per_update, f.GetInt("accumulate", 1));
  if (comm && !f.Has("no-overlap") && steps_per_update >= 1) open.gradient_accumulation_steps = steps_per_update;
  ONT_ASSIGN_OR_RETURN(int64_t bucket_kb, f.GetInt("bucket-kb", 0));
  if (bucket_kb < 0) return InvalidArgument("--bucket-kb must be positive (KiB per gradient all-reduce)");
  open.bucket_bytes = bucket_kb * 1024;
  ONT_ASSIGN_OR_RETURN(int64_t limit_mb, f.GetInt("memory-limit-mb", 0));
  if (limit_mb < 0 || limit_mb > (int64_t{1} << 40)) return InvalidArgument("--memory-limit-mb must be 0 (none) or a positive size in MiB");
  open.memory_limit_bytes = limit_mb << 20;
  ONT_ASSIGN_OR_RETURN(OpenSession job, OpenArtifacts(dir, open));
  TrainingSession* session = job.session.get();
  bool has_eval = job.has_eval;
  // 2. Data shaped to the model's inputs.
  std::string data_root = f.Get("data-root", kFashionMnistDir);
  std::string data_spec = f.Get("data", "fashion-mnist");
  const std::vector<std::string>& inputs = session->training_input_names();
  ONT_ASSIGN_OR_RETURN(Table train_table, LoadTable(data_spec, data_root, job.training_model, inputs));
  std::string eval_spec = f.Get("eval-data", has_eval && data_spec == "fashion-mnist" ? "fashion-mnist:test" : "");
  if (!eval_spec.empty() && !has_eval) return NotFound("--eval-data needs an eval_model.onnx in \"", dir, "\"");
  Table eval_table;
  if (!eval_spec.empty()) {
    ONT_ASSIGN_OR_RETURN(eval_table, LoadTable(eval_spec, data_root, job.training_model, inputs));
  }
  ONT_ASSIGN_OR_RETURN(int64_t batch, f.GetInt("batch-size", 64));
  ONT_ASSIGN_OR_RETURN(int64_t accumulate, f.GetInt("accumulate", 1));
  if (accumulate < 1) return InvalidArgument("--accumulate must be at least 1 (TrainSteps per optimizer step)");
  if (batch <= 0 || batch * accumulate > train_table.rows) {
    return InvalidArgument("--batch-size times --accumulate must be in [1, ", train_table.rows, "]");
  }
  if (batch % ranks != 0) {
    return InvalidArgument("--batch-size ", batch, " is the global batch and must divide evenly among the ", ranks,
                           " ranks");
  }
  const int64_t shard = batch / ranks;  // this rank's rows of each global batch
  Batcher train_b, eval_b;
  ONT_RETURN_IF_ERROR(train_b.Init(&train_table, shard));
  if (!eval_spec.empty()) ONT_RETURN_IF_ERROR(eval_b.Init(&eval_table, batch));
  // 3. Schedule and run length: a step is one optimizer step over `accumulate` global batches.
  int64_t per_epoch = train_table.rows / (batch * accumulate);
  ONT_ASSIGN_OR_RETURN(int64_t epochs, f.GetInt("epochs", 1));
  ONT_ASSIGN_OR_RETURN(int64_t steps, f.GetInt("steps", epochs * per_epoch));
  ONT_ASSIGN_OR_RETURN(double lr, f.GetDouble("lr", 1e-3));
  ONT_RETURN_IF_ERROR(session->SetLearningRate(static_cast<float>(lr)));
  bool scheduled = f.Has("scheduler");
  if (scheduled) {
    LrSchedule sched;
    ONT_ASSIGN_OR_RETURN(sched.kind, ParseScheduleKind(f.Get("scheduler")));
    ONT_ASSIGN_OR_RETURN(sched.warmup_steps, f.GetInt("warmup", 0));
    sched.total_steps = steps;
    ONT_RETURN_IF_ERROR(session->RegisterScheduler(sched, static_cast<float>(lr)));
    ONT_RETURN_IF_ERROR(session->SchedulerStep());
  }
  ONT_ASSIGN_OR_RETURN(int64_t seed, f.GetInt("seed", 0));
  ONT_ASSIGN_OR_RETURN(int64_t ckpt_every, f.GetInt("checkpoint-every", 0));
  int64_t first = session->optimizer()->step();  // > 0 when resuming
  // --stop-after N: leave after N steps of this invocation, with a checkpoint, as an interruption would.
  ONT_ASSIGN_OR_RETURN(int64_t stop_after, f.GetInt("stop-after", 0));
  if (first >= steps) return InvalidArgument("the checkpoint is already at step ", first, " of ", steps);
  MetricsLog metrics;
  // A resumed log keeps the steps up to the checkpoint's; later lines (written before an interruption that
  // came after the last checkpoint) are cut, since this run writes those steps again.
  if (f.Has("metrics") && root) ONT_RETURN_IF_ERROR(metrics.Open(f.Get("metrics"), resume, resume ? first : -1));
  // The run's history so far travels in the checkpoint (report.h TrainingHistory): the epochs reported and
  // the losses of the epoch in progress, so that a resumed run reports the whole run.
  double epoch_loss = 0;
  int64_t epoch_n = 0;
  std::vector<EpochRecord> records;
  if (resume) {
    TrainingHistory h;
    auto text = job.state->properties.Get<std::string>(kTrainingHistoryProperty);
    if (text.ok() && DecodeTrainingHistory(text.value(), &h) && h.step == first) {
      records = h.epochs;
      // A run that ended inside an epoch reported that part of it; this run reports the whole epoch.
      if (!records.empty() && records.back().step == first && first % per_epoch != 0) records.pop_back();
      if (h.per_epoch == per_epoch && h.epoch_steps == first % per_epoch) {
        epoch_loss = h.epoch_loss_sum;
        epoch_n = h.epoch_steps;
      }
    } else if (root && first % per_epoch != 0) {
      std::printf("the checkpoint carries no training history for step %lld: this run's report covers its own "
                  "steps only\n", static_cast<long long>(first));
    }
  }
  auto save = [&]() -> Status {
    if (!root) return Status::OK();  // rank 0 writes; every rank holds the same state
    TrainingHistory h;
    h.step = session->optimizer()->step();
    h.per_epoch = per_epoch;
    h.epoch_steps = epoch_n;
    h.epoch_loss_sum = epoch_loss;
    h.epochs = records;
    job.state->properties.Set(kTrainingHistoryProperty, EncodeTrainingHistory(h));
    return SaveCheckpoint(*job.state, ckpt_path).WithContext("saving the checkpoint");
  };
  // 4. The loop: TrainStep, OptimizerStep, LazyResetGrad (and SchedulerStep); evaluation every epoch.
  if (root) {
    std::printf("%s %s on %s: %lld examples, batch %lld, steps %lld..%lld\n", resume ? "resuming" : "training",
                dir.c_str(), data_spec.c_str(), static_cast<long long>(train_table.rows),
                static_cast<long long>(batch), static_cast<long long>(first + 1), static_cast<long long>(steps));
    if (accumulate > 1) std::printf("accumulating %lld batches per optimizer step\n", static_cast<long long>(accumulate));
    if (comm) {
      std::printf("data parallel over %s: %d ranks, %lld examples of each batch per rank\n", comm->name(), ranks,
                  static_cast<long long>(shard));
    }
  }
  if (root && job.providers.ordered.size() > 1) {  // where the training graph runs (ontrain info --provider shows why)
    const ExecutionPlan& plan = session->train_executor().plan();
    std::map<int, int> nodes;
    for (const NodePlacement& p : plan.partition.nodes) nodes[p.provider]++;
    std::printf("training graph:");
    for (const auto& [p, n] : nodes) std::printf(" %s %d nodes", job.providers.ordered[p]->name().c_str(), n);
    std::printf(", %d copies per step\n", plan.num_copy_steps());
  }
  g_stop = false;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  bool tty = isatty(fileno(stdout));
  auto t0 = std::chrono::steady_clock::now();
  double window = 0;
  int64_t window_n = 0;
  // For the chart: a resumed run's earlier steps from its metrics log (when it keeps one), then its own.
  std::vector<StepLoss> step_losses = metrics.kept_steps();
  std::vector<int64_t> order;
  Status result;
  int64_t step = first;
  for (; step < steps && !g_stop; ++step) {
    int64_t epoch = step / per_epoch, in_epoch = step % per_epoch;
    if (order.empty() || in_epoch == 0) order = EpochOrder(train_table.rows, seed, epoch, !f.Has("no-shuffle"));
    // `accumulate` global batches; this rank takes its slice of each.
    float loss = 0;
    for (int64_t k = 0; k < accumulate; ++k) {
      std::vector<Tensor> out;
      int64_t start = (in_epoch * accumulate + k) * batch + rank * shard;
      ONT_RETURN_IF_ERROR(session->TrainStep(train_b.Fill(order, start, shard), &out));
      loss += out[0].data<float>()[0] / static_cast<float>(accumulate);
    }
    if (comm) {  // the global loss, and whether any rank was asked to stop: decided together
      float shared[2] = {loss, g_stop ? 1.0f : 0.0f};
      ONT_RETURN_IF_ERROR(comm->AllReduceAverage(shared, 2, Device()).WithContext("sharing the loss"));
      loss = shared[0];
      if (shared[1] > 0) g_stop = true;
    }
    if (!std::isfinite(loss)) {
      result = InvalidArgument("the loss is ", loss, " at step ", step + 1,
                               "; stopped without saving (the last good checkpoint is unchanged)");
      break;
    }
    ONT_RETURN_IF_ERROR(session->OptimizerStep());
    session->LazyResetGrad();
    if (scheduled) ONT_RETURN_IF_ERROR(session->SchedulerStep());
    step_losses.push_back({step + 1, loss});
    window += loss;
    window_n++;
    epoch_loss += loss;
    epoch_n++;
    if (metrics.is_open()) {
      ONT_RETURN_IF_ERROR(metrics.Write(StrCat("\"step\":", step + 1, ",\"loss\":", MetricsLog::Number(loss),
                                               ",\"lr\":", MetricsLog::Number(session->GetLearningRate().value()))));
    }
    if (root && ((tty && (step + 1) % 10 == 0) || (step + 1) % 100 == 0 || step + 1 == steps)) {
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      Progress(tty, step + 1, steps, window / window_n, (step + 1 - first) / secs);
      window = 0;
      window_n = 0;
    }
    // The epoch's report first, so that a checkpoint at its last step carries it (and a stop there does not
    // skip its evaluation).
    if ((step + 1) % per_epoch == 0 || step + 1 == steps) {
      EpochRecord rec;
      rec.epoch = (step + per_epoch) / per_epoch;
      rec.step = step + 1;
      rec.train_loss = epoch_n ? epoch_loss / epoch_n : 0;
      if ((step + 1) % per_epoch == 0) {
        epoch_loss = 0;
        epoch_n = 0;
      }  // else the run ends inside an epoch: a run extending it (--resume, more steps) goes on with its sums
      if (!eval_spec.empty() && root) {
        ONT_ASSIGN_OR_RETURN(EvalResult r, Evaluate(*session, eval_b, batch));
        rec.eval_loss = r.loss;
        rec.accuracy = r.accuracy;
        std::printf("epoch %lld: eval loss %.4f", static_cast<long long>(rec.epoch), r.loss);
        if (r.accuracy >= 0) std::printf("  accuracy %.2f%%", 100 * r.accuracy);
        std::printf("\n");
        if (metrics.is_open()) {
          ONT_RETURN_IF_ERROR(metrics.Write(StrCat("\"epoch\":", rec.epoch, ",\"eval_loss\":", MetricsLog::Number(r.loss),
                                                   ",\"accuracy\":", r.accuracy >= 0 ? MetricsLog::Number(r.accuracy) : "null")));
        }
      }
      records.push_back(rec);
    }
    if (ckpt_every > 0 && (step + 1) % ckpt_every == 0) ONT_RETURN_IF_ERROR(save());
    if (stop_after > 0 && step + 1 - first == stop_after && step + 1 < steps) {
      ONT_RETURN_IF_ERROR(save());
      if (root) std::printf("stopped after %lld steps as asked; resume with --resume\n", static_cast<long long>(stop_after));
      return Status::OK();
    }
  }
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  ONT_RETURN_IF_ERROR(result);
  ONT_RETURN_IF_ERROR(save());
  if (comm && root) {
    const CommunicationStats& cs = session->communication_stats();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (cs.allreduces > 0) {
      std::printf("gradient all-reduce: %lld steps, %.3f ms per step (%.1f%% of the run), %.2f MB per step in %lld "
                  "buckets, %lld of them started during the backward pass\n", static_cast<long long>(cs.allreduces),
                  1e3 * cs.seconds / cs.allreduces, 100.0 * cs.seconds / std::max(secs, 1e-9),
                  cs.bytes / 1e6 / cs.allreduces, static_cast<long long>(cs.buckets / cs.allreduces),
                  static_cast<long long>(cs.overlapped / cs.allreduces));
    }
  }
  if (!root) return Status::OK();
  if (g_stop) {
    std::printf("\ninterrupted after step %lld; checkpoint saved in %s/checkpoint. Resume with the same command plus "
                "--resume%s\n", static_cast<long long>(step), out_dir.c_str(),
                f.Has("out") ? "" : (" --out " + out_dir).c_str());
    return Status::OK();
  }
  std::printf("saved %s/checkpoint\n", out_dir.c_str());
  if (!records.empty()) {
    ONT_RETURN_IF_ERROR(WriteMetricsCsv(records, out_dir + "/metrics.csv"));
    ONT_RETURN_IF_ERROR(WriteChartSvg(step_losses, records, out_dir + "/training.svg"));
    std::printf("wrote %s/metrics.csv and %s/training.svg\n", out_dir.c_str(), out_dir.c_str());
  }
  if (f.Has("export")) {
    std::vector<std::string> outs = f.GetList("export-outputs");
    if (outs.empty()) outs = {"logits"};
    ONT_RETURN_IF_ERROR(session->ExportModelForInferencing(f.Get("export"), outs));
    std::printf("exported inference model %s\n", f.Get("export").c_str());
  }
  return Status::OK();
}

}  // namespace

}  // namespace cli
}  // namespace ontrain
