// Integration test: for every family and dtype, at least 20 sampled configurations (spread
// over the family's sample ops; 20 for each dtype conversion) compile for sm_90 through the
// worker's Compiler (real NVRTC in the real kforge-nvrtc child; no GPU needed), and their
// launch plans name only entry points the cubin defines.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <regex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/digest.h"
#include "common/kforge_device.h"
#include "common/launch_plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/worker/compiler.h"
#include "tests/synth/sample_targets.h"

namespace kforge::synth {
namespace {

constexpr int kConfigsPerFamilyAndDtype = 20;

struct Job {
  std::string label;
  v1::Candidate candidate;
};

v1::Candidate CandidateOf(const GeneratedKernel& kernel) {
  v1::Candidate candidate;
  candidate.set_source(kernel.source);
  candidate.set_launch_plan_json(kernel.launch_plan_json);
  candidate.set_id(Sha256Hex(kernel.source + kernel.launch_plan_json));
  return candidate;
}

// The sample `name` in `dtype` with `config` (a config string), compiled for sm_90 (its plan in
// `plan_json` when given); a test failure and an empty result when the sample or the config
// is not usable.
v1::CompileResult CompileSampleConfig(Compiler& compiler, const std::string& name,
                                      v1::DType dtype, const std::string& config,
                                      std::string* plan_json = nullptr) {
  for (const testing::SampleTarget& s : testing::SampleTargets(dtype)) {
    if (s.name != name) continue;
    auto generator = testing::BindForTest(s.target);
    absl::StatusOr<Config> c = generator->Space().Parse(config);
    if (!c.ok() || !generator->Check(*c).empty()) {
      ADD_FAILURE() << name << " " << config << ": not a valid config";
      return {};
    }
    auto kernel = generator->Generate(*c);
    if (!kernel.ok()) {
      ADD_FAILURE() << kernel.status();
      return {};
    }
    if (plan_json != nullptr) *plan_json = kernel->launch_plan_json;
    v1::CompileOptions options;
    options.set_arch("sm_90");
    return compiler.Compile(CandidateOf(*kernel), options);
  }
  ADD_FAILURE() << "no sample target " << name;
  return {};
}

// The PTX of entry `entry` alone: from its `.entry` line to the next entry's.
std::string EntryPtx(const std::string& ptx, const std::string& entry) {
  const size_t begin = ptx.find(absl::StrCat(".entry ", entry, "("));
  if (begin == std::string::npos) return "";
  return ptx.substr(begin, ptx.find(".entry ", begin + 1) - begin);
}

class SynthCompileTest
    : public ::testing::TestWithParam<std::tuple<std::string, v1::DType>> {
 protected:
  static void SetUpTestSuite() {
    CompilerOptions options;
    options.child_path = KFORGE_NVRTC_CHILD;
    options.time_limit = absl::Seconds(120);
    auto compiler = Compiler::Create(options, /*cache=*/nullptr);
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    compiler_ = std::move(*compiler).release();
  }
  static void TearDownTestSuite() {
    delete compiler_;
    compiler_ = nullptr;
  }
  static Compiler* compiler_;
};

Compiler* SynthCompileTest::compiler_ = nullptr;

// The parameter names a family, or "family/prefix": that family's samples named prefix*.
// kConfigsPerFamilyAndDtype configs are spread over the samples, every op form compiled at
// least once (a prefix's forms, a dtype conversion per pair of types, 4 times): the family's
// 58 elementwise forms at 3 each took 300 s on CI's 2 cores.
TEST_P(SynthCompileTest, SampledConfigsCompileForSm90) {
  ASSERT_NE(compiler_, nullptr);
  const auto& [selector, dtype] = GetParam();
  const size_t slash = selector.find('/');
  const std::string family = selector.substr(0, slash);
  const std::string prefix = slash == std::string::npos ? "" : selector.substr(slash + 1);
  std::vector<testing::SampleTarget> samples;
  for (auto& s : testing::SampleTargets(dtype)) {
    if (s.family == family && absl::StartsWith(s.name, prefix)) samples.push_back(std::move(s));
  }
  ASSERT_FALSE(samples.empty());
  const int per_target =
      std::max<int>(prefix.empty() ? 1 : 4,
                    (kConfigsPerFamilyAndDtype + samples.size() - 1) / samples.size());
  std::vector<Job> jobs;
  for (size_t i = 0; i < samples.size(); ++i) {
    auto generator = testing::BindForTest(samples[i].target);
    ASSERT_NE(generator, nullptr);
    const std::vector<Config> configs = testing::ValidSample(*generator, per_target, 1000 + i);
    if (!prefix.empty()) ASSERT_EQ(static_cast<int>(configs.size()), per_target) << samples[i].name;
    for (const Config& config : configs) {
      auto kernel = generator->Generate(config);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      Job job;
      job.label = absl::StrCat(samples[i].name, " ", config.ToString());
      job.candidate = CandidateOf(*kernel);
      jobs.push_back(std::move(job));
    }
  }
  ASSERT_GE(static_cast<int>(jobs.size()), kConfigsPerFamilyAndDtype);

  v1::CompileOptions options;
  options.set_arch("sm_90");
  std::vector<v1::CompileResult> results(jobs.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  const unsigned workers = std::max(2u, std::min(4u, std::thread::hardware_concurrency()));
  for (unsigned w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < jobs.size(); i = next++) {
        results[i] = compiler_->Compile(jobs[i].candidate, options);
      }
    });
  }
  for (auto& t : threads) t.join();

  int spilling = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(results[i].status(), v1::COMPILE_OK)
        << jobs[i].label << "\n" << results[i].log().substr(0, 4000);
    for (const v1::KernelResources& k : results[i].kernels()) {
      if (k.spill_store_bytes() > 0) ++spilling;
      // A captured entry's KfArgs, constants but its pointers, lives in registers: an index
      // that varies at run time would put the whole struct in local memory.
      if (absl::EndsWith(k.entry_point(), "_captured")) {
        EXPECT_LT(k.local_bytes(), static_cast<int>(sizeof(KfArgs)))
            << jobs[i].label << ": " << k.entry_point() << "'s KfArgs is in local memory";
      }
    }
  }
  RecordProperty("configs", static_cast<int>(jobs.size()));
  RecordProperty("spilling_kernels", spilling);
}

// A half-precision row into float32 takes 8 elements per vector (16-byte loads, 32-byte stores
// split into two): every caching mode compiles.
TEST_F(SynthCompileTest, WideVectorsOfAWideningOutputCompile) {
  ASSERT_NE(compiler_, nullptr);
  for (v1::DType dtype : {v1::FLOAT16, v1::BFLOAT16}) {
    for (const char* cache : {"none", "regs", "smem"}) {
      const std::string config = absl::StrCat(
          "row_threads=128;rows_per_block=1;vec=8;algo=online;cache=", cache,
          ";reg_cache=16;split=1;split_mode=scratch;lag_scale=1;unroll=2;fast_math=0;grid=oneshot");
      v1::CompileResult result =
          CompileSampleConfig(*compiler_, "softmax_into_float32", dtype, config);
      EXPECT_EQ(result.status(), v1::COMPILE_OK)
          << v1::DType_Name(dtype) << " " << config << "\n" << result.log().substr(0, 4000);
    }
  }
}

// The row engine's output pass outside the register cache: the PTX issues the step's vector
// loads before its stores (a load after a store would wait for it, one vector in flight).
TEST_F(SynthCompileTest, OutputPassLoadsBeforeItStores) {
  ASSERT_NE(compiler_, nullptr);
  v1::CompileResult result = CompileSampleConfig(
      *compiler_, "group_norm_affine", v1::FLOAT32,
      "row_threads=256;rows_per_block=1;vec=4;algo=welford;cache=none;reg_cache=8;split=4;"
      "split_mode=cluster;lag_scale=1;unroll=4;grid=oneshot");
  ASSERT_EQ(result.status(), v1::COMPILE_OK) << result.log();
  for (const char* entry : {"kf_rows", "kf_rows_captured"}) {
    // The vector loads and stores in PTX order (stores in inline PTX, as .u32): no load after
    // the first store.
    const std::string ptx = EntryPtx(result.ptx(), entry);
    std::string order;
    for (size_t at = 0; (at = ptx.find(".global.v4.", at)) != std::string::npos; ++at) {
      order += ptx.compare(at - 2, 2, "ld") == 0 ? 'L' : 'S';
    }
    ASSERT_NE(order.find('S'), std::string::npos) << entry << " " << order;
    EXPECT_EQ(order.find('L', order.find('S')), std::string::npos) << entry << " " << order;
    EXPECT_GE(order.find('S'), 4u + 4u)
        << entry << ": pass 0's 4 loads, then the output pass's 4: " << order;
  }
}

// The register cache's slots: the PTX issues every slot's vector load of x before the first
// add of the row's sum of squares (each slot's load waited for the one before, its work in
// between), in the generic entry and the captured one.
TEST_F(SynthCompileTest, RegisterCacheSlotsLoadBeforeTheirWork) {
  ASSERT_NE(compiler_, nullptr);
  v1::CompileResult result = CompileSampleConfig(
      *compiler_, "mean_broadcast_rms_norm", v1::BFLOAT16,  // x f32, the weight bf16
      "row_threads=64;rows_per_block=1;vec=4;cache=regs;reg_cache=16;split=1;"
      "split_mode=scratch;lag_scale=1;unroll=1;grid=oneshot");
  ASSERT_EQ(result.status(), v1::COMPILE_OK) << result.log();
  for (const char* entry : {"kf_rows", "kf_rows_captured"}) {
    const std::string ptx = EntryPtx(result.ptx(), entry);
    // x * x added to the sum: one fma (the terms are squares, summed in fp32).
    const size_t first_add = ptx.find("fma.rn.f32");
    ASSERT_NE(first_add, std::string::npos) << entry;
    int loads = 0;
    for (size_t at = 0; (at = ptx.find("ld.global.v4.f32", at)) < first_add; ++at) ++loads;
    EXPECT_EQ(loads, 16 / 4) << entry
                             << ": 4 slots' loads (1024 columns, 64 threads) before the first add";
  }
}

// A two-pass softmax over float shared memory stores its exps there in pass 1, for the output
// pass to multiply: a shared-memory store follows the first exp (pass 0, the max alone, stores
// the values before any exp), in every dtype.
TEST_F(SynthCompileTest, TwoPassSoftmaxKeepsItsExpsInSharedMemory) {
  ASSERT_NE(compiler_, nullptr);
  for (v1::DType dtype : {v1::FLOAT32, v1::FLOAT16, v1::BFLOAT16}) {
    v1::CompileResult result = CompileSampleConfig(
        *compiler_, "softmax_attention_chain", dtype,
        "row_threads=32;rows_per_block=1;vec=4;algo=two_pass;cache=smem_f32;reg_cache=8;split=1;"
        "split_mode=scratch;lag_scale=1;unroll=1;fast_math=1;grid=oneshot;row_order=linear");
    ASSERT_EQ(result.status(), v1::COMPILE_OK) << v1::DType_Name(dtype) << result.log();
    for (const char* entry : {"kf_rows", "kf_rows_captured"}) {
      const std::string ptx = EntryPtx(result.ptx(), entry);
      const size_t first_exp = ptx.find("ex2.approx");
      ASSERT_NE(first_exp, std::string::npos) << entry;
      EXPECT_NE(ptx.find("st.shared", first_exp), std::string::npos)
          << v1::DType_Name(dtype) << " " << entry;
    }
  }
}

// The captured call's entry of a one-launch row kernel holds the captured shapes as constants:
// no 64-bit division or remainder (a broadcast operand's row, the geometry), no call, and a
// fraction of the generic entry's code, where Inductor's static-shape kernels start their loads
// at once.
TEST_F(SynthCompileTest, RowCapturedEntryFoldsTheCapturedGeometry) {
  ASSERT_NE(compiler_, nullptr);
  std::string plan_json;
  v1::CompileResult result =
      CompileSampleConfig(*compiler_, "mean_broadcast_rms_norm", v1::BFLOAT16,
                          "row_threads=64;rows_per_block=1;vec=4;cache=regs;reg_cache=16;split=1;"
                          "split_mode=scratch;lag_scale=1;unroll=1;grid=stride",
                          &plan_json);
  ASSERT_EQ(result.status(), v1::COMPILE_OK) << result.log();
  auto plan = LaunchPlan::Parse(plan_json);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->captured().has_value());
  ASSERT_EQ(plan->launches().size(), 1u);
  EXPECT_EQ(plan->launches()[0].captured_entry, "kf_rows_captured");
  const std::string generic = EntryPtx(result.ptx(), "kf_rows");
  const std::string captured = EntryPtx(result.ptx(), "kf_rows_captured");
  ASSERT_FALSE(captured.empty());
  EXPECT_TRUE(absl::StrContains(generic, "rem.s64")) << "the weight's row, (row * cols) % numel";
  for (const char* slow : {"rem.s64", "rem.u64", "div.s64", "div.u64", "call"}) {
    EXPECT_FALSE(absl::StrContains(captured, slow)) << slow;
  }
  EXPECT_LT(captured.size() * 2, generic.size());
  for (const v1::KernelResources& k : result.kernels()) EXPECT_EQ(k.local_bytes(), 0);
}

// The captured entries of a layout copy (key/value heads repeated by expand + reshape) and of a
// pooling (a max pool's window loop): no division by a size read at run time (a divisor in a
// register: the generic entries' view, groups and coordinates; one is left in a grid-stride
// loop, its trip count over gridDim, and none where a one-shot grid tiles the call exactly), no
// call, no local memory, and a fraction of the generic entry's code.
TEST_F(SynthCompileTest, LayoutAndPoolingCapturedEntriesDivideByConstantsOnly) {
  ASSERT_NE(compiler_, nullptr);
  const std::regex by_register(R"((div|rem)\.[su](32|64)\s+%\w+,\s*%\w+,\s*%\w+;)");
  struct Case {
    const char* sample;
    v1::DType dtype;
    const char* config;
    const char* entry;
    int divisions;  // by a register, at most, in the captured entry
  };
  for (const Case& c : {Case{"reshape_repeated_heads", v1::BFLOAT16,
                             "threads=128;vec=8;ilp=2;grid=stride", "kf_layout_copy", 1},
                        Case{"reshape_repeated_heads", v1::BFLOAT16,
                             "threads=128;vec=8;ilp=2;grid=oneshot", "kf_layout_copy", 0},
                        Case{"max_pool", v1::FLOAT32,
                             "threads=128;ilp=2;grid=oneshot;index_bits=32", "kf_pool2d", 1}}) {
    std::string plan_json;
    v1::CompileResult result =
        CompileSampleConfig(*compiler_, c.sample, c.dtype, c.config, &plan_json);
    ASSERT_EQ(result.status(), v1::COMPILE_OK) << c.sample << ": " << result.log();
    auto plan = LaunchPlan::Parse(plan_json);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(plan->captured().has_value()) << c.sample;
    const std::string captured_entry = absl::StrCat(c.entry, "_captured");
    EXPECT_EQ(plan->launches()[0].captured_entry, captured_entry);
    const std::string generic = EntryPtx(result.ptx(), c.entry);
    const std::string captured = EntryPtx(result.ptx(), captured_entry);
    ASSERT_FALSE(captured.empty()) << c.sample;
    auto divisions = [&](const std::string& ptx) {
      return std::distance(std::sregex_iterator(ptx.begin(), ptx.end(), by_register),
                           std::sregex_iterator());
    };
    EXPECT_GE(divisions(generic), 4) << c.sample << ": the generic entry";
    EXPECT_LE(divisions(captured), c.divisions) << c.sample << " " << c.config;
    EXPECT_FALSE(absl::StrContains(captured, "call")) << c.sample;
    EXPECT_LT(captured.size() * 2, generic.size()) << c.sample;
    for (const v1::KernelResources& k : result.kernels()) {
      if (k.entry_point() == captured_entry) EXPECT_EQ(k.local_bytes(), 0) << c.sample;
    }
  }
}

// A row split in one cooperative launch (split_mode=sync): an output op with its chunk in
// shared memory and a reduction compile, their plans clear the arrival counters first and
// launch the split cooperatively, and the waiting blocks poll with an acquire load.
TEST_F(SynthCompileTest, SyncSplitsCompileAsCooperativeLaunches) {
  ASSERT_NE(compiler_, nullptr);
  const std::pair<const char*, const char*> cases[] = {
      {"group_norm_affine",
       "row_threads=256;rows_per_block=1;vec=4;algo=welford;cache=smem;reg_cache=8;split=4;"
       "split_mode=sync;lag_scale=1;unroll=4;grid=oneshot"},
      {"softmax_last",
       "row_threads=32;rows_per_block=2;vec=4;algo=online;cache=none;reg_cache=8;split=2;"
       "split_mode=sync;lag_scale=1;unroll=1;fast_math=1;grid=oneshot"},
      {"sum_last",
       "row_threads=64;rows_per_block=1;vec=2;split=4;split_mode=sync;unroll=2;grid=oneshot"},
      {"group_norm_affine",
       "row_threads=256;rows_per_block=1;vec=4;algo=welford;cache=none;reg_cache=8;split=4;"
       "split_mode=sync_keep;lag_scale=1;unroll=4;grid=oneshot"},
  };
  for (const auto& [name, config] : cases) {
    std::string plan_json;
    v1::CompileResult result =
        CompileSampleConfig(*compiler_, name, v1::FLOAT32, config, &plan_json);
    ASSERT_EQ(result.status(), v1::COMPILE_OK) << name << "\n" << result.log().substr(0, 4000);
    EXPECT_NE(result.ptx().find("ld.acquire.gpu"), std::string::npos) << name;
    // sync_keep: the chunks' loads and the output's stores carry L2 eviction policies.
    const bool keep = absl::StrContains(config, "sync_keep");
    EXPECT_EQ(absl::StrContains(result.ptx(), "createpolicy.fractional.L2::evict_last"), keep);
    EXPECT_EQ(absl::StrContains(result.ptx(), "st.global.L2::cache_hint"), keep);
    // The output pass stores whole 16-byte vectors, never split into v2 and f32 pieces (the
    // partial statistics are the scalar stores).
    if (name == std::string("group_norm_affine")) {
      EXPECT_FALSE(absl::StrContains(result.ptx(), "st.global.v2")) << config;
    }
    auto plan = LaunchPlan::Parse(plan_json);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->launches().size(), 2u) << name;
    EXPECT_EQ(plan->launches()[0].entry, "kf_rows_clear");
    EXPECT_FALSE(plan->launches()[0].cooperative);
    EXPECT_EQ(plan->launches()[1].entry, "kf_rows_sync");
    EXPECT_TRUE(plan->launches()[1].cooperative) << name;
  }
}

// A row split whose output pass is a launch of its own (split_mode=stream): partials, each
// row's statistics, then the output in address order, stored as whole 16-byte vectors under
// an L2 evict_first policy; the later launches start early.
TEST_F(SynthCompileTest, StreamSplitsCompileAsThreeLaunches) {
  ASSERT_NE(compiler_, nullptr);
  const std::pair<const char*, const char*> cases[] = {
      {"group_norm_affine",
       "row_threads=32;rows_per_block=8;vec=4;algo=welford;cache=none;reg_cache=8;split=4;"
       "split_mode=stream;lag_scale=1;unroll=4;grid=oneshot"},
      {"softmax_last",
       "row_threads=32;rows_per_block=2;vec=4;algo=online;cache=none;reg_cache=8;split=2;"
       "split_mode=stream;lag_scale=1;unroll=2;fast_math=0;grid=stride"},
      {"layer_norm_affine",
       "row_threads=32;rows_per_block=4;vec=4;algo=welford;cache=none;reg_cache=8;split=2;"
       "split_mode=stream;lag_scale=1;unroll=1;grid=oneshot"},
  };
  for (const auto& [name, config] : cases) {
    std::string plan_json;
    v1::CompileResult result =
        CompileSampleConfig(*compiler_, name, v1::FLOAT32, config, &plan_json);
    ASSERT_EQ(result.status(), v1::COMPILE_OK) << name << "\n" << result.log().substr(0, 4000);
    EXPECT_TRUE(absl::StrContains(result.ptx(), "st.global.L2::cache_hint.v4.u32")) << name;
    auto plan = LaunchPlan::Parse(plan_json);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->launches().size(), 3u) << name;
    EXPECT_EQ(plan->launches()[0].entry, "kf_rows_partial");
    EXPECT_EQ(plan->launches()[1].entry, "kf_rows_stats");
    EXPECT_EQ(plan->launches()[2].entry, "kf_rows_apply");
    // Each later launch starts in the tail of the one before (the compiler refuses an
    // early_start entry that never waits).
    EXPECT_FALSE(plan->launches()[0].early_start);
    EXPECT_TRUE(plan->launches()[1].early_start);
    EXPECT_TRUE(plan->launches()[2].early_start);
    EXPECT_TRUE(absl::StrContains(result.ptx(), "griddepcontrol.launch_dependents")) << name;
  }
}

// A row split whose blocks take its chunks in ticket order (split_mode=ordered): a clearing
// launch, then one launch that is not cooperative and starts in the clear's tail; the chunks'
// first reads marked evict_last, their re-reads and the output's stores evict_first. The item
// launch has an entry for the captured call, its geometry constants, whose KfArgs stays out of
// local memory.
TEST_F(SynthCompileTest, OrderedSplitsCompileAsClearAndOneLaunch) {
  ASSERT_NE(compiler_, nullptr);
  const std::pair<const char*, const char*> cases[] = {
      {"group_norm_affine",
       "row_threads=512;rows_per_block=1;vec=4;algo=welford;cache=none;reg_cache=8;split=4;"
       "split_mode=ordered;lag_scale=1;unroll=1;grid=oneshot"},
      {"softmax_last",
       "row_threads=256;rows_per_block=1;vec=1;algo=online;cache=none;reg_cache=8;split=2;"
       "split_mode=ordered;lag_scale=1;unroll=2;fast_math=0;grid=oneshot"},
      {"layer_norm_affine",
       "row_threads=256;rows_per_block=1;vec=1;algo=welford;cache=none;reg_cache=8;split=2;"
       "split_mode=ordered;lag_scale=1;unroll=4;grid=oneshot"},
  };
  for (const auto& [name, config] : cases) {
    std::string plan_json;
    v1::CompileResult result =
        CompileSampleConfig(*compiler_, name, v1::FLOAT32, config, &plan_json);
    ASSERT_EQ(result.status(), v1::COMPILE_OK) << name << "\n" << result.log().substr(0, 4000);
    EXPECT_TRUE(absl::StrContains(result.ptx(), "ld.acquire.gpu")) << name;
    EXPECT_TRUE(absl::StrContains(result.ptx(), "atom.global.add.u64") ||
                absl::StrContains(result.ptx(), "atom.add.u64"))
        << name;  // the tickets
    EXPECT_TRUE(absl::StrContains(result.ptx(), "createpolicy.fractional.L2::evict_last")) << name;
    EXPECT_TRUE(absl::StrContains(result.ptx(), "st.global.L2::cache_hint")) << name;
    EXPECT_TRUE(absl::StrContains(result.ptx(), "griddepcontrol.wait")) << name;
    auto plan = LaunchPlan::Parse(plan_json);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->launches().size(), 2u) << name;
    EXPECT_EQ(plan->launches()[0].entry, "kf_rows_clear");
    EXPECT_EQ(plan->launches()[1].entry, "kf_rows_ordered");
    EXPECT_EQ(plan->launches()[1].captured_entry, "kf_rows_ordered_captured");
    EXPECT_FALSE(plan->launches()[1].cooperative) << name;
    EXPECT_TRUE(plan->launches()[1].early_start) << name;
    std::map<std::string, int> local_bytes;
    for (const v1::KernelResources& k : result.kernels()) {
      local_bytes[k.entry_point()] = k.local_bytes();
    }
    ASSERT_TRUE(local_bytes.contains("kf_rows_ordered_captured")) << name;
    EXPECT_LT(local_bytes["kf_rows_ordered_captured"], static_cast<int>(sizeof(KfArgs))) << name;
  }
}

std::string Name(const ::testing::TestParamInfo<std::tuple<std::string, v1::DType>>& info) {
  // "elementwise/to_" -> "elementwise_to"
  std::string selector = absl::StrReplaceAll(std::get<0>(info.param), {{"/", "_"}});
  if (absl::EndsWith(selector, "_")) selector.pop_back();
  return absl::StrCat(selector, "_", v1::DType_Name(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(
    AllFamilies, SynthCompileTest,
    ::testing::Combine(::testing::Values("rowwise", "group_norm", "group_norm/group_norm_temb",
                                         "batch_norm", "pooling",
                                         "reduction", "reduction/mean_broadcast",
                                         "elementwise", "elementwise/to_", "layout"),
                       ::testing::Values(v1::FLOAT32, v1::FLOAT16, v1::BFLOAT16)),
    Name);

}  // namespace
}  // namespace kforge::synth
