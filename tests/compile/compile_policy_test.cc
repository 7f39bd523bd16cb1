// Unit tests of what the worker refuses to compile, the NVRTC flags it builds, and the
// parsing of ptxas's resource report.
#include "services/worker/compile_policy.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/worker/ptxas_report.h"

namespace kforge {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Refusal(const std::string& source) {
  absl::Status status = CheckSourcePolicy(source);
  EXPECT_FALSE(status.ok()) << source;
  return std::string(status.message());
}

std::string OptionRefusal(const v1::CompileOptions& options) {
  absl::Status status = CheckCompileOptions(options);
  EXPECT_FALSE(status.ok()) << options.DebugString();
  return std::string(status.message());
}

v1::CompileOptions Options(std::vector<std::string> flags = {}, std::string arch = "sm_90") {
  v1::CompileOptions options;
  options.set_arch(arch);
  for (const std::string& flag : flags) options.add_extra_flags(flag);
  return options;
}

constexpr char kGood[] = R"(#include "kforge_device.h"
#include <cuda/std/limits>
// a comment with <<< and cudaLaunchDevice is fine
extern "C" __global__ void kf_copy(KfArgs args) {
  const char* s = "<<< also fine in a string";
  (void)s;
}
)";

TEST(CompilePolicyTest, AcceptsOrdinaryKernels) {
  EXPECT_TRUE(CheckSourcePolicy(kGood).ok()) << CheckSourcePolicy(kGood);
}

TEST(CompilePolicyTest, RefusesBadSources) {
  EXPECT_THAT(Refusal(""), HasSubstr("the source is empty"));
  EXPECT_THAT(Refusal(" \n\t"), HasSubstr("the source is empty"));
  EXPECT_THAT(Refusal(std::string(kMaxSourceBytes + 1, ' ') + "x"),
              HasSubstr("at most 262144 are accepted"));
  EXPECT_THAT(Refusal("int x;\n// caf\xe9\n"), HasSubstr("not valid UTF-8 (line 2"));
  EXPECT_THAT(Refusal(std::string("int x;\0", 7)), HasSubstr("NUL byte"));
}

TEST(CompilePolicyTest, RefusesDynamicParallelism) {
  EXPECT_THAT(Refusal("__global__ void a();\n__global__ void b() { a<<<1, 1>>>(); }"),
              HasSubstr("line 2: device-side kernel launches"));
  EXPECT_THAT(Refusal("__global__ void b() { void* p = cudaGetParameterBuffer(8, 8); }"),
              HasSubstr("cudaGetParameterBuffer (dynamic parallelism) is refused"));
  EXPECT_THAT(Refusal("__global__ void b() { cudaLaunchDevice(0, 0, {}, {}, 0, 0); }"),
              HasSubstr("cudaLaunchDevice"));
  // Identifiers that merely contain the name are not launches.
  EXPECT_TRUE(CheckSourcePolicy("int my_cudaLaunchDevice_count = 0;").ok());
}

TEST(CompilePolicyTest, RefusesIncludesThatReachOutsideTheHeaders) {
  EXPECT_THAT(Refusal("#include \"/etc/passwd\"\n"),
              HasSubstr("#include \"/etc/passwd\" is refused"));
  EXPECT_THAT(Refusal("#include <../../etc/shadow>\n"), HasSubstr("is refused"));
  EXPECT_THAT(Refusal("  #  include_next \"a/../../b.h\"\n"), HasSubstr("is refused"));
  EXPECT_THAT(Refusal("#define P \"/etc/passwd\"\n#include P\n"),
              HasSubstr("line 2: #include must name a header literally"));
  EXPECT_THAT(Refusal("#\\\ninclude \"/etc/passwd\"\n"), HasSubstr("is refused"));
  EXPECT_THAT(Refusal("%:include </proc/self/environ>\n"), HasSubstr("is refused"));
  EXPECT_TRUE(CheckSourcePolicy("#include <cuda_bf16.h>\n#include \"kforge_device.h\"\n").ok());
}

TEST(CompilePolicyTest, OptionsAllowListAndRdcRefusal) {
  EXPECT_TRUE(CheckCompileOptions(
                  Options({"-lineinfo", "--ftz=true", "-DTILE=64", "--diag-suppress=177,550"}))
                  .ok());
  EXPECT_THAT(OptionRefusal(Options({"-rdc=true"})), HasSubstr("relocatable device code"));
  EXPECT_THAT(OptionRefusal(Options({"--relocatable-device-code=true"})),
              HasSubstr("relocatable device code"));
  EXPECT_THAT(OptionRefusal(Options({"-dc"})), HasSubstr("relocatable device code"));
  EXPECT_THAT(OptionRefusal(Options({"-I/etc"})), HasSubstr("flag '-I/etc' is not allowed"));
  EXPECT_THAT(OptionRefusal(Options({"--ftz=maybe"})), HasSubstr("not allowed"));
  EXPECT_THAT(OptionRefusal(Options({"-DX=$(rm)"})), HasSubstr("not allowed"));
  EXPECT_THAT(OptionRefusal(Options({}, "compute_90")), HasSubstr("not a real GPU architecture"));
  EXPECT_THAT(OptionRefusal(Options({}, "sm_90; rm")), HasSubstr("not a real GPU architecture"));
  EXPECT_TRUE(CheckCompileOptions(Options({}, "sm_90a")).ok());
  v1::CompileOptions regs = Options();
  regs.set_max_registers(8);
  EXPECT_THAT(OptionRefusal(regs), HasSubstr("max_registers 8 is outside 16..255"));
}

TEST(CompilePolicyTest, NvrtcFlags) {
  v1::CompileOptions options = Options({"-lineinfo"});
  options.set_fast_math(true);
  options.set_max_registers(64);
  std::vector<std::string> flags = NvrtcFlags(options, "/opt/cuda/include");
  EXPECT_THAT(flags, Contains("--gpu-architecture=sm_90"));
  EXPECT_THAT(flags, Contains("-std=c++17"));
  EXPECT_THAT(flags, Contains("-Xptxas=-v"));
  EXPECT_THAT(flags, Contains("--use_fast_math"));
  EXPECT_THAT(flags, Contains("--maxrregcount=64"));
  EXPECT_THAT(flags, Contains("-lineinfo"));
  EXPECT_THAT(flags, Contains("-I/opt/cuda/include"));
  EXPECT_THAT(NvrtcFlags(Options({"-std=c++20"}), ""), Not(Contains("-std=c++17")));
}

TEST(CompilePolicyTest, Utf8AndCanonicalSource) {
  EXPECT_EQ(FindInvalidUtf8("plain ascii"), std::string::npos);
  EXPECT_EQ(FindInvalidUtf8("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), std::string::npos);
  EXPECT_EQ(FindInvalidUtf8("ab\xc0\xaf"), 2u);        // overlong '/'
  EXPECT_EQ(FindInvalidUtf8("\xed\xa0\x80"), 0u);      // surrogate
  EXPECT_EQ(FindInvalidUtf8("x\xe2\x82"), 1u);         // truncated
  EXPECT_EQ(FindInvalidUtf8("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(CanonicalSource("a\r\nb"), "a\nb\n");
  EXPECT_EQ(CanonicalSource("a\nb\n"), "a\nb\n");
}

// Captured from NVRTC 13.0 (sm_90) with -Xptxas=-v.
constexpr char kPtxasLog[] = R"(ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z5templILi3EEv6KfArgs' for 'sm_90'
ptxas info    : Function properties for _Z5templILi3EEv6KfArgs
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
ptxas info    : Compile time = 1.687 ms
ptxas info    : Compiling entry function 'kf_second' for 'sm_90'
ptxas info    : Function properties for kf_second
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 16 bytes smem, 400 bytes cmem[0], 8 bytes cmem[2]
ptxas info    : Compile time = 0.825 ms
ptxas info    : Compiling entry function 'kf_rows' for 'sm_90'
ptxas info    : Function properties for kf_rows
ptxas         .     256 bytes stack frame, 12 bytes spill stores, 20 bytes spill loads
ptxas info    : Used 34 registers, used 1 barriers, 288 bytes cumulative stack size, 1024 bytes smem
ptxas info    : Compile time = 12.401 ms
ptxas info    : Function properties for _Z6helperPfi
ptxas         .     64 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
)";

TEST(PtxasReportTest, ParsesEveryEntry) {
  std::vector<v1::KernelResources> kernels = ParsePtxasReport(kPtxasLog);
  ASSERT_EQ(kernels.size(), 3u);
  EXPECT_EQ(kernels[0].entry_point(), "_Z5templILi3EEv6KfArgs");
  EXPECT_EQ(kernels[0].registers(), 8);
  EXPECT_EQ(kernels[1].entry_point(), "kf_second");
  EXPECT_EQ(kernels[1].registers(), 255);
  EXPECT_EQ(kernels[1].static_shared_bytes(), 16);
  EXPECT_EQ(kernels[1].const_bytes(), 408);
  EXPECT_EQ(kernels[1].max_threads_per_block(), 256);
  const v1::KernelResources& rows = kernels[2];
  EXPECT_EQ(rows.entry_point(), "kf_rows");
  EXPECT_EQ(rows.registers(), 34);
  EXPECT_EQ(rows.static_shared_bytes(), 1024);
  EXPECT_EQ(rows.local_bytes(), 288);       // cumulative: includes the helper's frame
  EXPECT_EQ(rows.spill_store_bytes(), 12);  // the helper's spills are not the entry's
  EXPECT_EQ(rows.spill_load_bytes(), 20);
  EXPECT_EQ(rows.max_threads_per_block(), 1024);
  EXPECT_TRUE(ParsePtxasReport("kernel.cu(3): error: expected a \";\"\n").empty());
}

TEST(PtxasReportTest, RegisterBoundOnThreads) {
  EXPECT_EQ(MaxThreadsForRegisters(32), 1024);
  EXPECT_EQ(MaxThreadsForRegisters(64), 1024);
  EXPECT_EQ(MaxThreadsForRegisters(65), 896);  // 65*32 -> 2304 per warp; 28 warps
  EXPECT_EQ(MaxThreadsForRegisters(128), 512);
  EXPECT_EQ(MaxThreadsForRegisters(255), 256);
}

}  // namespace
}  // namespace kforge
