// KernelRegistry: overlap detection, lookup by opset and dtype, and the CPU list's integrity.
#include "providers/kernel_registry.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

StatusOr<std::unique_ptr<OpKernel>> NoKernel(const NodeInfo&) { return Internal("not used"); }

TEST(KernelRegistryTest, RejectsOverlappingRows) {
  auto r = KernelRegistry::Create({{"", "Relu", 1, 13, {DType::kFloat32}, NoKernel},
                                   {"", "Relu", 13, 14, {DType::kFloat64, DType::kFloat32}, NoKernel}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("duplicate kernel rows for ::Relu dtype float32"));
}

TEST(KernelRegistryTest, AllowsDisjointRangesAndTypes) {
  auto r = KernelRegistry::Create({{"", "Relu", 1, 12, {DType::kFloat32}, NoKernel},
                                   {"", "Relu", 13, 14, {DType::kFloat32}, NoKernel},
                                   {"", "Relu", 1, 14, {DType::kFloat64}, NoKernel},
                                   {"com.microsoft", "Relu", 1, 1, {DType::kFloat32}, NoKernel}});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->HasOp("", "Relu", 14));
  EXPECT_FALSE(r->HasOp("", "Relu", 15));
  auto f = r->Find("", "Relu", 13, {DType::kFloat32});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f.value()->since, 13);
  auto miss = r->Find("", "Relu", 13, {DType::kInt8});
  ASSERT_FALSE(miss.ok());
  EXPECT_THAT(miss.status().message(), HasSubstr("input dtype int8; supported: float32"));
  EXPECT_FALSE(KernelRegistry::Create({{"", "X", 3, 2, {DType::kFloat32}, NoKernel}}).ok());
}

TEST(KernelRegistryTest, CpuListIsConsistentAndSorted) {
  std::vector<KernelDef> defs = CpuKernelList();
  ASSERT_TRUE(KernelRegistry::Create(defs).ok());
  for (size_t i = 1; i < defs.size(); ++i) {
    std::pair<std::string, std::string> prev{defs[i - 1].domain, defs[i - 1].op}, cur{defs[i].domain, defs[i].op};
    EXPECT_LE(prev, cur) << "kernel list not sorted at " << defs[i].op;
    EXPECT_NE(defs[i].create, nullptr) << defs[i].op;
  }
  auto cpu = CpuExecutionProvider::Create({}).value();
  for (const char* op : {"Add", "Conv", "MatMul", "Gemm", "SoftmaxCrossEntropyLoss", "BatchNormalization", "Dropout"}) {
    EXPECT_TRUE(cpu->kernel_registry().HasOp("", op, 17)) << op;
  }
  EXPECT_TRUE(cpu->kernel_registry().HasOp("com.microsoft", "FastGelu", 1));
}

}  // namespace
}  // namespace ontrain
