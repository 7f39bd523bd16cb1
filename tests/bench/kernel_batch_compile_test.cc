// Integration test of batched compiles (tools/bench/kernel_batch.h) with real NVRTC in the
// real kforge-nvrtc child (no GPU needed): real synthesizer configs of five anchor rows (four
// families) compiled one program each and all in one batch must give the same kernels — PTX
// identical up to symbol names and labels, the same ptxas resources — and every member's
// renamed plan entries must be in the batch's cubin.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/proposer/synth/family_registry.h"
#include "services/worker/compile_policy.h"
#include "services/worker/compiler.h"
#include "tools/bench/anchor_rows.h"
#include "tools/bench/kernel_batch.h"

namespace kforge::bench {
namespace {

std::map<std::string, v1::KernelResources> ByEntry(const v1::CompileResult& r) {
  std::map<std::string, v1::KernelResources> out;
  for (const v1::KernelResources& k : r.kernels()) out[k.entry_point()] = k;
  return out;
}

TEST(KernelBatchCompile, BatchedKernelsAreTheSingleCompilesKernels) {
  CompilerOptions options;
  options.child_path = KFORGE_NVRTC_CHILD;
  options.time_limit = absl::Seconds(300);
  auto compiler = Compiler::Create(options, nullptr);
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  v1::CompileOptions compile_options;
  compile_options.set_arch("sm_90");

  std::vector<BatchMember> members;
  std::vector<std::string> labels;
  size_t bytes = 0;
  for (const AnchorRow& row : AnchorRows("t-")) {
    if (row.id != "avgpool-r50" && row.id != "gn-vae-fp32" && row.id != "softmax-vocab" &&
        row.id != "rms-norm-bf16" && row.id != "layer-norm-fp16") {
      continue;
    }
    std::string refusal;
    const synth::Family* family = synth::FamilyRegistry::Default().Find(row.target, &refusal);
    ASSERT_NE(family, nullptr) << row.id << ": " << refusal;
    auto generator = family->Bind(row.target, synth::GpuModel{});
    ASSERT_TRUE(generator.ok()) << row.id << ": " << generator.status();
    auto e = Enumerate(**generator);
    ASSERT_TRUE(e.ok()) << row.id << ": " << e.status();
    ASSERT_GE(e->valid.size(), 2u);
    // Two per row (the first, last or middle valid config) while the program stays under the
    // compile policy's 256 KiB (with room for the batch's wrapping of each member), as the
    // sweep cuts its batches.
    int taken = 0;
    for (size_t i : {size_t{0}, e->valid.size() - 1, e->valid.size() / 2}) {
      if (taken == 2) break;
      auto k = (*generator)->Generate(e->valid[i]);
      ASSERT_TRUE(k.ok()) << k.status();
      if (bytes + k->source.size() > kMaxSourceBytes - 16 * 1024) continue;
      ++taken;
      bytes += k->source.size();
      members.push_back({k->source, k->launch_plan_json});
      labels.push_back(row.id + " " + e->valid[i].ToString());
    }
  }
  ASSERT_GE(members.size(), 8u);

  auto batch = BatchKernels(members);
  ASSERT_TRUE(batch.ok()) << batch.status();
  v1::Candidate batched;
  batched.set_source(batch->source);
  const v1::CompileResult together = (*compiler)->Compile(batched, compile_options);
  ASSERT_EQ(together.status(), v1::COMPILE_OK) << together.log().substr(0, 3000);
  const auto together_resources = ByEntry(together);

  for (size_t m = 0; m < members.size(); ++m) {
    SCOPED_TRACE(labels[m]);
    v1::Candidate single;
    single.set_source(members[m].source);
    single.set_launch_plan_json(members[m].launch_plan_json);
    const v1::CompileResult alone = (*compiler)->Compile(single, compile_options);
    ASSERT_EQ(alone.status(), v1::COMPILE_OK) << alone.log().substr(0, 2000);

    const auto want = CanonicalPtxEntries(alone.ptx(), -1);
    const auto got = CanonicalPtxEntries(together.ptx(), static_cast<int>(m));
    ASSERT_FALSE(want.empty());
    EXPECT_EQ(got.size(), want.size());
    for (const auto& [entry, text] : want) {
      ASSERT_TRUE(got.count(entry)) << entry;
      EXPECT_TRUE(got.at(entry) == text) << entry << " differs between batch and single compile";
    }
    for (const auto& [entry, r] : ByEntry(alone)) {
      const std::string renamed = batch->entries[m].at(entry);
      ASSERT_TRUE(together_resources.count(renamed)) << renamed;
      const v1::KernelResources& b = together_resources.at(renamed);
      EXPECT_EQ(b.registers(), r.registers()) << entry;
      EXPECT_EQ(b.static_shared_bytes(), r.static_shared_bytes()) << entry;
      EXPECT_EQ(b.local_bytes(), r.local_bytes()) << entry;
    }
    // The rewritten plan launches entries the batch's cubin holds.
    const nlohmann::json plan = nlohmann::json::parse(batch->plans[m]);
    for (const auto& launch : plan["launches"]) {
      EXPECT_TRUE(together_resources.count(launch["entry"].get<std::string>())) << launch["entry"];
    }
  }
}

}  // namespace
}  // namespace kforge::bench
