// The CUDA provider's device handling, run on the emulated device (providers/cuda/host_emu), which can
// pretend to have no driver, no device or several: the errors a user sees for each, and device selection.
// Runs only where ONTRAIN_CUDA_PROVIDER names libontrain_cuda_emu.so (the BUILD file sets it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "engine/provider_list.h"

namespace ontrain {
namespace {

class EmuDeviceTest : public ::testing::Test {
 protected:
  void TearDown() override { ::unsetenv("ONTRAIN_CUDA_EMU_DEVICES"); }
  static void Devices(const char* v) { ::setenv("ONTRAIN_CUDA_EMU_DEVICES", v, 1); }
};

TEST_F(EmuDeviceTest, NoDriverAndNoDeviceAreErrorsThatSayWhich) {
  auto api = LoadCudaProviderLibrary();
  ASSERT_TRUE(api.ok()) << api.status().message();
  int count = -1;
  Devices("nodriver");
  Status s = api.value()->CountDevices(&count);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no usable NVIDIA driver"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cudaErrorInsufficientDriver"), std::string::npos) << s.message();
  Devices("0");
  s = api.value()->CountDevices(&count);
  EXPECT_NE(s.message().find("reports no CUDA device"), std::string::npos) << s.message();
  auto providers = CreateProviders("cuda,cpu", 1);
  ASSERT_FALSE(providers.ok());
  EXPECT_NE(providers.status().message().find("no CUDA device"), std::string::npos) << providers.status().message();
}

TEST_F(EmuDeviceTest, DevicesAreChosenByIndexAndAMissingOneIsNamed) {
  Devices("2");
  auto api = LoadCudaProviderLibrary();
  ASSERT_TRUE(api.ok()) << api.status().message();
  int count = 0;
  ASSERT_TRUE(api.value()->CountDevices(&count).ok());
  EXPECT_EQ(count, 2);
  auto second = CreateProviders("cuda:1,cpu", 1);
  ASSERT_TRUE(second.ok()) << second.status().message();
  auto third = CreateProviders("cuda:2,cpu", 1);
  ASSERT_FALSE(third.ok());
  EXPECT_NE(third.status().message().find("CUDA device 2 does not exist; this machine has 2 devices (0..1)"),
            std::string::npos)
      << third.status().message();
}

}  // namespace
}  // namespace ontrain
