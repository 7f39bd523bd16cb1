// libkforge_runtime.so: the kforge:: operators an exported model calls (guarded dispatch,
// docs/guarded-dispatch.md). kforge::run checks each listed kernel's guards against the call's
// tensors and launches the first kernel whose guards hold on the current CUDA stream through
// the driver API, or returns an empty list — the graph then runs the original aten node — and
// counts why.
#include <cuda.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/Dict.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/cuda_driver.h"
#include "common/kernel_launch.h"
#include "common/launch_plan.h"
#include "common/sha256.h"
#include "kforge/runtime.h"
#include "runtime/bundle_manifest.h"
#include "runtime/guards.h"

namespace kforge::runtime {
namespace {

const bool kDisabled = [] {
  const char* v = std::getenv("KFORGE_DISABLE");
  return v != nullptr && std::strcmp(v, "") != 0 && std::strcmp(v, "0") != 0;
}();

// ---- Counters -------------------------------------------------------------------------

class Counters {
 public:
  void Fallback(const std::vector<std::string>& kernel_ids,
                const std::vector<FallbackReason>& reasons) {
    std::lock_guard<std::mutex> lock(mu_);
    ++fallbacks_[std::string(ReasonName(reasons.empty() ? FallbackReason::kSignature : reasons[0]))];
    for (size_t i = 0; i < kernel_ids.size() && i < reasons.size(); ++i) {
      ++fallbacks_[absl::StrCat(kernel_ids[i], ":", std::string(ReasonName(reasons[i])))];
    }
  }
  void Launch(const std::string& kernel_id) {
    std::lock_guard<std::mutex> lock(mu_);
    ++launches_[kernel_id];
  }
  std::map<std::string, int64_t> fallbacks() {
    std::lock_guard<std::mutex> lock(mu_);
    return fallbacks_;
  }
  std::map<std::string, int64_t> launches() {
    std::lock_guard<std::mutex> lock(mu_);
    return launches_;
  }
  void Reset() {
    std::lock_guard<std::mutex> lock(mu_);
    fallbacks_.clear();
    launches_.clear();
  }

 private:
  std::mutex mu_;
  std::map<std::string, int64_t> fallbacks_;
  std::map<std::string, int64_t> launches_;
};

Counters& counters() {
  static Counters* c = new Counters();
  return *c;
}

// ---- Devices --------------------------------------------------------------------------

struct DeviceInfo {
  int major = 0;
  int minor = 0;
  int sm_count = 0;
  int shared_optin = 0;
  CUcontext primary = nullptr;
  std::string error;  // non-empty: the device could not be queried
};

const DeviceInfo& InfoFor(const CudaDriver& driver, int index) {
  static std::mutex mu;
  static std::map<int, DeviceInfo>* infos = new std::map<int, DeviceInfo>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = infos->find(index);
  if (it != infos->end()) return it->second;
  DeviceInfo info;
  CUdevice device = 0;
  CUresult r = driver.device_get(&device, index);
  if (r == CUDA_SUCCESS) {
    r = driver.device_get_attribute(&info.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  }
  if (r == CUDA_SUCCESS) {
    r = driver.device_get_attribute(&info.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  }
  if (r == CUDA_SUCCESS) {
    r = driver.device_get_attribute(&info.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
  }
  if (r == CUDA_SUCCESS) {
    r = driver.device_get_attribute(&info.shared_optin,
                                    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device);
  }
  // LibTorch works in each device's primary context; the modules live there too.
  if (r == CUDA_SUCCESS) r = driver.primary_ctx_retain(&info.primary, device);
  if (r != CUDA_SUCCESS) info.error = absl::StrCat("GPU ", index, ": ", driver.Describe(r));
  return infos->emplace(index, info).first->second;
}

// ---- Bundles --------------------------------------------------------------------------

// A kernel's module in one CUDA context, with its launch plan resolved once: the guards fix
// every shape, so the plan's grid, block, shared memory and scratch size are fixed too.
struct LoadedModule {
  FallbackReason failure = FallbackReason::kNone;
  CUmodule module = nullptr;
  KernelFunctions functions;
  ResolvedPlan plan;
};

struct KernelState {
  const BundleKernel* spec = nullptr;
  std::optional<LaunchPlan> plan;
  int kf_dtype_in[KF_MAX_INPUTS] = {};
  std::map<CUcontext, LoadedModule> modules;  // guarded by Bundle::mu
  std::atomic<bool> warned{false};
};

struct Bundle {
  LoadedBundleManifest loaded;
  std::map<std::string, std::unique_ptr<KernelState>> kernels;
  std::mutex mu;
};

absl::StatusOr<std::shared_ptr<Bundle>> MakeBundle(LoadedBundleManifest loaded) {
  auto bundle = std::make_shared<Bundle>();
  bundle->loaded = std::move(loaded);
  for (const BundleKernel& k : bundle->loaded.manifest.kernels) {
    auto state = std::make_unique<KernelState>();
    state->spec = &k;
    absl::StatusOr<LaunchPlan> plan = LaunchPlan::Parse(k.launch_plan_json);
    if (!plan.ok()) return plan.status();  // ValidateManifest parsed it already
    state->plan.emplace(*std::move(plan));
    bundle->kernels.emplace(k.id, std::move(state));
  }
  return bundle;
}

// Manifest text's sha256 without verifying the rest: to find which directory holds a bundle.
std::string ManifestIdOf(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path manifest = std::filesystem::path(dir) / kBundleManifestFile;
  if (!std::filesystem::is_regular_file(manifest, ec)) return "";
  std::FILE* f = std::fopen(manifest.c_str(), "rb");
  if (f == nullptr) return "";
  std::string text;
  char buffer[65536];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), f)) > 0;) text.append(buffer, n);
  std::fclose(f);
  return Sha256Hex(text);
}

class Registry {
 public:
  std::string Load(const std::string& dir) {
    absl::StatusOr<LoadedBundleManifest> loaded = ReadBundleManifest(dir);
    TORCH_CHECK(loaded.ok(), "kforge: ", std::string(loaded.status().message()));
    absl::StatusOr<std::shared_ptr<Bundle>> bundle = MakeBundle(*std::move(loaded));
    TORCH_CHECK(bundle.ok(), "kforge: ", std::string(bundle.status().message()));
    std::string id = (*bundle)->loaded.id;
    std::lock_guard<std::mutex> lock(mu_);
    by_id_[id] = *std::move(bundle);
    return id;
  }

  // The bundle `id`: one already loaded, else the first of KFORGE_BUNDLE_DIR's directories
  // (':'-separated) and the export-time path `hint` whose manifest has that id.
  std::shared_ptr<Bundle> Resolve(const std::string& id, const std::string& hint) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = by_id_.find(id);
      if (it != by_id_.end()) return it->second;
    }
    std::vector<std::string> dirs;
    if (const char* env = std::getenv("KFORGE_BUNDLE_DIR"); env != nullptr && *env) {
      for (absl::string_view d : absl::StrSplit(env, ':', absl::SkipEmpty())) dirs.emplace_back(d);
    }
    dirs.push_back(hint);
    std::vector<std::string> looked;
    for (const std::string& dir : dirs) {
      std::string found = ManifestIdOf(dir);
      if (found == id) {
        Load(dir);  // verifies every checksum; a mismatch throws, naming the file
        std::lock_guard<std::mutex> lock(mu_);
        auto it = by_id_.find(id);
        if (it != by_id_.end()) return it->second;
      }
      looked.push_back(found.empty()
                           ? absl::StrCat(dir, " (no ", kBundleManifestFile, ")")
                           : absl::StrCat(dir, " (holds bundle ", found.substr(0, 12),
                                          ": its manifest.json differs from the one exported "
                                          "with this model)"));
    }
    std::vector<std::string> loaded;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [other, bundle] : by_id_) {
        loaded.push_back(absl::StrCat(other.substr(0, 12), " from ", bundle->loaded.dir.string()));
      }
    }
    TORCH_CHECK(false, "kforge: the model needs kernel bundle ", id.substr(0, 12),
                " (exported to ", hint, ") and it is not found: looked in ",
                absl::StrJoin(looked, "; "),
                loaded.empty() ? "" : absl::StrCat("; loaded bundles: ", absl::StrJoin(loaded, ", ")),
                ". Set KFORGE_BUNDLE_DIR to the bundle directory (the one holding model.pt and "
                "manifest.json) or call torch.ops.kforge.load_bundle(dir) / "
                "kforge::runtime::LoadBundle(dir) before running the model");
    return nullptr;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Bundle>> by_id_;
};

Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

void WarnOnce(KernelState& k, const std::string& message) {
  if (!k.warned.exchange(true)) {
    TORCH_WARN("kforge: kernel ", k.spec->id, " falls back to PyTorch: ", message);
  }
}

// Loads the kernel's module in the current context (once) and resolves its plan.
LoadedModule* ModuleFor(Bundle& bundle, KernelState& k, const CudaDriver& driver,
                        const DeviceInfo& device, const KernelBinary& binary, CUcontext context,
                        CUstream stream, FallbackReason* reason) {
  std::lock_guard<std::mutex> lock(bundle.mu);
  auto it = k.modules.find(context);
  if (it != k.modules.end()) return &it->second;
  // Loading a module is not a stream operation and may not happen during capture: the first
  // call must come before (PyTorch's CUDA-graph recipe warms up eagerly anyway).
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (driver.stream_is_capturing(stream, &capture) != CUDA_SUCCESS ||
      capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    *reason = FallbackReason::kNotLoadedInCapture;
    return nullptr;
  }
  LoadedModule& m = k.modules[context];
  auto fail = [&](const std::string& message) {
    m.failure = FallbackReason::kLoadError;
    WarnOnce(k, message);
    return &m;
  };
  const std::string& cubin = bundle.loaded.files.at(binary.cubin.path);
  CUresult r = driver.module_load_data(&m.module, cubin.data());
  if (r != CUDA_SUCCESS) {
    m.module = nullptr;
    return fail(absl::StrCat("the driver cannot load ", binary.cubin.path, " (", binary.arch,
                             ") on a GPU of compute capability ", device.major, ".",
                             device.minor, ": ", driver.Describe(r)));
  }
  absl::StatusOr<KernelFunctions> functions =
      GetKernelFunctions(driver, m.module, k.plan->EntryPoints());
  if (!functions.ok()) return fail(std::string(functions.status().message()));
  m.functions = *std::move(functions);
  std::vector<TensorShape> ins, outs;
  for (const TensorGuard& g : k.spec->inputs) ins.push_back({g.sizes, g.strides});
  for (const OutputSpec& o : k.spec->outputs) outs.push_back({o.sizes, o.strides});
  absl::StatusOr<ResolvedPlan> plan =
      k.plan->Resolve(BindShapeSymbols(ins, outs, k.spec->int_args, device.sm_count));
  if (!plan.ok()) return fail(absl::StrCat("the launch plan does not resolve: ", plan.status().message()));
  if (absl::Status s = PrepareKernelFunctions(driver, *plan, m.functions, device.shared_optin);
      !s.ok()) {
    return fail(std::string(s.message()));
  }
  m.plan = *std::move(plan);
  return &m;
}

// Runs kernel `k` on `inputs` (its guards hold); kNone and `outputs` on success.
FallbackReason Launch(Bundle& bundle, KernelState& k, c10::ArrayRef<at::Tensor> inputs,
                      std::vector<at::Tensor>* outputs) {
  absl::StatusOr<const CudaDriver*> driver = CudaDriver::Get();
  if (!driver.ok()) {
    WarnOnce(k, std::string(driver.status().message()));
    return FallbackReason::kLoadError;
  }
  const c10::Device device = inputs[0].device();
  c10::cuda::CUDAGuard device_guard(device);
  const DeviceInfo& info = InfoFor(**driver, device.index());
  if (!info.error.empty()) {
    WarnOnce(k, info.error);
    return FallbackReason::kLoadError;
  }
  const KernelBinary* binary = BinaryForDevice(*k.spec, info.major, info.minor);
  if (binary == nullptr) return FallbackReason::kArchMissing;
  CUcontext context = nullptr;
  (*driver)->ctx_get_current(&context);
  if (context == nullptr) {
    (*driver)->ctx_set_current(info.primary);
    context = info.primary;
  }
  const CUstream stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  FallbackReason reason = FallbackReason::kNone;
  LoadedModule* module = ModuleFor(bundle, k, **driver, info, *binary, context, stream, &reason);
  if (module == nullptr) return reason;
  if (module->failure != FallbackReason::kNone) return module->failure;

  // Outputs and scratch from the caching allocator on the current stream: no sync, and
  // CUDA-graph capture takes them from its private pool.
  const at::TensorOptions on_device = at::TensorOptions().device(device);
  KfArgs args;
  std::memset(&args, 0, sizeof(args));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorGuard& g = k.spec->inputs[i];
    args.inputs[i] = MakeKfTensor(const_cast<void*>(inputs[i].const_data_ptr()),
                                  KfDtypeFromName(g.dtype), g.sizes.data(), g.strides.data(),
                                  static_cast<int>(g.sizes.size()));
  }
  outputs->clear();
  for (size_t j = 0; j < k.spec->outputs.size(); ++j) {
    const OutputSpec& o = k.spec->outputs[j];
    const int kf_dtype = KfDtypeFromName(o.dtype);
    at::ScalarType type = inputs[0].scalar_type();
    switch (kf_dtype) {
      case KF_FLOAT32: type = at::kFloat; break;
      case KF_FLOAT16: type = at::kHalf; break;
      case KF_BFLOAT16: type = at::kBFloat16; break;
      case KF_FLOAT64: type = at::kDouble; break;
      case KF_INT64: type = at::kLong; break;
      case KF_INT32: type = at::kInt; break;
      case KF_INT16: type = at::kShort; break;
      case KF_INT8: type = at::kChar; break;
      case KF_UINT8: type = at::kByte; break;
      case KF_BOOL: type = at::kBool; break;
    }
    // In place: the guards proved the input has the output's dtype, sizes and strides.
    at::Tensor out = o.aliases_input >= 0
                         ? inputs[o.aliases_input]
                         : at::empty_strided(o.sizes, o.strides, on_device.dtype(type));
    args.outputs[j] = MakeKfTensor(out.data_ptr(), kf_dtype, o.sizes.data(), o.strides.data(),
                                   static_cast<int>(o.sizes.size()));
    outputs->push_back(std::move(out));
  }
  const int64_t scratch_bytes = module->plan.scratch_bytes;
  at::Tensor scratch;
  if (scratch_bytes > 0) {
    scratch = at::empty({scratch_bytes}, on_device.dtype(at::kByte));
    const int64_t stride = 1;
    args.scratch = MakeKfTensor(scratch.data_ptr(), KF_UINT8, &scratch_bytes, &stride, 1);
  }
  for (size_t i = 0; i < k.spec->int_args.size(); ++i) args.int_args[i] = k.spec->int_args[i];
  for (size_t i = 0; i < k.spec->float_args.size(); ++i) {
    args.float_args[i] = k.spec->float_args[i];
  }
  args.num_inputs = static_cast<int>(inputs.size());
  args.num_outputs = static_cast<int>(k.spec->outputs.size());
  args.num_int_args = static_cast<int>(k.spec->int_args.size());
  args.num_float_args = static_cast<int>(k.spec->float_args.size());
  if (absl::Status s = LaunchKernels(**driver, module->plan, module->functions, stream, &args);
      !s.ok()) {
    WarnOnce(k, std::string(s.message()));
    outputs->clear();
    return FallbackReason::kLaunchError;
  }
  // The scratch buffer goes back to the caching allocator, which orders its reuse after the
  // kernel on this stream.
  return FallbackReason::kNone;
}

std::vector<at::Tensor> Run(const std::string& bundle_id, const std::string& bundle_hint,
                            const std::vector<std::string>& kernel_ids,
                            const std::vector<at::Tensor>& inputs) {
  if (kDisabled) {
    counters().Fallback(kernel_ids,
                        std::vector<FallbackReason>(kernel_ids.size(), FallbackReason::kDisabled));
    return {};
  }
  std::shared_ptr<Bundle> bundle = registry().Resolve(bundle_id, bundle_hint);
  const bool grad_enabled = at::GradMode::is_enabled();
  std::vector<FallbackReason> reasons;
  reasons.reserve(kernel_ids.size());
  for (const std::string& kernel_id : kernel_ids) {
    auto it = bundle->kernels.find(kernel_id);
    FallbackReason reason = it == bundle->kernels.end()
                                ? FallbackReason::kUnknownKernel
                                : CheckGuards(*it->second->spec, inputs, grad_enabled);
    std::vector<at::Tensor> outputs;
    if (reason == FallbackReason::kNone) reason = Launch(*bundle, *it->second, inputs, &outputs);
    if (reason == FallbackReason::kNone) {
      counters().Launch(kernel_id);
      return outputs;
    }
    reasons.push_back(reason);
  }
  counters().Fallback(kernel_ids, reasons);
  return {};
}

c10::Dict<std::string, int64_t> ToDict(const std::map<std::string, int64_t>& counts) {
  c10::Dict<std::string, int64_t> dict;
  for (const auto& [key, n] : counts) dict.insert(key, n);
  return dict;
}

}  // namespace

std::string LoadBundle(const std::string& dir) { return registry().Load(dir); }
std::map<std::string, int64_t> FallbackCounts() { return counters().fallbacks(); }
std::map<std::string, int64_t> LaunchCounts() { return counters().launches(); }
void ResetCounts() { counters().Reset(); }
bool KernelsDisabled() { return kDisabled; }

}  // namespace kforge::runtime

// Conservative alias analysis: every op here has side effects (counters, the bundle registry)
// that TorchScript must neither reorder away nor fold as constants.
TORCH_LIBRARY(kforge, m) {
  using c10::AliasAnalysisKind;
  m.def(torch::schema("run(str bundle_id, str bundle_hint, str[] kernel_ids, Tensor[] inputs) -> "
                      "Tensor[]",
                      AliasAnalysisKind::CONSERVATIVE),
        &kforge::runtime::Run);
  m.def(torch::schema("load_bundle(str dir) -> str", AliasAnalysisKind::CONSERVATIVE),
        [](const std::string& dir) { return kforge::runtime::LoadBundle(dir); });
  m.def(torch::schema("fallback_counts() -> Dict(str, int)", AliasAnalysisKind::CONSERVATIVE),
        [] { return kforge::runtime::ToDict(kforge::runtime::FallbackCounts()); });
  m.def(torch::schema("launch_counts() -> Dict(str, int)", AliasAnalysisKind::CONSERVATIVE),
        [] { return kforge::runtime::ToDict(kforge::runtime::LaunchCounts()); });
  m.def(torch::schema("reset_counts() -> ()", AliasAnalysisKind::CONSERVATIVE),
        [] { kforge::runtime::ResetCounts(); });
  m.def(torch::schema("disabled() -> bool", AliasAnalysisKind::CONSERVATIVE),
        [] { return kforge::runtime::KernelsDisabled(); });
}
