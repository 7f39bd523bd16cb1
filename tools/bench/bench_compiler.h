// The compile cache and compiler the synthesizer benchmarks share (kforge-synth-sweep,
// kforge-bench-search).
#pragma once

#include <memory>
#include <string>

#include "common/store.h"
#include "services/worker/compiler.h"

namespace kforge::bench {

struct BenchCompiler {
  std::unique_ptr<Store> store;  // dir:<cache_dir>
  std::unique_ptr<Compiler> compiler;
};

// Opens dir:`cache_dir` and a compiler (120 s per compile) that caches its cubins there when
// `cache_compiles`. On failure prints why and sets `exit_code` (2: the --cache directory,
// 3: no compiler) and returns nullptr.
std::unique_ptr<BenchCompiler> OpenBenchCompiler(const std::string& cache_dir,
                                                 bool cache_compiles, int* exit_code);

}  // namespace kforge::bench
