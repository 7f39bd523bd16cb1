// OpenBenchCompiler (see bench_compiler.h).
#include "tools/bench/bench_compiler.h"

#include <cstdio>

namespace kforge::bench {

std::unique_ptr<BenchCompiler> OpenBenchCompiler(const std::string& cache_dir,
                                                 bool cache_compiles, int* exit_code) {
  auto out = std::make_unique<BenchCompiler>();
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore("dir:" + cache_dir);
  if (!store.ok()) {
    std::fprintf(stderr, "--cache %s: %s\n", cache_dir.c_str(),
                 std::string(store.status().message()).c_str());
    *exit_code = 2;
    return nullptr;
  }
  out->store = *std::move(store);
  CompilerOptions options;
  options.time_limit = absl::Seconds(120);
  absl::StatusOr<std::unique_ptr<Compiler>> compiler =
      Compiler::Create(options, cache_compiles ? out->store.get() : nullptr);
  if (!compiler.ok()) {
    std::fprintf(stderr, "cannot compile: %s\n", std::string(compiler.status().message()).c_str());
    *exit_code = 3;
    return nullptr;
  }
  out->compiler = *std::move(compiler);
  return out;
}

}  // namespace kforge::bench
