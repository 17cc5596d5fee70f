// The subcommands of the `ontrain` binary.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace ontrain {
namespace cli {

Status Generate(const std::vector<std::string>& args);
Status Train(const std::vector<std::string>& args);
Status Eval(const std::vector<std::string>& args);
Status Export(const std::vector<std::string>& args);
Status Info(const std::vector<std::string>& args);
Status Run(const std::vector<std::string>& args);
Status Bench(const std::vector<std::string>& args);
// `ontrain bench --gemm`: the FMA peak and the GEMM's share of it.
Status BenchGemm(int threads);
// One core's FP32 peak in GFLOP/s: the median of 5 runs (~150 ms in all) of a register-only FMA loop in the
// widest vector ISA this CPU has, whose name goes to *isa.
double FmaPeakGflops(const char** isa);
// True when the last Train stopped early on SIGINT/SIGTERM (after saving a checkpoint).
bool InterruptedBySignal();

}  // namespace cli
}  // namespace ontrain
