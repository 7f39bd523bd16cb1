// The exporter on the fixture's run (see make_fixture.sh): the bundle's manifest validates,
// the rewritten graph calls kforge::run with the original node as its fallback — only where
// the target's constants match, submodule methods included — and bad input is refused with
// a clear error: a run without a GPU, an occupied --out, a changed model.
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include <torch/csrc/jit/ir/ir.h>
#include <torch/script.h>

#include "common/launch_plan.h"
#include "common/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/bundle_manifest.h"
#include "runtime/export/export_cli.h"
#include "runtime/export/exporter.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// (tests/support/command.h is not used here: its ReadWholeFile has the signature of the one
// in run_directory.h, which this test links through the exporter.)
std::string Slurp(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Runs `command`; its exit code, with stderr in `err`.
int RunShell(const std::string& command, const fs::path& scratch, std::string* err) {
  const fs::path err_file = scratch / "cmd.err";
  int status = std::system((command + " </dev/null >/dev/null 2>'" + err_file.string() + "'").c_str());
  *err = Slurp(err_file);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

const fs::path kFixture = KFORGE_RUNTIME_FIXTURE_DIR;
const fs::path kBundle = kFixture / "bundle";

void Walk(torch::jit::Block* block, const std::function<void(torch::jit::Node*)>& f) {
  for (torch::jit::Node* n : block->nodes()) {
    f(n);
    for (torch::jit::Block* b : n->blocks()) Walk(b, f);
  }
}

std::optional<int64_t> SoftmaxDim(torch::jit::Node* n) {
  if (n->kind().toQualString() != std::string("aten::softmax")) return std::nullopt;
  return torch::jit::toIValue(n->input(1))->toInt();
}

TEST(RuntimeExportTest, TheManifestValidatesAndDescribesTheWinner) {
  absl::StatusOr<LoadedBundleManifest> loaded = ReadBundleManifest(kBundle);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const BundleManifest& m = loaded->manifest;
  EXPECT_EQ(m.format, "kforge-bundle/5");
  ASSERT_EQ(m.kernels.size(), 1u);
  const BundleKernel& k = m.kernels[0];
  EXPECT_EQ(k.op, "aten::softmax");
  EXPECT_EQ(k.overload, "int");
  EXPECT_EQ(k.constants["dim"], -1);
  ASSERT_EQ(k.inputs.size(), 1u);
  EXPECT_EQ(k.inputs[0].dtype, "float32");
  EXPECT_EQ(k.inputs[0].sizes, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(k.inputs[0].strides, (std::vector<int64_t>{512, 1}));
  EXPECT_TRUE(k.inputs[0].contiguous);        // softmax_two_launches.json requires it
  EXPECT_EQ(k.inputs[0].alignment_bytes, 16);  // max(plan's 4, what validation proved)
  EXPECT_EQ(k.int_args, (std::vector<int64_t>{-1}));  // dim; dtype None is not an ABI scalar
  // The plan as validated: two launches through scratch, the second early_start.
  absl::StatusOr<LaunchPlan> plan = LaunchPlan::Parse(k.launch_plan_json);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->launches().size(), 2u);
  EXPECT_FALSE(plan->launches()[0].early_start);
  EXPECT_TRUE(plan->launches()[1].early_start);
  ASSERT_EQ(k.binaries.size(), 1u);
  EXPECT_TRUE(k.binaries[0].validated);
  EXPECT_THAT(k.gpu_name, HasSubstr("SimulatedValidation"));
  EXPECT_EQ(k.speedup, 1.5);
  for (const char* file : {"model.pt", "manifest.json", "README.md"}) {
    EXPECT_TRUE(fs::is_regular_file(kBundle / file)) << file;
  }
  std::string readme = Slurp(kBundle / "README.md");
  EXPECT_THAT(readme, HasSubstr("torch.ops.load_library(\""));
  EXPECT_THAT(readme, HasSubstr("torch.jit.load(\"" + kBundle.string() +
                                "/model.pt\", map_location=\"cuda\")"));
  EXPECT_THAT(readme, HasSubstr("kforge::runtime::LoadBundle(\"" + kBundle.string() + "\")"));
}

TEST(RuntimeExportTest, TheGraphCallsKforgeRunWithTheOriginalNodeAsFallback) {
  torch::jit::Module model = torch::jit::load((kBundle / "model.pt").string());
  std::shared_ptr<torch::jit::Graph> graph = model.get_method("forward").graph();
  int runs = 0, guarded_rows = 0, plain_columns = 0, other_softmax = 0;
  std::vector<std::string> strings;
  Walk(graph->block(), [&](torch::jit::Node* n) {
    if (n->kind().toQualString() == std::string("kforge::run")) {
      ++runs;
      strings.push_back(torch::jit::toIValue(n->input(0))->toStringRef());
      strings.push_back(torch::jit::toIValue(n->input(1))->toStringRef());
    }
    if (n->kind() == c10::prim::If) {
      // block 0: the fallback (the original softmax over rows); block 1: the kernel's output.
      for (torch::jit::Node* inner : n->blocks()[0]->nodes()) {
        if (SoftmaxDim(inner) == -1) ++guarded_rows;
      }
    }
  });
  for (torch::jit::Node* n : graph->nodes()) {
    if (SoftmaxDim(n) == 0) ++plain_columns;
    if (SoftmaxDim(n) == -1) ++other_softmax;
  }
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(guarded_rows, 1);   // the submodule's softmax(dim=-1), inlined and guarded
  EXPECT_EQ(plain_columns, 1);  // softmax(dim=0): same op and shape, other constant: untouched
  EXPECT_EQ(other_softmax, 0);  // no unguarded softmax(dim=-1) left
  ASSERT_EQ(strings.size(), 2u);
  EXPECT_EQ(strings[0], Sha256Hex(Slurp(kBundle / "manifest.json")));  // bundle id
  EXPECT_EQ(strings[1], kBundle.string());  // the export-time location, a hint
}

TEST(RuntimeExportTest, ARunWithoutAGpuHasNothingToExport) {
  TempDir tmp;
  ExportOptions options;
  options.run_dir = (kFixture / "run_cpu_only").string();
  options.out_dir = (tmp.path() / "out").string();
  absl::StatusOr<ExportResult> r = ExportBundle(options);
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("validated nothing (no GPU"));
  EXPECT_FALSE(fs::exists(tmp.path() / "out"));
  // The CLI says the same with exit code 3.
  std::string err;
  EXPECT_EQ(RunShell(std::string(KFORGE_BINARY) + " export '" + options.run_dir + "' --out '" +
                    options.out_dir + "'",
                tmp.path(), &err),
            3)
      << err;
  EXPECT_THAT(err, HasSubstr("kforge export: error: the run in"));
  // The optimize hook is not an error either, but says in one line why nothing was exported.
  absl::StatusOr<std::string> hook = ExportAfterOptimize(options.run_dir);
  ASSERT_TRUE(hook.ok()) << hook.status();
  EXPECT_THAT(*hook, HasSubstr("nothing exported to " + options.run_dir + "/export: the run in"));
  EXPECT_THAT(*hook, HasSubstr("validated nothing (no GPU"));
  EXPECT_EQ(std::count(hook->begin(), hook->end(), '\n'), 1);
}

TEST(RuntimeExportTest, AnOccupiedOutIsRefusedUnlessItIsABundleAndForceIsGiven) {
  TempDir tmp;
  ExportOptions options;
  options.run_dir = (kFixture / "run").string();
  options.out_dir = (tmp.path() / "b").string();
  absl::StatusOr<ExportResult> first = ExportBundle(options);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->kernels.size(), 1u);
  EXPECT_EQ(first->nodes_rewritten, 1);
  absl::StatusOr<ExportResult> again = ExportBundle(options);
  EXPECT_TRUE(absl::IsInvalidArgument(again.status()));
  EXPECT_THAT(again.status().message(), HasSubstr("already holds a bundle; pass --force"));
  options.force = true;
  absl::StatusOr<ExportResult> forced = ExportBundle(options);
  ASSERT_TRUE(forced.ok()) << forced.status();
  // Same content, same id, wherever it is written.
  EXPECT_EQ(forced->bundle_id, first->bundle_id);

  fs::create_directories(tmp.path() / "taken");
  std::ofstream(tmp.path() / "taken" / "notes.txt") << "mine";
  options.out_dir = (tmp.path() / "taken").string();
  absl::StatusOr<ExportResult> taken = ExportBundle(options);
  EXPECT_TRUE(absl::IsInvalidArgument(taken.status()));
  EXPECT_THAT(taken.status().message(), HasSubstr("is not an empty directory or a kforge bundle"));
  EXPECT_TRUE(fs::exists(tmp.path() / "taken" / "notes.txt"));
}

TEST(RuntimeExportTest, AModelOtherThanTheRunsIsRefused) {
  TempDir tmp;
  ExportOptions options;
  options.run_dir = (kFixture / "run").string();
  options.out_dir = (tmp.path() / "b").string();
  options.model_path = (kFixture / "model" / "inputs.pt").string();
  absl::StatusOr<ExportResult> r = ExportBundle(options);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("is not the one the run optimized"));
}

TEST(RuntimeExportTest, ArchSelectsTheCubinsAndSaysWhatWasNotValidated) {
  TempDir tmp;
  ExportOptions options;
  options.run_dir = (kFixture / "run").string();
  options.out_dir = (tmp.path() / "b").string();
  options.archs = {"sm_80"};
  absl::StatusOr<ExportResult> r = ExportBundle(options);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<LoadedBundleManifest> loaded = ReadBundleManifest(options.out_dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->manifest.kernels[0].binaries.size(), 1u);
  EXPECT_EQ(loaded->manifest.kernels[0].binaries[0].arch, "sm_80");
  EXPECT_FALSE(loaded->manifest.kernels[0].binaries[0].validated);
  ASSERT_FALSE(r->notes.empty());
  EXPECT_THAT(r->notes.back(), HasSubstr("compiled, not validated"));
}

TEST(RuntimeExportTest, TheOptimizeHookExportsIntoTheRunDirectory) {
  TempDir tmp;
  const fs::path run = tmp.path() / "run";
  fs::copy(kFixture / "run", run, fs::copy_options::recursive);
  absl::StatusOr<std::string> summary = ExportAfterOptimize(run.string());
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_THAT(*summary, HasSubstr("exported 1 kernel (1 graph node rewritten)"));
  EXPECT_TRUE(fs::is_regular_file(run / "export" / "manifest.json"));
  // Again: the earlier export is replaced, not refused.
  EXPECT_TRUE(ExportAfterOptimize(run.string()).ok());
}

}  // namespace
}  // namespace kforge
