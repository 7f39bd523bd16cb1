// Tests of `kforge compile` through its CLI11 registration: output, JSON, cache use, and
// one clear line plus a nonzero exit for bad input.
#include "services/worker/compile_cli.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "common/cli.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

struct CliRun {
  int exit_code;
  std::string out;
  std::string err;
};

CliRun RunKforge(std::vector<std::string> args) {
  CLI::App app{"kforge"};
  RegisterCompileCommands(app);
  cli::SetExitCode(0);
  args.insert(args.begin(), "kforge");
  args.push_back("--nvrtc");
  args.push_back(KFORGE_NVRTC_CHILD);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  int parse_code = 0;
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    parse_code = app.exit(e);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  CliRun run{parse_code != 0 ? parse_code : cli::ExitCode(), testing::internal::GetCapturedStdout(),
             testing::internal::GetCapturedStderr()};
  return run;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

constexpr char kSource[] = R"(#include "kforge_device.h"
extern "C" __global__ void kf_fill(KfArgs args) {
  __shared__ float tile[64];
  tile[threadIdx.x] = (float)args.int_args[0];
  __syncthreads();
  ((float*)args.outputs[0].data)[threadIdx.x] = tile[63 - threadIdx.x];
}
)";

TEST(CompileCliTest, PrintsResourcesAndUsesTheCache) {
  TempDir dir;
  WriteFile(dir / "kernel.cu", kSource);
  WriteFile(dir / "plan.json",
            R"({"launches": [{"entry": "kf_fill", "grid": [1], "block": [64]}]})");
  std::vector<std::string> args = {
      "compile", (dir / "kernel.cu").string(),      "--plan",      (dir / "plan.json").string(),
      "--store", "dir:" + (dir / "cache").string(), "--cubin-out", (dir / "k.cubin").string()};
  CliRun first = RunKforge(args);
  EXPECT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_THAT(first.out, HasSubstr("kernel.cu: ok (sm_90, nvrtc "));
  EXPECT_THAT(first.out, HasSubstr("kf_fill: "));
  EXPECT_THAT(first.out, HasSubstr("256 B static smem"));
  EXPECT_THAT(first.out, Not(HasSubstr("cache hit")));
  EXPECT_THAT(first.out, Not(HasSubstr("log:")));  // only ptxas's report, shown as resources
  std::ifstream cubin(dir / "k.cubin", std::ios::binary);
  std::string magic(4, '\0');
  cubin.read(magic.data(), 4);
  EXPECT_EQ(magic,
            "\x7f"
            "ELF");

  CliRun second = RunKforge(args);
  EXPECT_EQ(second.exit_code, 0);
  EXPECT_THAT(second.out, HasSubstr("cache hit"));
}

TEST(CompileCliTest, JsonOutput) {
  TempDir dir;
  WriteFile(dir / "kernel.cu", kSource);
  CliRun run = RunKforge({"compile", (dir / "kernel.cu").string(), "--json", "--arch", "sm_89"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  nlohmann::json json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json["status"], "COMPILE_OK");
  EXPECT_EQ(json["arch"], "sm_89");
  EXPECT_GT(json["cubin_bytes"].get<int>(), 0);
  EXPECT_FALSE(json.contains("cubin"));
  ASSERT_EQ(json["kernels"].size(), 1u);
  EXPECT_EQ(json["kernels"][0]["entry_point"], "kf_fill");
  EXPECT_EQ(json["kernels"][0]["static_shared_bytes"], 256);
}

TEST(CompileCliTest, CompileErrorsExitOneWithTheLog) {
  TempDir dir;
  WriteFile(dir / "bad.cu", "extern \"C\" __global__ void kf(int* p) { p[0] = undefined_name; }\n");
  CliRun run = RunKforge({"compile", (dir / "bad.cu").string()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.out, HasSubstr("bad.cu: failed"));
  EXPECT_THAT(run.out,
              HasSubstr("kernel.cu(1): error: identifier \"undefined_name\" is undefined"));
}

TEST(CompileCliTest, BadInputIsOneLineAndNonzeroExit) {
  TempDir dir;
  CliRun missing = RunKforge({"compile", (dir / "missing.cu").string()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, StartsWith("kforge compile: cannot read "));
  EXPECT_THAT(missing.err, HasSubstr("no such file"));
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1);

  WriteFile(dir / "latin1.cu", "// caf\xe9\n");
  CliRun latin1 = RunKforge({"compile", (dir / "latin1.cu").string()});
  EXPECT_EQ(latin1.exit_code, 2);
  EXPECT_THAT(latin1.err, HasSubstr("is not valid UTF-8 text"));

  WriteFile(dir / "big.cu", std::string(300 * 1024, ' '));
  CliRun big = RunKforge({"compile", (dir / "big.cu").string()});
  EXPECT_EQ(big.exit_code, 2);
  EXPECT_THAT(big.err, HasSubstr("at most 262144 are accepted"));
}

}  // namespace
}  // namespace kforge
