// Exporter: `kforge export RUN_DIR --out OUT` as a library call. Reads the run directory of
// `kforge optimize` (run.json, report.json, kernels/<target id>/), keeps per target the winner
// that passed validation, passed re-confirmation in a fresh process and beat eager, compiles
// its cubins (and PTX) with the Compiler for each requested arch, rewrites the model's
// TorchScript graph for guarded dispatch and writes the bundle (docs/guarded-dispatch.md):
//   OUT/model.pt  OUT/manifest.json  OUT/kernels/*.cu|*.cubin|*.ptx  OUT/README.md
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "services/worker/compiler.h"

namespace kforge {

struct ExportOptions {
  std::string run_dir;
  std::string out_dir;
  // GPU architectures to compile cubins for ("sm_90"); empty: each kernel's validated arch.
  // Cubins of other archs are compiled, not validated there; the manifest says which is which.
  std::vector<std::string> archs;
  std::string model_path;  // empty: the model run.json names (its sha256 must still match)
  bool force = false;      // replace an existing bundle in out_dir
  CompilerOptions compiler;
};

struct ExportedKernel {
  std::string kernel_id;
  std::string target_id;
  std::string op;
  std::string signature;
  double speedup = 0;
  int nodes = 0;  // graph nodes that call it
  std::vector<std::string> archs;
};


struct ExportSkip {
  std::string target_id;
  std::string op;
  std::string reason;
};

struct ExportResult {
  std::string out_dir;  // absolute
  std::string bundle_id;
  std::string runtime_library;  // the libkforge_runtime.so to load, absolute
  int nodes_rewritten = 0;
  std::vector<ExportedKernel> kernels;
  std::vector<ExportSkip> skipped;
  std::vector<std::string> notes;
};

// Errors: InvalidArgument / NotFound for a bad run directory, model or --out; FailedPrecondition
// when the run validated nothing (a run without a GPU) or no node of the graph matches any
// winner — there is then nothing to export; others as they come.
absl::StatusOr<ExportResult> ExportBundle(const ExportOptions& options);

nlohmann::json ExportResultToJson(const ExportResult& result);
std::string FormatExportSummary(const ExportResult& result);

}  // namespace kforge
