// A fault inside a CUDA kernel, injected by the emulated device (ONTRAIN_CUDA_EMU_FAULT_AT, set by the BUILD
// file), as a user would meet it in training: a clear error from the step that learns of it, never a crash,
// and the session and the process still able to end (the state on the device is lost with it: saving it
// afterwards is an error that says where it is). Two builds of this file:
// - device_fault_emu_test: kernels run asynchronously, so a later copy reports the fault; its error must
//   say so and advise CUDA_LAUNCH_BLOCKING=1;
// - device_fault_blocking_emu_test (CUDA_LAUNCH_BLOCKING=1): the provider waits for each kernel, so the
//   error names the node of the training graph whose kernel faulted.
// Without the emulated device (ONTRAIN_CUDA_PROVIDER unset) the test skips, saying so.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "checkpoint/checkpoint_io.h"
#include "engine/training_session.h"
#include "tests/ort_artifacts.h"
#include "tests/parity/parity_util.h"

namespace ontrain {
namespace {

bool Has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(DeviceFaultTest, AKernelFaultIsAClearErrorFromTheStepThatLearnsOfIt) {
  if (std::getenv("ONTRAIN_CUDA_EMU_FAULT_AT") == nullptr) GTEST_SKIP() << "needs ONTRAIN_CUDA_EMU_FAULT_AT";
  if (!parity::CudaUnavailableReason().empty()) GTEST_SKIP() << parity::CudaUnavailableReason();
  const char* b = std::getenv("CUDA_LAUNCH_BLOCKING");
  const bool blocking = b != nullptr && std::string(b) == "1";
  const testing::ArtifactSet& set = testing::FindSet("gen-mlp");
  std::string why;
  auto loaded = testing::LoadSet(set, &why);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto providers = parity::MakeProviders("cuda");
  ASSERT_TRUE(providers.ok()) << providers.status().ToString();
  Status failed;
  {
    auto created = TrainingSession::Create({providers->ordered}, &loaded->state, loaded->train, loaded->eval,
                                           loaded->optimizer);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    TrainingSession& s = *created.value();
    for (int step = 0; step < 10 && failed.ok(); ++step) {
      std::vector<Tensor> out;
      failed = s.TrainStep(testing::MakeBatch(set, step), &out);
      if (failed.ok()) failed = s.OptimizerStep();
      s.LazyResetGrad();
    }
    ASSERT_FALSE(failed.ok()) << "no step failed: the injected fault did not happen within 10 steps";
    const std::string& m = failed.message();
    EXPECT_TRUE(Has(m, "cudaErrorIllegalAddress")) << m;
    if (blocking) {
      // The provider waited for the kernel: the error comes from that node's run, and names it.
      EXPECT_TRUE(Has(m, "cudaStreamSynchronize")) << m;
      EXPECT_FALSE(Has(m, "CUDA_LAUNCH_BLOCKING")) << m;
      bool named = false;
      for (const Node& n : s.train_executor().graph().nodes) named = named || Has(m, n.Describe());
      EXPECT_TRUE(named) << "the error names no node of the training graph: " << m;
    } else {
      EXPECT_TRUE(Has(m, "run with CUDA_LAUNCH_BLOCKING=1 to have the failing node named")) << m;
    }
    // The device is lost for this process (as on a GPU): later steps fail too, cleanly.
    std::vector<Tensor> out;
    Status again = s.TrainStep(testing::MakeBatch(set, 11), &out);
    EXPECT_FALSE(again.ok());
  }
  std::cout << "the error: " << failed.ToString() << "\n";
  // The session ended without crashing, but the device is gone and the state with it (a periodic
  // checkpoint is what survives a device fault): saving says where the state is, it does not crash.
  auto saved = SerializeCheckpoint(loaded->state);
  ASSERT_FALSE(saved.ok());
  EXPECT_TRUE(Has(saved.status().message(), "lives on CUDA:0")) << saved.status().message();
}

}  // namespace
}  // namespace ontrain
