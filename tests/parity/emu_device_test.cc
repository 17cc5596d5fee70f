// The CUDA provider's device handling, run on the emulated device (providers/cuda/host_emu), which can
// pretend to have no driver, no device or several: the errors a user sees for each, device selection, and
// copies to the host, which land when IDataTransfer's Synchronize returns (as the emulated device's copies
// into page-locked memory do: until the stream is synchronized their destination holds NaN bytes).
// Runs only where ONTRAIN_CUDA_PROVIDER names libontrain_cuda_emu.so (the BUILD file sets it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

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


// A device tensor of `n` floats 0.5, 1.5, ... (+ `base`), copied from the host and waited for.
Tensor DeviceValues(IExecutionProvider* cuda, int64_t n, float base) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i) + 0.5f;
  Tensor host = Tensor::FromVector(v, {n});
  auto dev = Tensor::Allocate(DType::kFloat32, {n}, cuda->allocator());
  EXPECT_TRUE(dev.ok());
  EXPECT_TRUE(cuda->CopyTensor(host, &dev.value()).ok());
  EXPECT_TRUE(cuda->Synchronize().ok());
  return dev.value();
}

Tensor HostFilled(int64_t n, float v) { return Tensor::FromVector(std::vector<float>(n, v), {n}); }

// Small copies to the host are queued (page-locked readback, no wait per copy) and written at Synchronize;
// a copy that does not fit the readback area, large or one too many, goes directly; all land, in order.
TEST_F(EmuDeviceTest, CopiesToTheHostLandAtSynchronize) {
  auto providers = CreateProviders("cuda,cpu", 1);
  ASSERT_TRUE(providers.ok()) << providers.status().message();
  IExecutionProvider* cuda = providers.value().ordered[0];
  Tensor small = DeviceValues(cuda, 5, 0.0f), large = DeviceValues(cuda, 40000, 100.0f);
  Tensor a = HostFilled(5, -1.0f), b = HostFilled(40000, -1.0f);
  ASSERT_TRUE(cuda->CopyTensor(small, &a).ok());
  EXPECT_EQ(a.data<float>()[0], -1.0f) << "a queued copy is written at Synchronize, not before";
  ASSERT_TRUE(cuda->CopyTensor(large, &b).ok());  // 160 KB: more than the readback area holds
  std::vector<Tensor> many;
  for (int i = 0; i < 100; ++i) {  // more copies than the area has entries for
    many.push_back(HostFilled(5, -1.0f));
    ASSERT_TRUE(cuda->CopyTensor(small, &many.back()).ok());
  }
  // A destination the caller let go of before the copy landed: the provider holds its storage until then.
  {
    Tensor dropped = HostFilled(5, -1.0f);
    ASSERT_TRUE(cuda->CopyTensor(small, &dropped).ok());
  }
  ASSERT_TRUE(cuda->Synchronize().ok());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a.data<float>()[i], i + 0.5f) << i;
  for (int i = 0; i < 40000; i += 997) EXPECT_EQ(b.data<float>()[i], 100.0f + i + 0.5f) << i;
  for (const Tensor& m : many) {
    for (int i = 0; i < 5; ++i) ASSERT_EQ(m.data<float>()[i], i + 0.5f) << i;
  }
  // The same destination twice before one wait: the later copy wins, as it would copied directly; also when
  // the later one is copied directly because the area is full.
  Tensor other = DeviceValues(cuda, 5, 10.0f);
  ASSERT_TRUE(cuda->CopyTensor(small, &a).ok());
  ASSERT_TRUE(cuda->CopyTensor(other, &a).ok());
  ASSERT_TRUE(cuda->Synchronize().ok());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a.data<float>()[i], 10.0f + i + 0.5f) << i;
  ASSERT_TRUE(cuda->CopyTensor(small, &a).ok());
  for (Tensor& m : many) ASSERT_TRUE(cuda->CopyTensor(other, &m).ok());
  ASSERT_TRUE(cuda->CopyTensor(other, &a).ok());
  ASSERT_TRUE(cuda->Synchronize().ok());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a.data<float>()[i], 10.0f + i + 0.5f) << i;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(many.back().data<float>()[i], 10.0f + i + 0.5f) << i;
}

}  // namespace
}  // namespace ontrain
