// BundleManifest: manifest.json of a kforge bundle (format "kforge-bundle/5", described in
// docs/guarded-dispatch.md) — what each exported kernel computes, the guards under which it
// was proven, how to launch it and the checksums of its files. One implementation, used by the
// exporter (write) and the runtime library (read and verify). No torch, no protobuf.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace kforge {

// What export writes. /2: kernels read KfArgs::shape_key, which a /1 runtime does not set;
// /3: and KfArgs::data, which a /2 runtime does not set; /4: plans may name captured entries
// (KfCapturedArgs), which a /3 runtime does not know; /5: captured entries may read the
// scratch (KfCapturedArgs' data[KF_SCRATCH_SLOT]), which a /4 runtime does not pass.
inline constexpr char kBundleFormat[] = "kforge-bundle/5";
// What the runtime reads besides: older bundles' kernels take a prefix of today's KfArgs.
inline constexpr const char* kOlderBundleFormats[] = {"kforge-bundle/1", "kforge-bundle/2",
                                                      "kforge-bundle/3", "kforge-bundle/4"};
inline constexpr char kBundleManifestFile[] = "manifest.json";

// A file of the bundle: its path relative to the bundle directory and its sha256.
struct BundleFile {
  std::string path;
  std::string sha256;
};

// What a kernel assumes of one input; every field is a guard the runtime checks per call.
struct TensorGuard {
  std::string dtype;              // "float32", "float16", ... (kforge_device.h names)
  std::vector<int64_t> sizes;     // exact sizes the kernel was validated on
  std::vector<int64_t> strides;   // validated strides (elements); dims of size 1 are free
  bool contiguous = false;        // the launch plan requires contiguity
  int64_t alignment_bytes = 16;   // data pointer alignment the kernel may assume
};

// An output the runtime allocates (from the caching allocator) before the launch, or, for an
// in-place op (`relu_`, `add_`), the input the kernel writes it into.
struct OutputSpec {
  std::string dtype;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int aliases_input = -1;  // that input's index; written to the manifest only when >= 0
};

// A compiled form of the kernel for one GPU architecture.
struct KernelBinary {
  std::string arch;  // "sm_90"
  BundleFile cubin;
  BundleFile ptx;     // the PTX NVRTC produced with it (kept for inspection; never JIT'ed)
  bool validated = false;  // the arch the search validated and timed the kernel on
};

// One node of a chain kernel's subgraph.
struct BundleNode {
  std::string op;        // "aten::mul"
  std::string overload;  // "Tensor"
  std::string schema;
  nlohmann::json constants = nlohmann::json::object();
};

struct BundleKernel {
  std::string id;         // unique in the bundle: "<op>_<target id prefix>"
  std::string target_id;  // the optimize run's target
  // "aten::softmax"; for a chain of nodes computed as one, "aten::mul -> aten::add -> ..."
  // (with `chain` describing each node, and overload, schema and constants empty).
  std::string op;
  std::string overload;   // "int"
  std::string schema;     // the full aten schema
  std::string signature;  // human-readable target signature
  nlohmann::json constants = nlohmann::json::object();  // the node's constant arguments
  std::vector<BundleNode> chain;  // written only for a chain
  // Guards (device type CUDA, arch through `binaries`, no grad).
  std::vector<TensorGuard> inputs;
  std::vector<OutputSpec> outputs;
  // The kernel ABI's scalar arguments (kforge_device.h), in schema order.
  std::vector<int64_t> int_args;
  std::vector<double> float_args;
  std::string launch_plan_json;
  std::vector<KernelBinary> binaries;
  BundleFile source;  // kernel.cu, for the record
  // Provenance: what the search measured (fresh-process re-confirmation).
  std::string candidate_id;
  std::string gpu_name;
  double eager_s = 0;
  double kernel_s = 0;
  double speedup = 0;
};

struct BundleManifest {
  std::string format = kBundleFormat;
  std::string created_by;    // "kforge 0.1.0 export"
  std::string source_run;    // the optimize run directory, absolute
  std::string model_sha256;  // of the original TorchScript model
  std::vector<BundleKernel> kernels;
  std::vector<std::string> notes;
};

// KF_FLOAT32... for a dtype name; 0 for an unknown one. And back ("" for unknown).
int KfDtypeFromName(std::string_view name);
std::string KfDtypeName(int kf_dtype);

// The manifest as JSON text: deterministic (sorted keys, 2-space indent), so its sha256 —
// the bundle id — depends only on the content.
std::string ManifestToJson(const BundleManifest& manifest);

// Parses and validates; errors are InvalidArgument and start with `where` (the file).
absl::StatusOr<BundleManifest> ParseManifest(std::string_view json, const std::string& where);

// Structure and limits: the format, unique kernel ids, known dtypes, at most KF_MAX_* inputs /
// outputs / scalars / dims, sizes >= 0, strides per dim, a power-of-two alignment, a launch
// plan that parses, "sm_<digits>" archs, relative file paths inside the bundle, 64-hex sha256s.
absl::Status ValidateManifest(const BundleManifest& manifest, const std::string& where);

// A bundle read from disk: manifest.json parsed and validated, its id (the sha256 of the
// manifest's bytes) and every file it lists checked against its sha256.
struct LoadedBundleManifest {
  std::filesystem::path dir;  // absolute
  std::string id;
  BundleManifest manifest;
  // Every listed file's bytes as verified (path relative to the bundle -> bytes): what is
  // loaded is what was checked, even if the directory changes afterwards.
  std::map<std::string, std::string> files;
};

// NotFound when `dir` has no manifest.json; DataLoss naming the file (relative to the bundle
// and absolute) when a file is missing or its checksum differs — a changed bundle is never
// used, and never silently skipped.
absl::StatusOr<LoadedBundleManifest> ReadBundleManifest(const std::filesystem::path& dir);

}  // namespace kforge
