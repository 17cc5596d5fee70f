// The `ontrain` command: bazel run //tools:ontrain -- <subcommand> [flags].
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/cli/commands.h"

namespace {

const char* kUsage =
    "usage: ontrain <command> [flags]\n"
    "  generate --model FORWARD.onnx | --builtin mlp|cnn  --out DIR [--loss CrossEntropyLoss|MSELoss|\n"
    "           BCEWithLogitsLoss|L1Loss | --loss-output NAME] [--requires-grad a,b] [--frozen c,d]\n"
    "           [--optimizer AdamW|SGD] [--beta1 B] [--beta2 B] [--eps E] [--weight-decay W] [--adam-mode 0|1]\n"
    "           [--extra-outputs logits,...] [--label-dtype int64|int32] [--reduction mean|sum|none]\n"
    "           [--ignore-index N] [--bn-running-stats pytorch|onnx|constant] [--no-fuse]\n"
    "  train    --artifacts DIR --data SPEC [--eval-data SPEC] [--batch-size N]\n"
    "           [--epochs N | --steps N] [--lr X] [--scheduler constant|linear|cosine|step|exponential]\n"
    "           [--warmup N] [--seed S] [--no-shuffle] [--threads N] [--no-pool-tuning] [--no-graph-capture]\n"
    "           [--flush-denormals] [--nondeterministic] [--out DIR] [--resume]\n"
    "           [--checkpoint-every N] [--stop-after N] [--metrics FILE]\n"
    "           [--export FILE --export-outputs a,b] [--provider LIST] [--memory-limit-mb N]\n"
    "           SPEC: fashion-mnist | fashion-mnist:test | idx:IMAGES,LABELS | FILE.npz | FILE.npy | FILE.csv\n"
    "  eval     --artifacts DIR [--data fashion-mnist:test] [--batch-size N] [--provider LIST]\n"
    "  export   --artifacts DIR --outputs a,b --to FILE\n"
    "  info     --artifacts DIR [--provider LIST] [--json]   what runs where, copies, state per device\n"
    "  run      --model FILE.onnx --inputs FILE.npz [--outputs FILE.npz] [--provider LIST]\n"
    "           --outputs: one numpy array per model output, in its own dtype (float16/32/64, int8-64,\n"
    "           uint8-64, bool); bfloat16, which numpy lacks, is written as float32 (exactly)\n"
    "  bench    --artifacts DIR [--provider LIST] [--batch-size N] [--steps N] [--warmup N] [--threads N]\n"
    "           [--json FILE] [--profile] [--profile-shapes] [--no-pool-tuning] [--no-graph-capture]\n"
    "           [--flush-denormals] [--nondeterministic]\n"
    "                                      time full training steps on synthetic inputs\n"
    "  bench    --gemm [--threads N]   the CPU's FP32 FMA peak and the GEMM's share of it\n"
    "  LIST: providers in priority order, comma-separated, ending with cpu (appended when missing):\n"
    "        cpu | sim (a device simulated on the host, to check placement) | cuda | cuda:N\n"
    "  --threads N: the CPU pool's threads (0: one per core); each graph is timed with and without the\n"
    "        pool over its first steps and keeps the faster, unless --no-pool-tuning\n"
    "  --no-graph-capture: launch every kernel of a device provider (cuda, sim) at every step, instead of\n"
    "        recording a step once its shapes have been seen and replaying it as one launch\n"
    "  --flush-denormals: CPU kernels flush subnormal floats to zero (x86 FTZ/DAZ, as torch.set_flush_denormal):\n"
    "        faster where values sink below 1e-38 on CPUs that slow down on them (Intel's), but results\n"
    "        differ from IEEE arithmetic and PyTorch's default there\n"
    "  --nondeterministic: a device provider (cuda) may use algorithms whose results vary in the last bits\n"
    "        between runs, and times cuDNN's convolution algorithms at the first step of each shape to keep\n"
    "        the fastest (as PyTorch's cudnn.benchmark); by default it keeps to fixed, deterministic ones\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  ontrain::Status s;
  if (cmd == "generate") s = ontrain::cli::Generate(args);
  else if (cmd == "train") s = ontrain::cli::Train(args);
  else if (cmd == "eval") s = ontrain::cli::Eval(args);
  else if (cmd == "export") s = ontrain::cli::Export(args);
  else if (cmd == "info") s = ontrain::cli::Info(args);
  else if (cmd == "run") s = ontrain::cli::Run(args);
  else if (cmd == "bench") s = ontrain::cli::Bench(args);
  else {
    std::fprintf(stderr, "ontrain: unknown command \"%s\"\n%s", cmd.c_str(), kUsage);
    return 2;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "ontrain %s: %s\n", cmd.c_str(), s.message().c_str());
    return 1;
  }
  return ontrain::cli::InterruptedBySignal() ? 130 : 0;
}
