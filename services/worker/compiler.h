// Compiler: turns a candidate (device code + launch plan) into a cubin, PTX and a per-kernel
// resource report with NVRTC, in a kforge-nvrtc child process under time and memory limits,
// behind the content-addressed compile cache. Failures are data in the CompileResult.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/store.h"
#include "kforge/v1/common.pb.h"

namespace kforge {

struct CompilerOptions {
  // Used when a request leaves CompileOptions.arch empty (see DefaultArch()).
  std::string default_arch = "sm_90";
  // Wall time of one compile; the child is killed after it (COMPILE_TIMEOUT). Its CPU time
  // is capped at the same number of seconds (rounded up).
  absl::Duration time_limit = absl::Seconds(60);
  // Address-space limit of the child (RLIMIT_AS); 0: none.
  int64_t memory_limit_bytes = 8LL << 30;
  // The kforge-nvrtc executable; empty: beside the running executable (/proc/self/exe).
  std::string child_path;
  // Directory holding cuda_fp16.h and cuda_bf16.h; empty: $KFORGE_CUDA_INCLUDE_DIR,
  // $CUDA_HOME/include, $CUDA_PATH/include, the include/ beside libnvrtc (pip packages:
  // nvidia/cu13/include), /usr/local/cuda/include.
  std::string cuda_include_dir;
  // How long COMPILE_FAILED / COMPILE_REFUSED results stay cached.
  absl::Duration failure_ttl = absl::Minutes(10);
};

// The local GPU's arch ("sm_90") when libcuda can be loaded and a device answers, clamped to
// what this NVRTC supports; otherwise "sm_90". Never requires libcuda.
std::string DefaultArch();

// The CUDA include directory as CompilerOptions::cuda_include_dir describes, or
// FailedPrecondition naming every place looked at.
absl::StatusOr<std::string> FindCudaIncludeDir(const std::string& configured);

class Compiler {
 public:
  // Fails when the child executable or the CUDA headers cannot be found. `cache` may be null
  // (no caching); it must outlive the Compiler.
  static absl::StatusOr<std::unique_ptr<Compiler>> Create(CompilerOptions options, Store* cache);

  // Thread-safe. Statuses: OK; FAILED (the log says why); REFUSED (policy: oversized or
  // non-UTF-8 source, dynamic parallelism, rdc, a disallowed flag, a launch plan that does not
  // parse or names an entry the source does not define); TIMEOUT; RESOURCE_LIMIT (memory
  // limit or a crash of the compiler process, with its stderr). For non-OK results the log
  // holds the explanation. cache_hit says whether NVRTC's output came from the cache (this
  // candidate's entry, or that of another with the same source).
  v1::CompileResult Compile(const v1::Candidate& candidate, const v1::CompileOptions& options);

  // "compile/<sha256 hex>" over canonical source, canonical launch plan, the ABI header,
  // compiler version and normalized options (the arch filled in).
  std::string CacheKey(const v1::Candidate& candidate, const v1::CompileOptions& options) const;
  // "compile-source/<sha256 hex>": the same without the plan. NVRTC's output is cached under it
  // too, so candidates that differ only in their launch plan (a synthesizer config's grid
  // sizing) compile once; each still gets its own plan checks.
  std::string SourceCacheKey(const std::string& source, const v1::CompileOptions& options) const;

  const std::string& compiler_version() const { return compiler_version_; }
  const std::string& cuda_include_dir() const { return cuda_include_dir_; }
  const std::string& child_path() const { return child_path_; }
  const CompilerOptions& options() const { return options_; }

 private:
  Compiler(CompilerOptions options, Store* cache) : options_(std::move(options)), cache_(cache) {}

  v1::CompileOptions Normalize(const v1::CompileOptions& options) const;
  // CacheKey from the plan and the source's key.
  static std::string CandidateKey(const std::string& plan_json, const std::string& source_key);
  v1::CompileResult CompileUncached(const v1::Candidate& candidate,
                                    const v1::CompileOptions& options,
                                    const std::string& source_key);
  // RunChild behind the source-level cache entry (`source_key`: SourceCacheKey of the source).
  v1::CompileResult CompileSource(const std::string& source, const v1::CompileOptions& options,
                                  const std::string& source_key);
  v1::CompileResult RunChild(const std::string& source, const v1::CompileOptions& options);
  // The cache's entry for `key`, marked cache_hit; nullopt on a miss (a cache error or an
  // unreadable entry is logged and counts as a miss).
  std::optional<v1::CompileResult> CachedResult(const std::string& key) const;
  void StoreResult(const std::string& key, const v1::CompileResult& result);

  CompilerOptions options_;
  Store* cache_;
  std::string child_path_;
  std::string cuda_include_dir_;
  std::string compiler_version_;
  std::string supported_archs_;
};

}  // namespace kforge
