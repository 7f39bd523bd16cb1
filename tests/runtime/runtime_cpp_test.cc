// libkforge_runtime.so from C++ as a user links it (LibTorch + the library + its public
// header): the exported model of the fixture bundle runs on CPU tensors through its fallback,
// the fallback is counted, and a bundle with a changed file is refused, naming the file.
#include <filesystem>
#include <fstream>

#include <ATen/ops/allclose.h>
#include <ATen/ops/randn.h>
#include <c10/core/InferenceMode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/script.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kforge/runtime.h"
#include "nlohmann/json.hpp"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const fs::path kFixture = KFORGE_RUNTIME_FIXTURE_DIR;
const fs::path kBundle = kFixture / "bundle";

nlohmann::json Manifest(const fs::path& bundle) {
  std::ifstream f(bundle / "manifest.json");
  return nlohmann::json::parse(f);
}

std::string KernelId() { return Manifest(kBundle)["kernels"][0]["id"]; }

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(RuntimeCppTest, RunsTheExportedModelOnCpuThroughItsFallbackAndCountsIt) {
  const std::string id = runtime::LoadBundle(kBundle.string());
  EXPECT_EQ(id.size(), 64u);
  torch::jit::Module optimized = torch::jit::load((kBundle / "model.pt").string());
  torch::jit::Module original = torch::jit::load((kFixture / "model/model.pt").string());
  runtime::ResetCounts();
  c10::InferenceMode inference;
  at::Tensor x = at::randn({64, 512});
  at::Tensor got = optimized.forward({x}).toTensor();
  at::Tensor want = original.forward({x}).toTensor();
  // The fallback is the original operator: the same result to the bit.
  EXPECT_TRUE(got.equal(want));
  std::map<std::string, int64_t> fallbacks = runtime::FallbackCounts();
  EXPECT_EQ(fallbacks["cpu_tensor"], 1);
  EXPECT_EQ(fallbacks[KernelId() + ":cpu_tensor"], 1);
  EXPECT_TRUE(runtime::LaunchCounts().empty());
  optimized.forward({x});
  EXPECT_EQ(runtime::FallbackCounts()["cpu_tensor"], 2);
  runtime::ResetCounts();
  EXPECT_TRUE(runtime::FallbackCounts().empty());
  EXPECT_FALSE(runtime::KernelsDisabled());
}

TEST(RuntimeCppTest, RefusesABundleWithAChangedCubinNamingTheFile) {
  TempDir tmp;
  const fs::path copy = tmp.path() / "bundle";
  fs::copy(kBundle, copy, fs::copy_options::recursive);
  std::string cubin_path = Manifest(copy)["kernels"][0]["binaries"][0]["cubin"]["path"];
  std::ofstream(copy / cubin_path, std::ios::app | std::ios::binary) << "patched";
  const std::string error = ErrorOf([&] { runtime::LoadBundle(copy.string()); });
  EXPECT_THAT(error, HasSubstr("checksum mismatch for " + cubin_path));
  EXPECT_THAT(error, HasSubstr((copy / cubin_path).string()));
}

TEST(RuntimeCppTest, AMovedBundleIsFoundThroughLoadBundleAndOtherwiseNamed) {
  // A copy whose manifest differs (one more space) is another bundle: the model, which
  // carries its bundle's id, does not take it for its own.
  TempDir tmp;
  const fs::path other = tmp.path() / "other";
  fs::copy(kBundle, other, fs::copy_options::recursive);
  std::ofstream(other / "manifest.json", std::ios::app) << " ";
  const std::string other_id = runtime::LoadBundle(other.string());
  EXPECT_NE(other_id, runtime::LoadBundle(kBundle.string()));
}

TEST(RuntimeCppTest, AMissingBundleIsAnErrorThatSaysWhatToDo) {
  // kforge::run names its bundle by id and the export-time path; with neither loaded nor
  // found, the call fails loudly instead of silently running without kernels.
  TempDir tmp;
  c10::OperatorHandle run = c10::Dispatcher::singleton().findSchemaOrThrow("kforge::run", "");
  torch::jit::Stack stack{c10::IValue(std::string(64, '0')),
                          c10::IValue((tmp.path() / "nowhere").string()),
                          c10::IValue(c10::List<std::string>({KernelId()})),
                          c10::IValue(std::vector<at::Tensor>{at::randn({64, 512})}),
                          c10::IValue(c10::List<bool>())};  // a boxed call pushes every argument
  const std::string error = ErrorOf([&] { run.callBoxed(&stack); });
  EXPECT_THAT(error, HasSubstr("the model needs kernel bundle 000000000000"));
  EXPECT_THAT(error, HasSubstr("nowhere (no manifest.json)"));
  EXPECT_THAT(error, HasSubstr("KFORGE_BUNDLE_DIR"));
  EXPECT_THAT(error, HasSubstr("load_bundle"));
}

}  // namespace
}  // namespace kforge
