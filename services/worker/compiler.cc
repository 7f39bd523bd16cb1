// Compiler: policy checks, the compile cache, and the kforge-nvrtc child (see compiler.h).
#include "services/worker/compiler.h"

#include <dlfcn.h>
#include <nvrtc.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/digest.h"
#include "common/gpu_arch.h"
#include "common/launch_plan.h"
#include "kforge/v1/worker.pb.h"
#include "services/worker/compile_policy.h"
#include "services/worker/nvrtc_compile.h"
#include "services/worker/subprocess.h"
#include "spdlog/spdlog.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

bool HasCudaHeaders(const std::string& dir) {
  std::error_code ec;
  return !dir.empty() && fs::exists(fs::path(dir) / "cuda_fp16.h", ec) &&
         fs::exists(fs::path(dir) / "cuda_bf16.h", ec);
}

// The include/ directory beside the loaded libnvrtc (…/lib64/libnvrtc.so.13 ->
// …/include; pip: …/nvidia/cu13/lib/libnvrtc.so.13 -> …/nvidia/cu13/include).
std::string IncludeDirBesideNvrtc() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  std::error_code ec;
  fs::path lib = fs::canonical(info.dli_fname, ec);
  if (ec) return "";
  return (lib.parent_path().parent_path() / "include").string();
}

std::string Excerpt(std::string_view text, size_t max_bytes = 2000) {
  if (text.size() > max_bytes) text = text.substr(text.size() - max_bytes);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  return std::string(text);
}

v1::CompileResult Refused(const v1::CompileOptions& options, const std::string& version,
                          absl::string_view why) {
  v1::CompileResult result;
  result.set_status(v1::COMPILE_REFUSED);
  result.set_arch(options.arch());
  result.set_compiler_version(version);
  result.set_log(absl::StrCat("refused: ", why));
  return result;
}

// Names of the extern "C" entry points ptxas compiled (mangled C++ names start with _Z).
bool DefinesEntry(const v1::CompileResult& result, const std::string& entry,
                  bool* defined_mangled) {
  for (const v1::KernelResources& kernel : result.kernels()) {
    if (kernel.entry_point() == entry) return true;
    if (absl::StartsWith(kernel.entry_point(), "_Z") &&
        absl::StrContains(kernel.entry_point(), entry)) {
      *defined_mangled = true;
    }
  }
  return false;
}

// The PTX of entry `entry`: from its .entry line to the next entry's (device functions are
// inlined into the entries that call them).
absl::string_view EntryPtx(absl::string_view ptx, const std::string& entry) {
  const size_t at = ptx.find(absl::StrCat(".entry ", entry, "("));
  if (at == absl::string_view::npos) return {};
  const size_t next = ptx.find(".entry ", at + 1);
  return ptx.substr(at, next == absl::string_view::npos ? absl::string_view::npos : next - at);
}

// An early_start launch's kernel must wait for the launch before it before reading what that
// one wrote: on sm_90 and newer its PTX has griddepcontrol.wait. The reason it is refused, or
// empty. (Older archs launch it after the one before as usual.)
std::string EarlyStartWithoutWait(const LaunchPlan& plan, const v1::CompileResult& result,
                                  absl::string_view arch) {
  if (ArchNumber(arch) < 90) return "";
  for (const LaunchPlan::Launch& launch : plan.launches()) {
    if (launch.early_start &&
        !absl::StrContains(EntryPtx(result.ptx(), launch.entry), "griddepcontrol.wait")) {
      return absl::StrCat("plan launches entry ", launch.entry,
                          " with early_start, but its code never waits for the launch before "
                          "it (griddepcontrol.wait: call kf_wait_previous() before reading "
                          "what earlier launches wrote, or drop early_start)");
    }
  }
  return "";
}

}  // namespace

std::string DefaultArch() {
  static const std::string arch = [] {
    const std::string fallback = "sm_90";
    // dlopen, not a link dependency: the worker and CLI must run where libcuda is absent.
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return fallback;
    using InitFn = int (*)(unsigned);
    using DeviceGetFn = int (*)(int*, int);
    using AttributeFn = int (*)(int*, int, int);
    auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
    auto device_get = reinterpret_cast<DeviceGetFn>(dlsym(lib, "cuDeviceGet"));
    auto attribute = reinterpret_cast<AttributeFn>(dlsym(lib, "cuDeviceGetAttribute"));
    int device = 0, major = 0, minor = 0;
    constexpr int kComputeCapabilityMajor = 75, kComputeCapabilityMinor = 76;
    if (init == nullptr || device_get == nullptr || attribute == nullptr || init(0) != 0 ||
        device_get(&device, 0) != 0 || attribute(&major, kComputeCapabilityMajor, device) != 0 ||
        attribute(&minor, kComputeCapabilityMinor, device) != 0) {
      return fallback;
    }
    // The newest arch this NVRTC supports that the GPU can run (same major, not newer).
    int want = major * 10 + minor, best = 0;
    for (absl::string_view name : absl::StrSplit(NvrtcSupportedArchs(), ' ', absl::SkipEmpty())) {
      int value = 0;
      if (absl::ConsumePrefix(&name, "sm_") && absl::SimpleAtoi(name, &value) &&
          value / 10 == major && value <= want && value > best) {
        best = value;
      }
    }
    return best > 0 ? absl::StrCat("sm_", best) : fallback;
  }();
  return arch;
}

absl::StatusOr<std::string> FindCudaIncludeDir(const std::string& configured) {
  if (!configured.empty()) {
    if (HasCudaHeaders(configured)) return configured;
    return absl::FailedPreconditionError(
        absl::StrCat("the CUDA include directory '", configured,
                     "' has no cuda_fp16.h/cuda_bf16.h; point it at the include/ of a CUDA "
                     "13 toolkit or of the nvidia-cuda-nvrtc pip package"));
  }
  std::vector<std::string> candidates;
  for (const char* var : {"KFORGE_CUDA_INCLUDE_DIR", "CUDA_HOME", "CUDA_PATH"}) {
    const char* value = std::getenv(var);
    if (value == nullptr || *value == '\0') continue;
    candidates.push_back(std::string(var) == "KFORGE_CUDA_INCLUDE_DIR"
                             ? std::string(value)
                             : absl::StrCat(value, "/include"));
  }
  candidates.push_back(IncludeDirBesideNvrtc());
  candidates.push_back("/usr/local/cuda/include");
  for (const std::string& dir : candidates) {
    if (HasCudaHeaders(dir)) return dir;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot find the CUDA headers (cuda_fp16.h, cuda_bf16.h) that candidate kernels include; "
      "looked in: ",
      absl::StrJoin(candidates, ", "),
      ". Set --cuda-include-dir (or KFORGE_CUDA_INCLUDE_DIR / CUDA_HOME)"));
}

absl::StatusOr<std::unique_ptr<Compiler>> Compiler::Create(CompilerOptions options, Store* cache) {
  std::string child = options.child_path;
  if (child.empty()) {
    std::error_code ec;
    fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot read /proc/self/exe to find kforge-nvrtc: ", ec.message(),
                       "; pass the child path explicitly"));
    }
    child = (self.parent_path() / "kforge-nvrtc").string();
  }
  if (access(child.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the NVRTC compiler process '", child, "' is missing or not executable (",
                     std::strerror(errno), "); it is built and installed beside kforge"));
  }
  auto include_dir = FindCudaIncludeDir(options.cuda_include_dir);
  if (!include_dir.ok()) return include_dir.status();
  if (options.time_limit <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the compile time limit must be positive");
  }
  std::unique_ptr<Compiler> compiler(new Compiler(std::move(options), cache));
  compiler->child_path_ = std::move(child);
  compiler->cuda_include_dir_ = *std::move(include_dir);
  compiler->compiler_version_ = NvrtcVersionString();
  compiler->supported_archs_ = NvrtcSupportedArchs();
  return compiler;
}

v1::CompileOptions Compiler::Normalize(const v1::CompileOptions& options) const {
  v1::CompileOptions normalized = options;
  if (normalized.arch().empty()) normalized.set_arch(options_.default_arch);
  return normalized;
}

namespace {

// Length-prefixed fields, so no two different inputs concatenate to the same bytes.
class KeyHasher {
 public:
  void Field(std::string_view name, std::string_view value) {
    hasher_.Update(name);
    hasher_.Update(absl::StrCat(":", value.size(), ":"));
    hasher_.Update(value);
  }
  std::string Finish() { return hasher_.Finish(); }

 private:
  Sha256Hasher hasher_;
};

}  // namespace

std::string Compiler::CacheKey(const v1::Candidate& candidate,
                               const v1::CompileOptions& options) const {
  return CandidateKey(candidate.launch_plan_json(), SourceCacheKey(candidate.source(), options));
}

std::string Compiler::CandidateKey(const std::string& plan_json, const std::string& source_key) {
  KeyHasher key;
  key.Field("schema", "kforge-compile-1");
  auto plan = LaunchPlan::Parse(plan_json);
  key.Field("plan", plan.ok() ? plan->canonical_json() : plan_json);
  key.Field("source", source_key);
  return absl::StrCat("compile/", key.Finish());
}

std::string Compiler::SourceCacheKey(const std::string& source,
                                     const v1::CompileOptions& options) const {
  const v1::CompileOptions normalized = Normalize(options);
  KeyHasher key;
  key.Field("schema", "kforge-compile-source-1");
  key.Field("source", CanonicalSource(source));
  key.Field("abi", KforgeDeviceHeader());
  key.Field("compiler", compiler_version_);
  key.Field("arch", normalized.arch());
  key.Field("fast_math", normalized.fast_math() ? "1" : "0");
  key.Field("max_registers", std::to_string(normalized.max_registers()));
  for (const std::string& flag : normalized.extra_flags()) key.Field("flag", flag);
  return absl::StrCat("compile-source/", key.Finish());
}

v1::CompileResult Compiler::Compile(const v1::Candidate& candidate,
                                    const v1::CompileOptions& options) {
  const absl::Time start = absl::Now();
  const v1::CompileOptions normalized = Normalize(options);
  // The source's key is part of the candidate's, and keys NVRTC's output on a miss: hashed once.
  const std::string source_key = SourceCacheKey(candidate.source(), normalized);
  const std::string key = CandidateKey(candidate.launch_plan_json(), source_key);
  if (std::optional<v1::CompileResult> cached = CachedResult(key)) {
    // A hit's duration is the lookup's.
    cached->set_duration_s(absl::ToDoubleSeconds(absl::Now() - start));
    return *std::move(cached);
  }
  v1::CompileResult result = CompileUncached(candidate, normalized, source_key);
  result.set_cache_key(key);
  result.set_duration_s(absl::ToDoubleSeconds(absl::Now() - start));
  StoreResult(key, result);
  return result;
}

v1::CompileResult Compiler::CompileUncached(const v1::Candidate& candidate,
                                            const v1::CompileOptions& options,
                                            const std::string& source_key) {
  if (absl::Status status = CheckCompileOptions(options); !status.ok()) {
    return Refused(options, compiler_version_, status.message());
  }
  std::string base_arch = options.arch();
  if (base_arch.back() == 'a' || base_arch.back() == 'f') base_arch.pop_back();
  std::vector<std::string> supported = absl::StrSplit(supported_archs_, ' ', absl::SkipEmpty());
  if (!supported.empty() &&
      std::find(supported.begin(), supported.end(), base_arch) == supported.end()) {
    return Refused(options, compiler_version_,
                   absl::StrCat("arch ", options.arch(), " is not supported by ", compiler_version_,
                                " (supported: ", supported_archs_, ")"));
  }
  if (absl::Status status = CheckSourcePolicy(candidate.source()); !status.ok()) {
    return Refused(options, compiler_version_, status.message());
  }
  std::optional<LaunchPlan> plan;
  if (!candidate.launch_plan_json().empty()) {
    auto parsed = LaunchPlan::Parse(candidate.launch_plan_json());
    if (!parsed.ok()) return Refused(options, compiler_version_, parsed.status().message());
    plan = *std::move(parsed);
  }

  v1::CompileResult result = CompileSource(candidate.source(), options, source_key);
  if (result.status() == v1::COMPILE_OK && plan) {
    for (const std::string& entry : plan->EntryPoints()) {
      bool mangled = false;
      if (DefinesEntry(result, entry, &mangled)) continue;
      std::string log = result.log();
      v1::CompileResult refused =
          Refused(options, compiler_version_,
                  absl::StrCat("plan names entry ", entry, ", which the source does not define",
                               mangled ? " as extern \"C\" (declare it extern \"C\" __global__)"
                                       : " (entry points are extern \"C\" __global__ functions)"));
      *refused.mutable_kernels() = result.kernels();
      refused.set_log(absl::StrCat(refused.log(), "\n", log));
      return refused;
    }
    if (std::string why = EarlyStartWithoutWait(*plan, result, options.arch()); !why.empty()) {
      v1::CompileResult refused = Refused(options, compiler_version_, why);
      *refused.mutable_kernels() = result.kernels();
      return refused;
    }
  }
  return result;
}

v1::CompileResult Compiler::CompileSource(const std::string& source,
                                          const v1::CompileOptions& options,
                                          const std::string& source_key) {
  if (std::optional<v1::CompileResult> cached = CachedResult(source_key)) {
    return *std::move(cached);
  }
  v1::CompileResult result = RunChild(CanonicalSource(source), options);
  StoreResult(source_key, result);
  return result;
}

v1::CompileResult Compiler::RunChild(const std::string& source, const v1::CompileOptions& options) {
  v1::CompileResult result;
  result.set_arch(options.arch());
  result.set_compiler_version(compiler_version_);
  auto fail = [&result](v1::CompileStatus status, std::string log) {
    result.set_status(status);
    result.set_log(std::move(log));
    return result;
  };

  v1::CompileRequest request;
  request.mutable_candidate()->set_source(source);
  *request.mutable_options() = options;
  std::string input;
  request.SerializeToString(&input);

  // An empty private working directory: NVRTC resolves quoted includes against it, and a
  // candidate must not read the worker's files.
  std::string dir_template = (fs::temp_directory_path() / "kforge-nvrtc-XXXXXX").string();
  if (mkdtemp(dir_template.data()) == nullptr) {
    return fail(v1::COMPILE_RESOURCE_LIMIT,
                absl::StrCat("cannot create a working directory for the compiler process: ",
                             std::strerror(errno)));
  }
  const int64_t cpu_seconds =
      static_cast<int64_t>(std::ceil(absl::ToDoubleSeconds(options_.time_limit))) + 1;
  std::vector<std::string> argv = {child_path_,
                                   "--cuda-include-dir",
                                   cuda_include_dir_,
                                   "--memory-limit-bytes",
                                   std::to_string(options_.memory_limit_bytes),
                                   "--cpu-limit-seconds",
                                   std::to_string(cpu_seconds)};
  SubprocessOptions run_options;
  run_options.time_limit = options_.time_limit;
  run_options.working_dir = dir_template;
  auto run = RunSubprocess(argv, input, run_options);
  std::error_code ec;
  fs::remove_all(dir_template, ec);
  if (!run.ok()) {
    return fail(v1::COMPILE_RESOURCE_LIMIT,
                absl::StrCat("could not run the compiler process: ", run.status().message()));
  }
  const std::string stderr_excerpt = Excerpt(run->stderr_data);
  const std::string stderr_note =
      stderr_excerpt.empty() ? ""
                             : absl::StrCat("\nstderr of the compiler process:\n", stderr_excerpt);
  if (run->timed_out) {
    return fail(v1::COMPILE_TIMEOUT,
                absl::StrCat("compilation took longer than the limit of ",
                             absl::FormatDuration(options_.time_limit),
                             " and was stopped; simplify the kernel (deep template recursion, "
                             "huge unrolled loops)",
                             stderr_note));
  }
  if (run->term_signal == SIGXCPU) {
    return fail(v1::COMPILE_TIMEOUT, absl::StrCat("compilation used more than ", cpu_seconds,
                                                  " s of CPU time and was stopped", stderr_note));
  }
  if (run->stdout_overflow) {
    return fail(v1::COMPILE_RESOURCE_LIMIT,
                "the compiler process produced an oversized result and was stopped");
  }
  if (run->term_signal != 0) {
    return fail(
        v1::COMPILE_RESOURCE_LIMIT,
        absl::StrCat("the compiler process died of signal ", run->term_signal, " (",
                     strsignal(run->term_signal), "): it crashed or exceeded its memory limit of ",
                     options_.memory_limit_bytes >> 20, " MiB", stderr_note));
  }
  if (run->exit_code != 0) {
    return fail(
        v1::COMPILE_RESOURCE_LIMIT,
        absl::StrCat("the compiler process exited with code ", run->exit_code, " (memory limit of ",
                     options_.memory_limit_bytes >> 20, " MiB)", stderr_note));
  }
  v1::CompileResult child_result;
  if (!child_result.ParseFromString(run->stdout_data)) {
    return fail(v1::COMPILE_RESOURCE_LIMIT,
                absl::StrCat("the compiler process returned an unreadable result", stderr_note));
  }
  if (child_result.status() == v1::COMPILE_RESOURCE_LIMIT) {
    child_result.set_log(absl::StrCat(child_result.log(),
                                      "\n(the compiler process runs with a memory limit of ",
                                      options_.memory_limit_bytes >> 20, " MiB)"));
  }
  return child_result;
}

std::optional<v1::CompileResult> Compiler::CachedResult(const std::string& key) const {
  if (cache_ == nullptr) return std::nullopt;
  auto cached = cache_->Get(key);
  if (!cached.ok()) {
    spdlog::warn("compile cache {}: lookup of {} failed ({}); compiling without it",
                 cache_->Describe(), key, cached.status().ToString());
    return std::nullopt;
  }
  if (!cached->has_value()) return std::nullopt;
  v1::CompileResult result;
  if (!result.ParseFromString(**cached)) {
    spdlog::warn("compile cache {}: entry {} is unreadable; compiling again", cache_->Describe(),
                 key);
    return std::nullopt;
  }
  result.set_cache_hit(true);
  return result;
}

void Compiler::StoreResult(const std::string& key, const v1::CompileResult& result) {
  if (cache_ == nullptr) return;
  PutOptions put;
  switch (result.status()) {
    case v1::COMPILE_OK:
      break;
    case v1::COMPILE_FAILED:
    case v1::COMPILE_REFUSED:
      put.ttl =
          std::chrono::seconds(std::max<int64_t>(1, absl::ToInt64Seconds(options_.failure_ttl)));
      break;
    default:  // timeouts and resource limits depend on the machine's load: retry next time
      return;
  }
  std::string value;
  if (!result.SerializeToString(&value)) return;
  if (absl::Status status = cache_->Put(key, value, put); !status.ok()) {
    spdlog::warn("compile cache {}: storing {} failed ({}); continuing", cache_->Describe(), key,
                 status.ToString());
  }
}

}  // namespace kforge
