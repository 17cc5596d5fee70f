// docs/operators.md is generated from the kernel lists; this fails when it is stale (regenerate it with
// `bazel run //tools:operator_table > docs/operators.md`), and checks a few facts of the table itself.
#include "core/file_io.h"
#include "engine/provider_list.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tools/operator_table.h"

namespace ontrain {
namespace {

TEST(OperatorTable, CheckedInFileIsCurrent) {
  auto api = LoadCudaProviderLibrary();
  if (!api.ok()) GTEST_SKIP() << "this build has no CUDA provider library, so the CUDA column cannot be made: "
                              << api.status().message();
  std::string expected = MakeOperatorTable(CpuKernelList(), api.value()->KernelList());
  auto file = ReadFileToString("docs/operators.md");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_TRUE(file.value() == expected)
      << "docs/operators.md is stale: run `bazel run //tools:operator_table > docs/operators.md`";
}

TEST(OperatorTable, ListsEachOpOnceWithBothProviders) {
  std::vector<KernelDef> cuda = {{"", "Relu", 6, kMaxOpset, {DType::kFloat32}, nullptr},
                                 {"com.microsoft", "ReluGrad", 1, 1, {DType::kFloat32}, nullptr}};
  std::string t = MakeOperatorTable(CpuKernelList(), cuda);
  EXPECT_NE(t.find("| Relu | 1-21: "), std::string::npos);
  EXPECT_NE(t.find(" | 6+: float32 |"), std::string::npos);
  EXPECT_NE(t.find("| com.microsoft::ReluGrad | 1: float32, float64, float16, bfloat16 | 1: float32 |"), std::string::npos);
  EXPECT_NE(t.find("| Acos | 7-21: float32, float64, float16, bfloat16 |  |"), std::string::npos);
  size_t grad = t.find("## Gradient ops"), relu_grad = t.find("com.microsoft::ReluGrad");
  EXPECT_LT(grad, relu_grad) << "ReluGrad belongs to the gradient section";
  EXPECT_NE(t.find(" on CUDA."), std::string::npos);
}

}  // namespace
}  // namespace ontrain
