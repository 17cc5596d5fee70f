// Loading provider libraries at run time (providers/provider_library.h) and the CUDA provider's entry
// points that need no GPU: where the loader looks and what it says when it cannot load; the ABI check; the
// CUDA kernel list (valid, no overlapping rows); device counting and provider creation failing with a
// reason on a machine without a driver or device; planning-only providers for `ontrain info`.
#include <cstdlib>

#include "engine/partition.h"
#include "engine/provider_list.h"
#include "graph/builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "providers/provider_library.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

TEST(ProviderLibrary, MissingLibraryNamesWhereItLooked) {
  ::unsetenv("ONTRAIN_TEST_PROVIDER");
  auto api = LoadProviderLibrary("libontrain_nothing.so", "ontrain/nothing/libontrain_nothing.so", "ONTRAIN_TEST_PROVIDER");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(api.status().message(), HasSubstr("libontrain_nothing.so was not found; looked at"));
  EXPECT_THAT(api.status().message(), HasSubstr("ontrain/nothing/libontrain_nothing.so"));
  EXPECT_THAT(api.status().message(), HasSubstr("set ONTRAIN_TEST_PROVIDER"));
}

TEST(ProviderLibrary, EnvironmentPathMustExist) {
  ::setenv("ONTRAIN_TEST_PROVIDER", "/no/such/dir/libx.so", 1);
  auto api = LoadProviderLibrary("libontrain_nothing2.so", "x", "ONTRAIN_TEST_PROVIDER");
  ::unsetenv("ONTRAIN_TEST_PROVIDER");
  ASSERT_FALSE(api.ok());
  EXPECT_THAT(api.status().message(), HasSubstr("ONTRAIN_TEST_PROVIDER=/no/such/dir/libx.so: no such file"));
}

TEST(ProviderLibrary, RejectsLibrariesThatAreNotProviders) {
  ::setenv("ONTRAIN_TEST_PROVIDER", "/lib/x86_64-linux-gnu/libz.so.1", 1);
  auto api = LoadProviderLibrary("libontrain_nothing3.so", "x", "ONTRAIN_TEST_PROVIDER");
  ::unsetenv("ONTRAIN_TEST_PROVIDER");
  ASSERT_FALSE(api.ok());
  EXPECT_THAT(api.status().message(), HasSubstr("is not the ontrain library expected here: it exports no OntrainProviderLibrary"));
}

TEST(ProviderLibrary, RejectsAnotherBuildsAbi) {
  ::setenv("ONTRAIN_TEST_PROVIDER", "tests/providers/libfake_provider.so", 1);
  auto api = LoadProviderLibrary("libfake_provider.so", "x", "ONTRAIN_TEST_PROVIDER");
  ::unsetenv("ONTRAIN_TEST_PROVIDER");
  ASSERT_FALSE(api.ok());
  EXPECT_THAT(api.status().message(), HasSubstr("was built by another version of ontrain"));
}

TEST(CudaProviderLibrary, KernelListIsValidWithoutADevice) {
  auto api = LoadCudaProviderLibrary();
  if (!api.ok()) GTEST_SKIP() << "this build has no CUDA provider library: " << api.status().message();
  EXPECT_STREQ(api.value()->name, "CUDA");
  EXPECT_THAT(api.value()->build_info, HasSubstr("cuBLAS"));
  std::vector<KernelDef> defs = api.value()->KernelList();
  EXPECT_GT(defs.size(), 100u);
  for (const KernelDef& d : defs) EXPECT_NE(d.create, nullptr) << d.op;
  auto registry = KernelRegistry::Create(defs);
  EXPECT_TRUE(registry.ok()) << registry.status().ToString();
}

TEST(CudaProviderLibrary, NoDeviceIsAClearErrorAndPlanningStillWorks) {
  auto api = LoadCudaProviderLibrary();
  if (!api.ok()) GTEST_SKIP() << "this build has no CUDA provider library: " << api.status().message();
  int count = -1;
  Status devices = api.value()->CountDevices(&count);
  auto made = CreateProviders("cuda,cpu", 1);
  if (devices.ok()) {
    EXPECT_GT(count, 0);
    EXPECT_TRUE(made.ok()) << made.status().ToString();
  } else {
    EXPECT_EQ(count, 0);
    EXPECT_THAT(devices.message(), ::testing::AnyOf(HasSubstr("driver"), HasSubstr("device")));
    ASSERT_FALSE(made.ok());
    EXPECT_THAT(made.status().message(), HasSubstr("provider \"cuda\": "));
    EXPECT_THAT(made.status().message(), HasSubstr(devices.message()));
  }
  ProviderListOptions o;
  o.plan_only = true;
  auto plan = CreateProviders("cuda:1,cpu", o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  IExecutionProvider* cuda = plan->ordered[0];
  EXPECT_EQ(cuda->name(), "CUDA");
  EXPECT_EQ(cuda->device(), (Device{DeviceType::kCUDA, 1}));
  EXPECT_EQ(cuda->allocator(), nullptr);
  EXPECT_TRUE(cuda->kernel_registry().HasOp("", "MatMul", 13));
  Tensor t = Tensor::FromVector<float>({1}, {1});
  EXPECT_THAT(cuda->CopyTensor(t, &t).message(), HasSubstr("planning only"));
}

// Attribute cases a CUDA kernel cannot run go to the CPU at planning time, with the reason.
TEST(CudaProviderLibrary, RejectedAttributesFallBackToTheCpu) {
  auto api = LoadCudaProviderLibrary();
  if (!api.ok()) GTEST_SKIP() << "this build has no CUDA provider library: " << api.status().message();
  Model m;
  m.opset_imports[""] = 17;
  m.graph.inputs = {TensorInfo("x", DType::kFloat32, {2, 3, 8, 8}), TensorInfo("w", DType::kFloat32, {4, 3, 3, 3})};
  m.graph.outputs = {TensorInfo("h", DType::kFloat16, {2, 3, 8, 8}), TensorInfo("y", DType::kFloat32, {}),
                     TensorInfo("z", DType::kFloat32, {})};
  m.graph.nodes.push_back(MakeNode("Cast", {"x"}, {"h"}, {AttrInt("to", static_cast<int64_t>(DType::kFloat16))}, "to_half"));
  m.graph.nodes.push_back(MakeNode("Conv", {"x", "w"}, {"y"}, {AttrInts("pads", {0, 0, 1, 1})}, "lopsided"));
  m.graph.nodes.push_back(MakeNode("Conv", {"x", "w"}, {"z"}, {AttrInts("pads", {1, 1, 1, 1})}, "even"));
  ProviderListOptions o;
  o.plan_only = true;
  auto providers = CreateProviders("cuda,cpu", o);
  ASSERT_TRUE(providers.ok());
  auto part = PartitionGraph(m, providers->ordered);
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  EXPECT_EQ(part->nodes[0].provider, 1);
  EXPECT_THAT(part->nodes[0].why_fallback, HasSubstr("CUDA: Cast to a dtype other than"));
  EXPECT_EQ(part->nodes[1].provider, 1);
  EXPECT_THAT(part->nodes[1].why_fallback, HasSubstr("CUDA: asymmetric pads"));
  EXPECT_EQ(part->nodes[2].provider, 0);
}

TEST(CudaProviderNames, MalformedNamesAndOrder) {
  auto bad = CreateProviders("cuda:x", 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("expected cuda or cuda:N"));
  auto twice = CreateProviders("cuda,cuda", 1);
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.status().message(), HasSubstr("listed twice"));
  auto order = CreateProviders("cpu,cuda", 1);
  ASSERT_FALSE(order.ok());
  EXPECT_THAT(order.status().message(), HasSubstr("must come last"));
}

}  // namespace
}  // namespace ontrain
