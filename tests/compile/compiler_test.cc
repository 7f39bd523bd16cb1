// Integration tests of Compiler: real NVRTC in the real kforge-nvrtc child (no GPU needed),
// the refusals, time and memory limits, and the compile cache on a local directory and on a
// real redis-server.
#include "services/worker/compiler.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/local_store.h"
#include "common/redis_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/redis_server.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kScaleSource[] = R"(#include "kforge_device.h"

// out0 = in0 * int0, in fp16 through the ABI header and cuda_fp16.h.
extern "C" __global__ void kf_scale(KfArgs args) {
  __shared__ float staging[256];
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const __half* in = (const __half*)args.inputs[0].data;
  __half* out = (__half*)args.outputs[0].data;
  staging[threadIdx.x] = i < args.inputs[0].numel ? __half2float(in[i]) : 0.0f;
  __syncthreads();
  if (i < args.outputs[0].numel) {
    out[i] = __float2half(staging[threadIdx.x] * (float)args.int_args[0]);
  }
}

extern "C" __global__ void kf_zero_bf16(KfArgs args) {
  __nv_bfloat16* out = (__nv_bfloat16*)args.outputs[0].data;
  out[threadIdx.x] = __float2bfloat16(0.0f);
}
)";

constexpr char kScalePlan[] = R"json({
  "launches": [{"entry": "kf_scale", "grid": ["ceil_div(in0_numel, 256)"], "block": [256]}],
  "requires": {"contiguous": true, "alignment_bytes": 2}
})json";

v1::Candidate Candidate(std::string source, std::string plan = kScalePlan) {
  v1::Candidate candidate;
  candidate.set_source(std::move(source));
  candidate.set_launch_plan_json(std::move(plan));
  return candidate;
}

CompilerOptions TestOptions() {
  CompilerOptions options;
  options.child_path = KFORGE_NVRTC_CHILD;  // the built kforge-nvrtc
  options.time_limit = absl::Seconds(120);  // generous: CI machines are shared
  return options;
}

std::unique_ptr<Compiler> MakeCompiler(Store* cache = nullptr,
                                       CompilerOptions options = TestOptions()) {
  auto compiler = Compiler::Create(std::move(options), cache);
  EXPECT_TRUE(compiler.ok()) << compiler.status();
  return compiler.ok() ? *std::move(compiler) : nullptr;
}

TEST(CompilerTest, GoodSourceYieldsCubinPtxAndResources) {
  auto compiler = MakeCompiler();
  ASSERT_NE(compiler, nullptr);
  v1::CompileResult result = compiler->Compile(Candidate(kScaleSource), {});
  ASSERT_EQ(result.status(), v1::COMPILE_OK) << result.log();
  EXPECT_EQ(result.arch(), "sm_90");
  EXPECT_THAT(result.compiler_version(), StartsWith("nvrtc "));
  EXPECT_THAT(result.cubin(), StartsWith("\x7f"
                                         "ELF"));
  EXPECT_THAT(result.ptx(), HasSubstr(".entry kf_scale"));
  EXPECT_THAT(result.ptx(), HasSubstr(".target sm_90"));
  EXPECT_EQ(result.ptx().find('\0'), std::string::npos);
  EXPECT_THAT(result.log(), HasSubstr("ptxas info    : Used "));
  EXPECT_EQ(result.log().find('\0'), std::string::npos);
  EXPECT_THAT(result.cache_key(), StartsWith("compile/"));
  EXPECT_FALSE(result.cache_hit());
  EXPECT_GT(result.duration_s(), 0);
  ASSERT_EQ(result.kernels_size(), 2);
  const v1::KernelResources* scale = nullptr;
  for (const auto& kernel : result.kernels()) {
    if (kernel.entry_point() == "kf_scale") scale = &kernel;
  }
  ASSERT_NE(scale, nullptr);
  EXPECT_GT(scale->registers(), 0);
  EXPECT_EQ(scale->static_shared_bytes(), 1024);
  EXPECT_EQ(scale->spill_store_bytes(), 0);
  EXPECT_EQ(scale->max_threads_per_block(), 1024);
}

TEST(CompilerTest, OptionsReachNvrtc) {
  auto compiler = MakeCompiler();
  ASSERT_NE(compiler, nullptr);
  // A dynamically indexed local array lives in local memory: a stack frame.
  constexpr char kLocal[] = R"(#include "kforge_device.h"
extern "C" __global__ void kf_local(KfArgs args) {
  float scratch[64];
  const float* in = (const float*)args.inputs[0].data;
  for (int i = 0; i < 64; ++i) scratch[(i * 7 + threadIdx.x) & 63] = in[i];
  for (int i = 0; i < 64; ++i) scratch[(in[i] > 0 ? i : 63 - i)] += 1.0f;
  ((float*)args.outputs[0].data)[threadIdx.x] = scratch[args.int_args[0] & 63];
}
)";
  v1::CompileOptions options;
  options.set_arch("sm_80");
  options.set_max_registers(32);
  options.add_extra_flags("-lineinfo");
  v1::CompileResult result = compiler->Compile(
      Candidate(kLocal, R"({"launches": [{"entry": "kf_local", "grid": [1], "block": [32]}]})"),
      options);
  ASSERT_EQ(result.status(), v1::COMPILE_OK) << result.log();
  EXPECT_EQ(result.arch(), "sm_80");
  EXPECT_THAT(result.ptx(), HasSubstr(".target sm_80"));
  EXPECT_THAT(result.ptx(), HasSubstr(".loc"));  // -lineinfo
  ASSERT_EQ(result.kernels_size(), 1);
  EXPECT_GE(result.kernels(0).local_bytes(), 256);
  EXPECT_LE(result.kernels(0).registers(), 32);
}

// A plan's early_start launch runs its kernel while the launch before it drains: on sm_90 and
// newer the kernel must wait for it (griddepcontrol.wait) or the compile is refused, naming
// the entry; for older archs the launch runs after the one before as usual.
TEST(CompilerTest, EarlyStartLaunchesMustWaitForTheLaunchBefore) {
  auto compiler = MakeCompiler();
  ASSERT_NE(compiler, nullptr);
  constexpr char kTwoEntries[] = R"(#include "kforge_device.h"
extern "C" __global__ void kf_first(KfArgs a) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  ((float*)a.scratch.data)[threadIdx.x] = threadIdx.x;
}
extern "C" __global__ void kf_waits(KfArgs a) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  ((float*)a.outputs[0].data)[threadIdx.x] = ((float*)a.scratch.data)[threadIdx.x];
}
extern "C" __global__ void kf_reads_at_once(KfArgs a) {
  ((float*)a.outputs[0].data)[threadIdx.x] = ((float*)a.scratch.data)[threadIdx.x];
}
)";
  auto plan = [](const char* second) {
    return absl::StrCat(R"({"launches": [{"entry": "kf_first", "grid": [1], "block": [32]},
                          {"entry": ")", second, R"(", "grid": [1], "block": [32],
                           "early_start": true}]})");
  };
  v1::CompileOptions sm90;
  sm90.set_arch("sm_90");
  v1::CompileResult waits = compiler->Compile(Candidate(kTwoEntries, plan("kf_waits")), sm90);
  EXPECT_EQ(waits.status(), v1::COMPILE_OK) << waits.log();
  v1::CompileResult at_once =
      compiler->Compile(Candidate(kTwoEntries, plan("kf_reads_at_once")), sm90);
  EXPECT_EQ(at_once.status(), v1::COMPILE_REFUSED);
  EXPECT_THAT(at_once.log(), HasSubstr("plan launches entry kf_reads_at_once with early_start, "
                                       "but its code never waits"));
  v1::CompileOptions sm80;
  sm80.set_arch("sm_80");
  v1::CompileResult older =
      compiler->Compile(Candidate(kTwoEntries, plan("kf_reads_at_once")), sm80);
  EXPECT_EQ(older.status(), v1::COMPILE_OK) << older.log();
}

TEST(CompilerTest, SyntaxErrorIsFailedWithTheLineInTheLog) {
  auto compiler = MakeCompiler();
  ASSERT_NE(compiler, nullptr);
  v1::CompileResult result = compiler->Compile(
      Candidate("#include \"kforge_device.h\"\nextern \"C\" __global__ void kf_scale(KfArgs a) {\n"
                "  int x = 1\n}\n"),
      {});
  EXPECT_EQ(result.status(), v1::COMPILE_FAILED);
  EXPECT_THAT(result.log(), HasSubstr("kernel.cu(4): error"));
  EXPECT_THAT(result.log(), Not(HasSubstr("ptxas")));
  EXPECT_TRUE(result.cubin().empty());
  EXPECT_EQ(result.kernels_size(), 0);
}

TEST(CompilerTest, PlanMustNameEntriesTheSourceDefines) {
  auto compiler = MakeCompiler();
  ASSERT_NE(compiler, nullptr);
  v1::CompileResult missing = compiler->Compile(
      Candidate(kScaleSource,
                R"({"launches": [{"entry": "kf_missing", "grid": [1], "block": [32]}]})"),
      {});
  EXPECT_EQ(missing.status(), v1::COMPILE_REFUSED);
  EXPECT_THAT(missing.log(), HasSubstr("plan names entry kf_missing, which the source does not "
                                       "define"));
  EXPECT_TRUE(missing.cubin().empty());

  v1::CompileResult mangled = compiler->Compile(
      Candidate("#include \"kforge_device.h\"\n__global__ void kf_cpp(KfArgs a) {}\n",
                R"({"launches": [{"entry": "kf_cpp", "grid": [1], "block": [32]}]})"),
      {});
  EXPECT_EQ(mangled.status(), v1::COMPILE_REFUSED);
  EXPECT_THAT(mangled.log(), HasSubstr("declare it extern \"C\""));

  v1::CompileResult bad_plan = compiler->Compile(Candidate(kScaleSource, "{\"launches\": 3}"), {});
  EXPECT_EQ(bad_plan.status(), v1::COMPILE_REFUSED);
  EXPECT_THAT(bad_plan.log(), HasSubstr("launch plan: launches: expected an array"));
}

TEST(CompilerTest, RdcDynamicParallelismAndBadInputAreRefused) {
  auto compiler = MakeCompiler();
  ASSERT_NE(compiler, nullptr);
  v1::CompileOptions rdc;
  rdc.add_extra_flags("-rdc=true");
  v1::CompileResult result = compiler->Compile(Candidate(kScaleSource), rdc);
  EXPECT_EQ(result.status(), v1::COMPILE_REFUSED);
  EXPECT_THAT(result.log(), HasSubstr("relocatable device code"));

  result = compiler->Compile(
      Candidate("#include \"kforge_device.h\"\n"
                "extern \"C\" __global__ void kf_child(KfArgs a) {}\n"
                "extern \"C\" __global__ void kf_scale(KfArgs a) { kf_child<<<1, 1>>>(a); }\n"),
      {});
  EXPECT_EQ(result.status(), v1::COMPILE_REFUSED);
  EXPECT_THAT(result.log(), HasSubstr("line 3: device-side kernel launches"));

  result = compiler->Compile(Candidate(std::string("// \xff\xfe\n") + kScaleSource), {});
  EXPECT_EQ(result.status(), v1::COMPILE_REFUSED);
  EXPECT_THAT(result.log(), HasSubstr("not valid UTF-8"));

  result = compiler->Compile(Candidate(std::string(300 * 1024, ' ') + kScaleSource), {});
  EXPECT_EQ(result.status(), v1::COMPILE_REFUSED);
  EXPECT_THAT(result.log(), HasSubstr("at most 262144"));

  v1::CompileOptions old_arch;
  old_arch.set_arch("sm_35");
  result = compiler->Compile(Candidate(kScaleSource), old_arch);
  EXPECT_EQ(result.status(), v1::COMPILE_REFUSED);
  EXPECT_THAT(result.log(), HasSubstr("arch sm_35 is not supported by nvrtc"));
}

// 2^N distinct template instantiations: the frontend cannot finish in any sensible time.
constexpr char kTemplateBomb[] = R"(#include "kforge_device.h"
template <int N, long long M> struct Bomb {
  static constexpr long long value = Bomb<N - 1, 2 * M>::value + Bomb<N - 1, 2 * M + 1>::value;
};
template <long long M> struct Bomb<0, M> { static constexpr long long value = M; };
extern "C" __global__ void kf_scale(KfArgs args) {
  ((long long*)args.outputs[0].data)[0] = Bomb<40, 1>::value;
}
)";

TEST(CompilerTest, CompileBombIsStoppedAndTheNextCompileSucceeds) {
  TempDir dir;
  auto store = LocalStore::Create(dir.str());
  ASSERT_TRUE(store.ok()) << store.status();
  CompilerOptions options = TestOptions();
  options.time_limit = absl::Seconds(4);
  options.memory_limit_bytes = int64_t{2} << 30;
  auto compiler = MakeCompiler(store->get(), options);
  ASSERT_NE(compiler, nullptr);
  v1::CompileResult bomb = compiler->Compile(Candidate(kTemplateBomb), {});
  EXPECT_TRUE(bomb.status() == v1::COMPILE_TIMEOUT || bomb.status() == v1::COMPILE_RESOURCE_LIMIT)
      << v1::CompileStatus_Name(bomb.status()) << ": " << bomb.log();
  EXPECT_THAT(bomb.log(), Not(testing::IsEmpty()));
  // Not cached: a timeout says more about the machine's load than about the source.
  auto cached = (*store)->Get(bomb.cache_key());
  ASSERT_TRUE(cached.ok());
  EXPECT_FALSE(cached->has_value());

  v1::CompileResult good = compiler->Compile(Candidate(kScaleSource), {});
  EXPECT_EQ(good.status(), v1::COMPILE_OK) << good.log();
}

TEST(CompilerTest, MemoryLimitIsResourceLimit) {
  CompilerOptions options = TestOptions();
  options.memory_limit_bytes = 32 << 20;  // too small to even map libnvrtc
  auto compiler = MakeCompiler(nullptr, options);
  ASSERT_NE(compiler, nullptr);
  v1::CompileResult result = compiler->Compile(Candidate(kScaleSource), {});
  EXPECT_EQ(result.status(), v1::COMPILE_RESOURCE_LIMIT) << result.log();
  EXPECT_THAT(result.log(), HasSubstr("memory limit of 32 MiB"));
}

TEST(CompilerTest, ACrashOfTheCompilerProcessIsResourceLimitWithItsStderr) {
  // FakeCrashingChild: a stand-in for kforge-nvrtc that dies of SIGSEGV, since the real one
  // cannot be made to crash on demand.
  TempDir dir;
  const std::string fake = (dir / "fake-crashing-nvrtc").string();
  {
    std::ofstream script(fake);
    script << "#!/bin/sh\necho 'nvrtc: internal error in the frontend' >&2\nkill -SEGV $$\n";
  }
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  CompilerOptions options = TestOptions();
  options.child_path = fake;
  auto compiler = MakeCompiler(nullptr, options);
  ASSERT_NE(compiler, nullptr);
  v1::CompileResult result = compiler->Compile(Candidate(kScaleSource), {});
  EXPECT_EQ(result.status(), v1::COMPILE_RESOURCE_LIMIT);
  EXPECT_THAT(result.log(), HasSubstr("died of signal 11"));
  EXPECT_THAT(result.log(), HasSubstr("nvrtc: internal error in the frontend"));
}

TEST(CompilerTest, ConcurrentCompilesAreIndependent) {
  auto compiler = MakeCompiler();
  ASSERT_NE(compiler, nullptr);
  v1::CompileResult results[2];
  std::thread other([&] { results[0] = compiler->Compile(Candidate(kScaleSource), {}); });
  results[1] = compiler->Compile(
      Candidate("#include \"kforge_device.h\"\nextern \"C\" __global__ void kf_scale(KfArgs a) "
                "{ ((int*)a.outputs[0].data)[0] = 7; }\n"),
      {});
  other.join();
  EXPECT_EQ(results[0].status(), v1::COMPILE_OK) << results[0].log();
  EXPECT_EQ(results[1].status(), v1::COMPILE_OK) << results[1].log();
  EXPECT_NE(results[0].cubin(), results[1].cubin());
}

TEST(CompilerTest, CreateReportsMissingPieces) {
  CompilerOptions options = TestOptions();
  options.child_path = "/nonexistent/kforge-nvrtc";
  auto compiler = Compiler::Create(options, nullptr);
  ASSERT_FALSE(compiler.ok());
  EXPECT_THAT(compiler.status().message(), HasSubstr("/nonexistent/kforge-nvrtc"));

  options = TestOptions();
  options.cuda_include_dir = "/nonexistent/include";
  compiler = Compiler::Create(options, nullptr);
  ASSERT_FALSE(compiler.ok());
  EXPECT_THAT(compiler.status().message(), HasSubstr("has no cuda_fp16.h"));
}

TEST(CompilerTest, SecondCompileIsALocalCacheHit) {
  TempDir dir;
  auto store = LocalStore::Create(dir.str());
  ASSERT_TRUE(store.ok()) << store.status();
  auto compiler = MakeCompiler(store->get());
  ASSERT_NE(compiler, nullptr);
  v1::CompileResult first = compiler->Compile(Candidate(kScaleSource), {});
  ASSERT_EQ(first.status(), v1::COMPILE_OK) << first.log();
  EXPECT_FALSE(first.cache_hit());
  // Same candidate up to line endings and plan whitespace: the same key.
  std::string crlf;
  for (char c : std::string(kScaleSource))
    crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  v1::CompileResult second = compiler->Compile(
      Candidate(crlf, R"json({"requires": {"alignment_bytes": 2, "contiguous": true}, "launches":
          [{"block": [256], "entry": "kf_scale", "grid": ["ceil_div(in0_numel, 256)"]}]})json"),
      {});
  EXPECT_TRUE(second.cache_hit());
  EXPECT_EQ(second.cache_key(), first.cache_key());
  EXPECT_EQ(second.cubin(), first.cubin());
  EXPECT_EQ(second.kernels_size(), first.kernels_size());

  // Different options: a different key.
  v1::CompileOptions fast;
  fast.set_fast_math(true);
  EXPECT_NE(compiler->CacheKey(Candidate(kScaleSource), fast), first.cache_key());

  // The same source with another plan: its own key, NVRTC's output from the source's entry,
  // and the plan still checked.
  v1::CompileResult replanned = compiler->Compile(
      Candidate(kScaleSource, R"json({"launches": [{"entry": "kf_scale", "grid": [7],
                                                     "block": [128]}]})json"),
      {});
  EXPECT_EQ(replanned.status(), v1::COMPILE_OK) << replanned.log();
  EXPECT_TRUE(replanned.cache_hit());
  EXPECT_NE(replanned.cache_key(), first.cache_key());
  EXPECT_EQ(replanned.cubin(), first.cubin());
  v1::CompileResult misplanned = compiler->Compile(
      Candidate(kScaleSource, R"json({"launches": [{"entry": "kf_nope", "grid": [7],
                                                     "block": [128]}]})json"),
      {});
  EXPECT_EQ(misplanned.status(), v1::COMPILE_REFUSED);
  EXPECT_THAT(misplanned.log(), HasSubstr("plan names entry kf_nope"));

  // Failures are cached too (with a TTL).
  v1::Candidate broken = Candidate("extern \"C\" __global__ void kf_scale() { nope }\n");
  EXPECT_FALSE(compiler->Compile(broken, {}).cache_hit());
  v1::CompileResult again = compiler->Compile(broken, {});
  EXPECT_EQ(again.status(), v1::COMPILE_FAILED);
  EXPECT_TRUE(again.cache_hit());
}

TEST(CompilerRedisTest, SecondCompileIsARedisCacheHitAndADownRedisIsAMiss) {
  RedisServerProcess redis;
  ASSERT_TRUE(redis.status().ok()) << redis.status();
  RedisOptions redis_options;
  redis_options.connect_timeout = absl::Milliseconds(500);
  redis_options.operation_timeout = absl::Seconds(2);
  auto store = RedisStore::Create(redis.url(), redis_options);
  ASSERT_TRUE(store.ok()) << store.status();
  auto compiler = MakeCompiler(store->get());
  ASSERT_NE(compiler, nullptr);

  v1::CompileResult first = compiler->Compile(Candidate(kScaleSource), {});
  ASSERT_EQ(first.status(), v1::COMPILE_OK) << first.log();
  EXPECT_FALSE(first.cache_hit());
  v1::CompileResult second = compiler->Compile(Candidate(kScaleSource), {});
  EXPECT_TRUE(second.cache_hit());
  EXPECT_EQ(second.cubin(), first.cubin());
  auto stored = (*store)->Get(first.cache_key());
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_TRUE(stored->has_value());

  redis.Stop();
  v1::CompileResult while_down = compiler->Compile(Candidate(kScaleSource), {});
  EXPECT_EQ(while_down.status(), v1::COMPILE_OK) << while_down.log();
  EXPECT_FALSE(while_down.cache_hit());
  EXPECT_EQ(while_down.cubin(), first.cubin());
}

}  // namespace
}  // namespace kforge
