// The `kforge compile` subcommand (see compile_cli.h).
#include "services/worker/compile_cli.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/store.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "services/worker/compile_policy.h"
#include "services/worker/compile_service.h"
#include "services/worker/compiler.h"
#include "common/cli.h"

namespace kforge {
namespace {

struct CompileArgs {
  std::string source_path;
  std::string plan_path;
  std::string arch;
  bool json = false;
  std::string store_url;
  bool fast_math = false;
  int max_registers = 0;
  std::vector<std::string> flags;
  double time_limit_s = 60;
  int64_t memory_limit_mb = 8192;
  std::string cuda_include_dir;
  std::string nvrtc_path;
  std::string cubin_out;
  std::string ptx_out;
};

// Prints one line and sets a nonzero exit code: the whole report of a bad input.
void Fail(const std::string& message, int code = 2) {
  std::fprintf(stderr, "kforge compile: %s\n", message.c_str());
  cli::SetExitCode(code);
}

// Reads a text file of at most `max_bytes`; on failure prints why and returns false.
bool ReadTextFile(const std::string& path, size_t max_bytes, std::string* out) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    Fail(
        absl::StrFormat("cannot read %s: %s", path,
                        std::filesystem::exists(path, ec) ? "not a regular file" : "no such file"));
    return false;
  }
  uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec || size > max_bytes) {
    Fail(absl::StrFormat("%s is %d bytes; at most %d are accepted", path,
                         static_cast<int64_t>(size), static_cast<int64_t>(max_bytes)));
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (!in.good() && !in.eof()) {
    Fail(absl::StrFormat("cannot read %s", path));
    return false;
  }
  *out = buffer.str();
  if (size_t bad = FindInvalidUtf8(*out); bad != std::string::npos) {
    Fail(absl::StrFormat("%s is not valid UTF-8 text (first bad byte at offset %d)", path,
                         static_cast<int64_t>(bad)));
    return false;
  }
  return true;
}

bool WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  if (!out.good()) {
    Fail(absl::StrFormat("cannot write %s", path));
    return false;
  }
  return true;
}

void PrintJson(const v1::CompileResult& result) {
  v1::CompileResult shown = result;
  shown.clear_cubin();  // binary; reported by size (use --cubin-out for the bytes)
  shown.clear_ptx();
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string text;
  (void)google::protobuf::util::MessageToJsonString(shown, &text, options);
  nlohmann::json json = nlohmann::json::parse(text);
  json.erase("cubin");
  json.erase("ptx");
  json["cubin_bytes"] = result.cubin().size();
  json["ptx_bytes"] = result.ptx().size();
  std::printf("%s\n", json.dump(2).c_str());
}

void PrintHuman(const std::string& path, const v1::CompileResult& result) {
  std::printf("%s: %s (%s, %s, %.2f s%s)\n", path.c_str(), CompileStatusLabel(result.status()),
              result.arch().c_str(), result.compiler_version().c_str(), result.duration_s(),
              result.cache_hit() ? ", cache hit" : "");
  for (const v1::KernelResources& k : result.kernels()) {
    std::printf(
        "  %s: %d registers, %d B static smem, %d B stack, spills %d B stored / %d B "
        "loaded, up to %d threads per block\n",
        k.entry_point().c_str(), k.registers(), k.static_shared_bytes(), k.local_bytes(),
        k.spill_store_bytes(), k.spill_load_bytes(), k.max_threads_per_block());
  }
  if (result.status() == v1::COMPILE_OK) {
    std::printf("  cubin %zu bytes, PTX %zu bytes\n", result.cubin().size(), result.ptx().size());
  }
  // ptxas's -v report is shown above as resources; print only what else the log says.
  std::string rest;
  for (absl::string_view line : absl::StrSplit(result.log(), '\n')) {
    if (line.empty() || absl::StartsWith(line, "ptxas info") ||
        absl::StartsWith(line, "ptxas         .")) {
      continue;
    }
    absl::StrAppend(&rest, "  ", line, "\n");
  }
  if (!rest.empty()) std::printf("log:\n%s", rest.c_str());
}

void RunCompile(const CompileArgs& args) {
  v1::Candidate candidate;
  std::string text;
  if (!ReadTextFile(args.source_path, kMaxSourceBytes, &text)) return;
  candidate.set_source(std::move(text));
  if (!args.plan_path.empty()) {
    if (!ReadTextFile(args.plan_path, 64 * 1024, &text)) return;
    candidate.set_launch_plan_json(std::move(text));
  }

  std::unique_ptr<Store> store;
  if (!args.store_url.empty()) {
    auto opened = OpenStore(args.store_url);
    if (opened.ok()) {
      store = *std::move(opened);
    } else {
      std::fprintf(stderr,
                   "kforge compile: warning: cache %s unavailable (%s); compiling "
                   "without it\n",
                   args.store_url.c_str(), opened.status().ToString().c_str());
    }
  }
  CompilerOptions options;
  options.default_arch = DefaultArch();
  options.time_limit = absl::Seconds(args.time_limit_s);
  options.memory_limit_bytes = args.memory_limit_mb << 20;
  options.child_path = args.nvrtc_path;
  options.cuda_include_dir = args.cuda_include_dir;
  auto compiler = Compiler::Create(options, store.get());
  if (!compiler.ok()) {
    Fail(std::string(compiler.status().message()));
    return;
  }
  v1::CompileOptions compile_options;
  compile_options.set_arch(args.arch);
  compile_options.set_fast_math(args.fast_math);
  compile_options.set_max_registers(args.max_registers);
  for (const std::string& flag : args.flags) compile_options.add_extra_flags(flag);

  v1::CompileResult result = (*compiler)->Compile(candidate, compile_options);
  if (args.json) {
    PrintJson(result);
  } else {
    PrintHuman(args.source_path, result);
  }
  if (result.status() == v1::COMPILE_OK) {
    if (!args.cubin_out.empty() && !WriteFile(args.cubin_out, result.cubin())) return;
    if (!args.ptx_out.empty() && !WriteFile(args.ptx_out, result.ptx())) return;
  } else {
    cli::SetExitCode(1);
  }
}

}  // namespace

void RegisterCompileCommands(CLI::App& app) {
  auto args = std::make_shared<CompileArgs>();
  CLI::App* compile = app.add_subcommand(
      "compile",
      "Compile a candidate kernel with NVRTC as a worker does and report registers, "
      "shared memory and spills per kernel");
  compile->add_option("source", args->source_path, "CUDA C++ device code (kernel.cu)")->required();
  compile->add_option("--plan", args->plan_path,
                      "launch plan JSON; its entries must be defined by the source");
  compile->add_option("--arch", args->arch,
                      "target architecture, e.g. sm_90 (default: the "
                      "local GPU's, else sm_90)");
  compile->add_flag("--json", args->json, "print the result as JSON");
  compile->add_option("--store", args->store_url,
                      "compile cache: dir:PATH or redis://HOST:PORT[/DB]");
  compile->add_flag("--fast-math", args->fast_math, "compile with --use_fast_math");
  compile->add_option("--max-registers", args->max_registers, "cap registers per thread (16..255)");
  compile->add_option("--flag", args->flags, "extra NVRTC flag from the allow-list (repeatable)");
  compile->add_option("--time-limit", args->time_limit_s, "seconds before the compile is stopped")
      ->check(CLI::PositiveNumber);
  compile
      ->add_option("--memory-limit-mb", args->memory_limit_mb,
                   "address-space limit of the compiler process")
      ->check(CLI::PositiveNumber);
  compile->add_option("--cuda-include-dir", args->cuda_include_dir,
                      "directory with cuda_fp16.h/cuda_bf16.h (default: found automatically)");
  compile->add_option("--nvrtc", args->nvrtc_path,
                      "the kforge-nvrtc executable (default: beside kforge)");
  compile->add_option("--cubin-out", args->cubin_out, "write the cubin here");
  compile->add_option("--ptx-out", args->ptx_out, "write the PTX here");
  compile->callback([args] { RunCompile(*args); });
}

}  // namespace kforge
