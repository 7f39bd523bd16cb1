// libkforge_runtime.so: the kforge:: operators an exported model calls (guarded dispatch,
// docs/guarded-dispatch.md). kforge::run checks each listed kernel's guards against the call's
// tensors and launches the first kernel whose guards hold on the current CUDA stream through
// the driver API, or returns an empty list — the graph then runs the original aten node — and
// counts why.
#include <cuda.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Dict.h>
#include <ATen/core/grad_mode.h>
#include <ATen/core/stack.h>
#include <ATen/cuda/EmptyTensor.h>
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

constexpr int kReasonCount = static_cast<int>(FallbackReason::kUnknownKernel) + 1;

// One kernel's counts: atomics, so the call path takes no lock.
struct KernelCounts {
  std::atomic<int64_t> launches{0};
  std::atomic<int64_t> fallbacks[kReasonCount] = {};
  void Reset() {
    launches = 0;
    for (std::atomic<int64_t>& n : fallbacks) n = 0;
  }
};

// Calls counted by reason (the first listed kernel's), and the kernel ids a call named that
// have no loaded state (KFORGE_DISABLE, or an id the bundle lacks), which take a lock.
class Counters {
 public:
  void Fallback(FallbackReason first) { ++by_reason_[static_cast<int>(first)]; }
  void Unloaded(const std::string& kernel_id, FallbackReason reason) {
    std::lock_guard<std::mutex> lock(mu_);
    ++unloaded_[absl::StrCat(kernel_id, ":", std::string(ReasonName(reason)))];
  }
  // Adds the per-reason and unloaded counts to `out`.
  void AddTo(std::map<std::string, int64_t>& out) {
    for (int r = 0; r < kReasonCount; ++r) {
      if (int64_t n = by_reason_[r].load()) out[std::string(ReasonName(FallbackReason(r)))] += n;
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, n] : unloaded_) out[key] += n;
  }
  void Reset() {
    for (std::atomic<int64_t>& n : by_reason_) n = 0;
    std::lock_guard<std::mutex> lock(mu_);
    unloaded_.clear();
  }

 private:
  std::atomic<int64_t> by_reason_[kReasonCount] = {};
  std::mutex mu_;
  std::map<std::string, int64_t> unloaded_;
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

// Queried once per device; later calls read it without a lock.
const DeviceInfo& InfoFor(const CudaDriver& driver, int index) {
  constexpr int kFastDevices = 64;
  static std::atomic<const DeviceInfo*> fast[kFastDevices] = {};
  if (index >= 0 && index < kFastDevices) {
    if (const DeviceInfo* info = fast[index].load(std::memory_order_acquire)) return *info;
  }
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
  const DeviceInfo& stored = infos->emplace(index, info).first->second;  // never erased
  if (index >= 0 && index < kFastDevices) fast[index].store(&stored, std::memory_order_release);
  return stored;
}

// ---- Bundles --------------------------------------------------------------------------

// A kernel's module in one CUDA context, with its launch plan resolved once: the guards fix
// every shape, so the plan's grid, block, shared memory and scratch size are fixed too, and so
// is every field of the kernel's arguments but the data pointers.
struct LoadedModule {
  CUcontext context = nullptr;
  FallbackReason failure = FallbackReason::kNone;
  CUmodule module = nullptr;
  KernelFunctions functions;
  ResolvedPlan plan;
  KfArgs prototype;
};

struct KernelState {
  const BundleKernel* spec = nullptr;
  std::optional<LaunchPlan> plan;
  std::vector<at::ScalarType> output_types;
  std::map<CUcontext, LoadedModule> modules;  // guarded by Bundle::mu; never erased
  std::atomic<LoadedModule*> last_module{nullptr};  // the one used last: read without the lock
  std::atomic<bool> warned{false};
  KernelCounts counts;
};

struct Bundle {
  LoadedBundleManifest loaded;
  std::unordered_map<std::string, std::unique_ptr<KernelState>> kernels;
  std::mutex mu;
};

at::ScalarType ScalarTypeOf(int kf_dtype) {
  switch (kf_dtype) {
    case KF_FLOAT32: return at::kFloat;
    case KF_FLOAT16: return at::kHalf;
    case KF_BFLOAT16: return at::kBFloat16;
    case KF_FLOAT64: return at::kDouble;
    case KF_INT64: return at::kLong;
    case KF_INT32: return at::kInt;
    case KF_INT16: return at::kShort;
    case KF_INT8: return at::kChar;
    case KF_UINT8: return at::kByte;
    case KF_BOOL: return at::kBool;
    default: return at::ScalarType::Undefined;  // ValidateManifest admits known dtypes only
  }
}

absl::StatusOr<std::unique_ptr<Bundle>> MakeBundle(LoadedBundleManifest loaded) {
  auto bundle = std::make_unique<Bundle>();
  bundle->loaded = std::move(loaded);
  for (const BundleKernel& k : bundle->loaded.manifest.kernels) {
    auto state = std::make_unique<KernelState>();
    state->spec = &k;
    absl::StatusOr<LaunchPlan> plan = LaunchPlan::Parse(k.launch_plan_json);
    if (!plan.ok()) return plan.status();  // ValidateManifest parsed it already
    state->plan.emplace(*std::move(plan));
    for (const OutputSpec& o : k.outputs) {
      state->output_types.push_back(ScalarTypeOf(KfDtypeFromName(o.dtype)));
    }
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

// Bundles stay loaded for the life of the process (a model may run at any time), so the call
// path holds plain pointers to them.
class Registry {
 public:
  std::string Load(const std::string& dir) {
    absl::StatusOr<LoadedBundleManifest> loaded = ReadBundleManifest(dir);
    TORCH_CHECK(loaded.ok(), "kforge: ", std::string(loaded.status().message()));
    absl::StatusOr<std::unique_ptr<Bundle>> bundle = MakeBundle(*std::move(loaded));
    TORCH_CHECK(bundle.ok(), "kforge: ", std::string(bundle.status().message()));
    std::string id = (*bundle)->loaded.id;
    std::lock_guard<std::mutex> lock(mu_);
    // The id is the manifest's sha256 and every file was checked against it: a bundle loaded
    // again from another directory is the same bundle, and the one loaded first stays.
    by_id_.emplace(id, *std::move(bundle));
    return id;
  }

  // Resolve, with the last bundle this thread resolved remembered: a model calls one bundle.
  Bundle& ResolveFast(const std::string& id, const std::string& hint) {
    thread_local std::string last_id;
    thread_local Bundle* last = nullptr;
    if (last == nullptr || last_id != id) {
      last = &Resolve(id, hint);
      last_id = id;
    }
    return *last;
  }

  // The bundle `id`: one already loaded, else the first of KFORGE_BUNDLE_DIR's directories
  // (':'-separated) and the export-time path `hint` whose manifest has that id.
  Bundle& Resolve(const std::string& id, const std::string& hint) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = by_id_.find(id);
      if (it != by_id_.end()) return *it->second;
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
        if (it != by_id_.end()) return *it->second;
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
  }

  // Calls `f(kernel_id, state)` for every kernel of every loaded bundle.
  template <typename F>
  void ForEachKernel(F f) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, bundle] : by_id_) {
      for (const auto& [kernel_id, state] : bundle->kernels) f(kernel_id, *state);
    }
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Bundle>> by_id_;
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

// Loads the kernel's module in `context` (once), resolves its plan and fills the arguments'
// prototype. nullptr (and `reason`) when it cannot be loaded now; a module the driver refused
// stays refused (its `failure`).
LoadedModule* LoadModule(Bundle& bundle, KernelState& k, const CudaDriver& driver,
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
  m.context = context;
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

  KfArgs& args = m.prototype;
  std::memset(&args, 0, sizeof(args));
  for (size_t i = 0; i < k.spec->inputs.size(); ++i) {
    const TensorGuard& g = k.spec->inputs[i];
    args.inputs[i] = MakeKfTensor(nullptr, KfDtypeFromName(g.dtype), g.sizes.data(),
                                  g.strides.data(), static_cast<int>(g.sizes.size()));
  }
  for (size_t j = 0; j < k.spec->outputs.size(); ++j) {
    const OutputSpec& o = k.spec->outputs[j];
    args.outputs[j] = MakeKfTensor(nullptr, KfDtypeFromName(o.dtype), o.sizes.data(),
                                   o.strides.data(), static_cast<int>(o.sizes.size()));
  }
  if (m.plan.scratch_bytes > 0) {
    const int64_t stride = 1;
    args.scratch = MakeKfTensor(nullptr, KF_UINT8, &m.plan.scratch_bytes, &stride, 1);
  }
  for (size_t i = 0; i < k.spec->int_args.size(); ++i) args.int_args[i] = k.spec->int_args[i];
  for (size_t i = 0; i < k.spec->float_args.size(); ++i) {
    args.float_args[i] = k.spec->float_args[i];
  }
  args.num_inputs = static_cast<int>(k.spec->inputs.size());
  args.num_outputs = static_cast<int>(k.spec->outputs.size());
  args.num_int_args = static_cast<int>(k.spec->int_args.size());
  args.num_float_args = static_cast<int>(k.spec->float_args.size());
  return &m;
}

// Runs kernel `k` on `inputs` (its guards hold); kNone and `outputs` on success.
FallbackReason Launch(Bundle& bundle, KernelState& k, c10::ArrayRef<at::Tensor> inputs,
                      std::vector<at::Tensor>* outputs) {
  static const absl::StatusOr<const CudaDriver*> driver = CudaDriver::Get();
  if (!driver.ok()) {
    WarnOnce(k, std::string(driver.status().message()));
    return FallbackReason::kLoadError;
  }
  const c10::Device device = inputs[0].device();
  c10::cuda::CUDAGuard device_guard(device);
  // The guard made the device's primary context current, unless the caller's own context is.
  CUcontext context = nullptr;
  (*driver)->ctx_get_current(&context);
  const CUstream stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  LoadedModule* module = k.last_module.load(std::memory_order_acquire);
  if (module == nullptr || module->context != context) {
    const DeviceInfo& info = InfoFor(**driver, device.index());
    if (!info.error.empty()) {
      WarnOnce(k, info.error);
      return FallbackReason::kLoadError;
    }
    const KernelBinary* binary = BinaryForDevice(*k.spec, info.major, info.minor);
    if (binary == nullptr) return FallbackReason::kArchMissing;
    if (context == nullptr) {
      (*driver)->ctx_set_current(info.primary);
      context = info.primary;
    }
    FallbackReason reason = FallbackReason::kNone;
    module = LoadModule(bundle, k, **driver, info, *binary, context, stream, &reason);
    if (module == nullptr) return reason;
    k.last_module.store(module, std::memory_order_release);
  }
  if (module->failure != FallbackReason::kNone) return module->failure;

  // Outputs and scratch from the caching allocator on the current stream: no sync, and
  // CUDA-graph capture takes them from its private pool.
  KfArgs args = module->prototype;
  for (size_t i = 0; i < inputs.size(); ++i) {
    args.inputs[i].data = const_cast<void*>(inputs[i].const_data_ptr());
  }
  outputs->clear();
  for (size_t j = 0; j < k.spec->outputs.size(); ++j) {
    const OutputSpec& o = k.spec->outputs[j];
    // In place: the guards proved the input has the output's dtype, sizes and strides.
    at::Tensor out = o.aliases_input >= 0
                         ? inputs[o.aliases_input]
                         : at::Tensor(at::detail::empty_strided_cuda(o.sizes, o.strides,
                                                                     k.output_types[j], device));
    args.outputs[j].data = out.data_ptr();
    outputs->push_back(std::move(out));
  }
  at::Tensor scratch;
  if (module->plan.scratch_bytes > 0) {
    scratch = at::Tensor(
        at::detail::empty_cuda({module->plan.scratch_bytes}, at::kByte, device, std::nullopt));
    args.scratch.data = scratch.data_ptr();
  }
  if (absl::Status s =
          LaunchKernels(**driver, module->plan, module->functions, stream, &args);
      !s.ok()) {
    WarnOnce(k, std::string(s.message()));
    outputs->clear();
    return FallbackReason::kLaunchError;
  }
  // The scratch buffer goes back to the caching allocator, which orders its reuse after the
  // kernel on this stream.
  return FallbackReason::kNone;
}

// kforge::run: the first listed kernel whose guards hold runs; none: an empty list, and the
// graph runs the original node. Boxed, so the graph's constants are read where they lie.
// `arguments_match` (empty: all) says per kernel whether the int lists the graph computes for
// the node equal the ones its kernel was proven for (graph_rewrite.h).
void Run(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr size_t kArgs = 5;
  c10::ArrayRef<c10::IValue> args = torch::jit::last(*stack, kArgs);
  const std::string& bundle_id = args[0].toStringRef();
  const std::string& bundle_hint = args[1].toStringRef();
  c10::ArrayRef<c10::IValue> kernel_ids = args[2].toListRef();
  std::vector<at::Tensor> inputs = args[3].toTensorVector();
  const c10::List<bool> arguments_match = args[4].toBoolList();
  std::vector<at::Tensor> outputs;
  auto finish = [&] {
    torch::jit::drop(*stack, kArgs);
    stack->emplace_back(std::move(outputs));
  };
  if (kDisabled) {
    counters().Fallback(FallbackReason::kDisabled);
    for (const c10::IValue& id : kernel_ids) {
      counters().Unloaded(id.toStringRef(), FallbackReason::kDisabled);
    }
    return finish();
  }
  Bundle& bundle = registry().ResolveFast(bundle_id, bundle_hint);
  const bool grad_enabled = at::GradMode::is_enabled();
  std::optional<FallbackReason> first;
  for (size_t i = 0; i < kernel_ids.size(); ++i) {
    const std::string& kernel_id = kernel_ids[i].toStringRef();
    auto it = bundle.kernels.find(kernel_id);
    if (it == bundle.kernels.end()) {
      counters().Unloaded(kernel_id, FallbackReason::kUnknownKernel);
      if (!first) first = FallbackReason::kUnknownKernel;
      continue;
    }
    KernelState& k = *it->second;
    FallbackReason reason = i < arguments_match.size() && !arguments_match[i]
                                ? FallbackReason::kArguments
                                : CheckGuards(*k.spec, inputs, grad_enabled);
    if (reason == FallbackReason::kNone) reason = Launch(bundle, k, inputs, &outputs);
    if (reason == FallbackReason::kNone) {
      ++k.counts.launches;
      return finish();
    }
    ++k.counts.fallbacks[static_cast<int>(reason)];
    if (!first) first = reason;
  }
  counters().Fallback(first.value_or(FallbackReason::kSignature));
  finish();
}

std::map<std::string, int64_t> FallbackMap() {
  std::map<std::string, int64_t> out;
  counters().AddTo(out);
  registry().ForEachKernel([&](const std::string& id, KernelState& k) {
    for (int r = 0; r < kReasonCount; ++r) {
      if (int64_t n = k.counts.fallbacks[r].load()) {
        out[absl::StrCat(id, ":", std::string(ReasonName(FallbackReason(r))))] += n;
      }
    }
  });
  return out;
}

std::map<std::string, int64_t> LaunchMap() {
  std::map<std::string, int64_t> out;
  registry().ForEachKernel([&](const std::string& id, KernelState& k) {
    if (int64_t n = k.counts.launches.load()) out[id] += n;
  });
  return out;
}

void ResetAll() {
  counters().Reset();
  registry().ForEachKernel([](const std::string&, KernelState& k) { k.counts.Reset(); });
}

c10::Dict<std::string, int64_t> ToDict(const std::map<std::string, int64_t>& counts) {
  c10::Dict<std::string, int64_t> dict;
  for (const auto& [key, n] : counts) dict.insert(key, n);
  return dict;
}

}  // namespace

std::string LoadBundle(const std::string& dir) { return registry().Load(dir); }
std::map<std::string, int64_t> FallbackCounts() { return FallbackMap(); }
std::map<std::string, int64_t> LaunchCounts() { return LaunchMap(); }
void ResetCounts() { ResetAll(); }
bool KernelsDisabled() { return kDisabled; }

}  // namespace kforge::runtime

// Conservative alias analysis: every op here has side effects (counters, the bundle registry)
// that TorchScript must neither reorder away nor fold as constants.
TORCH_LIBRARY(kforge, m) {
  using c10::AliasAnalysisKind;
  m.def(torch::schema("run(str bundle_id, str bundle_hint, str[] kernel_ids, Tensor[] inputs, "
                      "bool[] arguments_match=[]) -> Tensor[]",
                      AliasAnalysisKind::CONSERVATIVE),
        torch::CppFunction::makeFromBoxedFunction<&kforge::runtime::Run>());
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
