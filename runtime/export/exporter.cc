// The exporter (see exporter.h).
#include "runtime/export/exporter.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>

#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/digest.h"
#include "common/launch_plan.h"
#include "common/sha256.h"
#include "common/status.h"
#include "common/tensor_signature.h"
#include "google/protobuf/util/json_util.h"
#include "kforge/runtime.h"
#include "kforge/v1/proposer.pb.h"
#include "runtime/bundle_manifest.h"
#include "runtime/export/graph_rewrite.h"
#include "runtime/export/host_scalars.h"
#include "services/coordinator/embedded/run_directory.h"
#include "services/coordinator/embedded/target_selection.h"
#include "services/worker/reference.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Validation only ever saw buffers at least this aligned (the evaluator's guarded buffers), so
// that is what is proven even when a launch plan states less.
constexpr int64_t kMinProvenAlignment = 16;

template <typename Message>
absl::Status ParseJsonFile(const fs::path& path, Message* message) {
  KF_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  auto status = google::protobuf::util::JsonStringToMessage(text, message, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": ", status.ToString(),
                                                   "; the run directory is damaged"));
  }
  return absl::OkStatus();
}

// Strides that are dense (non-overlapping, no gaps) for `sizes`, or contiguous ones.
std::vector<int64_t> DenseStrides(const std::vector<int64_t>& sizes,
                                  const std::vector<int64_t>& strides) {
  std::vector<int64_t> contiguous(sizes.size(), 1);
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 2; d >= 0; --d) {
    contiguous[d] = contiguous[d + 1] * std::max<int64_t>(sizes[d + 1], 1);
  }
  if (strides.size() != sizes.size()) return contiguous;
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return strides[a] < strides[b]; });
  int64_t expected = 1;
  for (size_t d : order) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return contiguous;
    expected *= sizes[d];
  }
  return strides;
}

std::vector<int64_t> StridesOf(const v1::TensorSignature& sig) {
  std::vector<int64_t> sizes(sig.sizes().begin(), sig.sizes().end());
  std::vector<int64_t> strides(sig.strides().begin(), sig.strides().end());
  if (strides.size() != sizes.size()) return DenseStrides(sizes, {});
  return strides;
}

std::string ShortOp(const std::string& op) {
  std::string name = op.rfind("aten::", 0) == 0 ? op.substr(6) : op;
  for (char& c : name) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  }
  return name;
}

// "softmax", or "mul_add_softmax" for a chain.
std::string ShortOps(const v1::Target& target) {
  std::vector<std::string> ops;
  for (const v1::SubgraphNode& n : target.nodes()) ops.push_back(ShortOp(n.op()));
  return absl::StrJoin(ops, "_");
}

json ScalarJson(const v1::ScalarValue& s) {
  switch (s.value_case()) {
    case v1::ScalarValue::kIntValue: return s.int_value();
    case v1::ScalarValue::kFloatValue: return s.float_value();
    case v1::ScalarValue::kBoolValue: return s.bool_value();
    case v1::ScalarValue::kStringValue: return s.string_value();
    case v1::ScalarValue::kIntList: return std::vector<int64_t>(s.int_list().values().begin(), s.int_list().values().end());
    case v1::ScalarValue::kFloatList: return std::vector<double>(s.float_list().values().begin(), s.float_list().values().end());
    default: return nullptr;
  }
}

// The absolute path of the loaded libkforge_runtime.so (for the README and the summary).
std::string RuntimeLibraryPath() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&runtime::LoadBundle), &info) != 0 && info.dli_fname) {
    std::error_code ec;
    fs::path p = fs::canonical(info.dli_fname, ec);
    return ec ? std::string(info.dli_fname) : p.string();
  }
  return "libkforge_runtime.so";
}

// A winner of the run, checked and ready to compile.
struct Winner {
  v1::Target target;
  v1::EvaluatedCandidate candidate;
  std::string validated_cubin;  // the run's cubin, the binary that was validated
  std::string kernel_id;
};

std::string Readme(const ExportResult& result, const BundleManifest& manifest) {
  const fs::path lib(result.runtime_library);
  std::string out = absl::StrCat(
      "# kforge bundle\n\n",
      "The optimized model (`model.pt`, TorchScript) and the CUDA kernels it calls, exported by "
      "`kforge export` from the optimize run in `", manifest.source_run, "`.\n",
      "Bundle id (sha256 of `manifest.json`): `", result.bundle_id, "`.\n\n",
      "## Python\n\n```python\nimport torch\n", "torch.ops.load_library(\"", lib.string(),
      "\")\nmodel = torch.jit.load(\"", result.out_dir, "/model.pt\", map_location=\"cuda\")\n```\n\n",
      "The export saved the model's weights on the CPU: `map_location` puts them on the GPU. "
      "Run it on CUDA tensors under `torch.inference_mode()` (or `torch.no_grad()`): a kernel "
      "has no backward, so calls that need gradients run PyTorch's operator.\n\n",
      "## C++ (LibTorch)\n\n```cpp\n#include <kforge/runtime.h>  // ", "runtime/include\n",
      "kforge::runtime::LoadBundle(\"", result.out_dir, "\");\n",
      "torch::jit::Module model = torch::jit::load(\"", result.out_dir, "/model.pt\", torch::kCUDA);\n```\n\n",
      "Link with `-L", lib.parent_path().string(), " -lkforge_runtime`.\n\n",
      "## What runs\n\n",
      "Each rewritten operator checks its kernel's guards (CUDA device and architecture, dtypes, "
      "exact sizes, strides, pointer alignment, no grad) and otherwise runs PyTorch's own "
      "operator. Every fallback is counted: `torch.ops.kforge.fallback_counts()` (keys "
      "`reason` and `kernel_id:reason`), `torch.ops.kforge.launch_counts()`, "
      "`torch.ops.kforge.reset_counts()`; in C++ `kforge::runtime::FallbackCounts()`.\n"
      "`KFORGE_DISABLE=1` switches every kernel off. If this directory moves, set "
      "`KFORGE_BUNDLE_DIR` to its new place or call `torch.ops.kforge.load_bundle(dir)`. The "
      "checksums in `manifest.json` are verified when the bundle loads.\n\n",
      "| kernel | op | signature | speedup | archs |\n|---|---|---|---|---|\n");
  for (const BundleKernel& k : manifest.kernels) {
    std::vector<std::string> archs;
    for (const KernelBinary& b : k.binaries) {
      archs.push_back(b.validated ? absl::StrCat(b.arch, " (validated)") : b.arch);
    }
    absl::StrAppend(&out, "| ", k.id, " | ", k.op, " | `", k.signature, "` | ",
                    absl::StrFormat("%.2fx", k.speedup), " | ", absl::StrJoin(archs, ", "), " |\n");
  }
  return out;
}

absl::Status WriteFile(const fs::path& path, const std::string& data) {
  return WriteFileAtomically(path, data);
}

}  // namespace

absl::StatusOr<ExportResult> ExportBundle(const ExportOptions& options) {
  std::error_code ec;
  if (options.run_dir.empty()) return absl::InvalidArgumentError("no run directory given");
  if (options.out_dir.empty()) return absl::InvalidArgumentError("--out is required");
  const fs::path run_root = fs::absolute(options.run_dir);
  RunDirectory dir(run_root);
  if (!dir.HasManifest()) {
    return absl::NotFoundError(absl::StrCat(
        run_root.string(), " is not a kforge optimize run directory (no run.json); pass the "
        "--out directory of kforge optimize"));
  }
  KF_ASSIGN_OR_RETURN(RunManifest run, dir.ReadManifest());
  if (!fs::is_regular_file(dir.report_path(), ec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        run_root.string(), " has no report.json: the run has not finished; run kforge optimize "
        "with --resume on it first"));
  }
  KF_ASSIGN_OR_RETURN(std::string report_text, ReadWholeFile(dir.report_path()));
  json report = json::parse(report_text, nullptr, false);
  if (report.is_discarded() || !report.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(dir.report_path().string(), " is not JSON"));
  }
  const std::string status = report.value("status", "");
  if (status == "no_gpu") {
    return absl::FailedPreconditionError(absl::StrCat(
        "the run in ", run_root.string(), " validated nothing (no GPU: candidates were only "
        "compiled); run kforge optimize --resume on it on a machine with a CUDA GPU, then export"));
  }
  if (status != "complete") {
    return absl::FailedPreconditionError(absl::StrCat(
        "the run in ", run_root.string(), " is '", status, "', not complete; finish it with "
        "kforge optimize --resume before exporting"));
  }

  ExportResult result;
  result.runtime_library = RuntimeLibraryPath();
  result.out_dir = fs::absolute(options.out_dir).lexically_normal().string();
  if (!result.out_dir.empty() && result.out_dir.back() == '/') result.out_dir.pop_back();

  // The winners: validated, re-confirmed in a fresh process, faster than eager.
  std::vector<Winner> winners;
  std::set<std::string> kernel_ids;
  for (const json& t : report.value("targets", json::array())) {
    ExportSkip skip{t.value("target_id", ""), t.value("op", ""), ""};
    const std::string kernel_dir = t.value("kernel_dir", "");
    if (kernel_dir.empty()) {
      skip.reason = absl::StrCat("no validated winner (", t.value("stop_reason", "not searched"), ")");
      result.skipped.push_back(skip);
      continue;
    }
    const fs::path kdir = run_root / kernel_dir;
    Winner w;
    KF_RETURN_IF_ERROR(ParseJsonFile(kdir / "target.json", &w.target));
    KF_RETURN_IF_ERROR(ParseJsonFile(kdir / "candidate.json", &w.candidate));
    KF_ASSIGN_OR_RETURN(std::string source, ReadWholeFile(kdir / "kernel.cu"));
    KF_ASSIGN_OR_RETURN(std::string plan, ReadWholeFile(kdir / "plan.json"));
    // kernel.cu and plan.json are what gets compiled: they must be the candidate that was
    // validated (its id hashes them).
    if (CandidateId(source, plan) != w.candidate.candidate().id()) {
      return absl::InvalidArgumentError(absl::StrCat(
          kdir.string(), ": kernel.cu / plan.json do not hash to the validated candidate ",
          w.candidate.candidate().id(), "; they were edited after the run"));
    }
    w.candidate.mutable_candidate()->set_source(source);
    w.candidate.mutable_candidate()->set_launch_plan_json(plan);
    const v1::EvaluationResult& e = w.candidate.evaluation();
    if (e.verdict() != v1::PASS) {
      skip.reason = absl::StrCat("the winner's verdict is ", v1::Verdict_Name(e.verdict()));
    } else if (!e.reconfirmed()) {
      skip.reason = "the winner was not re-confirmed in a fresh process";
    } else if (!(e.speedup() > 1.0)) {
      skip.reason = absl::StrFormat("the winner is not faster than eager (%.3fx)", e.speedup());
    }
    if (!skip.reason.empty()) {
      result.skipped.push_back(skip);
      continue;
    }
    if (auto cubin = ReadWholeFile(kdir / "cubin"); cubin.ok()) w.validated_cubin = *cubin;
    w.kernel_id = absl::StrCat(ShortOps(w.target), "_", w.target.id().substr(0, 12));
    if (!kernel_ids.insert(w.kernel_id).second) {
      w.kernel_id = absl::StrCat(ShortOps(w.target), "_", w.target.id().substr(0, 20));
      kernel_ids.insert(w.kernel_id);
    }
    winners.push_back(std::move(w));
  }
  if (winners.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the run in ", run_root.string(), " has no kernel to export: no target has a validated, "
        "re-confirmed winner faster than eager",
        result.skipped.empty() ? "" : absl::StrCat(" (", result.skipped[0].target_id.substr(0, 12),
                                                    ": ", result.skipped[0].reason, ")")));
  }

  // The original model, unchanged since the run.
  const std::string model_path = options.model_path.empty() ? run.model_path : options.model_path;
  absl::StatusOr<std::string> model_sha = Sha256OfFile(model_path);
  if (!model_sha.ok()) {
    return absl::NotFoundError(absl::StrCat("cannot read the model ", model_path, ": ",
                                            model_sha.status().message(),
                                            "; pass --model with the run's original model"));
  }
  if (*model_sha != run.model_sha256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model ", model_path, " is not the one the run optimized (sha256 ", *model_sha,
        ", the run's is ", run.model_sha256, "); pass --model with the original file"));
  }
  torch::jit::Module module;
  try {
    module = torch::jit::load(model_path, c10::Device(c10::kCPU));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load the TorchScript model ", model_path, ": ", e.what()));
  }

  // Which nodes call which kernels; only kernels that some node calls go into the bundle. The
  // capture's graph.json says which nodes were called with each target's signature.
  std::vector<RewriteKernel> rewrite_kernels;
  for (const Winner& w : winners) {
    const v1::EvaluationResult& e = w.candidate.evaluation();
    rewrite_kernels.push_back(
        {w.kernel_id, w.target, e.eager().median_s() - e.candidate().median_s()});
  }
  std::string graph_json;
  if (absl::StatusOr<v1::OperatorProfile> profile = dir.ReadProfile(); profile.ok()) {
    graph_json = profile->graph_json();
  }
  if (graph_json.empty()) {
    if (auto text = ReadWholeFile(dir.capture_dir() / "graph.json"); text.ok()) graph_json = *text;
  }
  if (graph_json.empty()) {
    result.notes.push_back(
        "the run keeps no capture graph (graph.json): nodes were matched by operator and "
        "constants only, every such node lists every kernel of its operator and the guards pick "
        "at run time");
  }
  KF_ASSIGN_OR_RETURN(RewritePlan rewrite, PlanRewrite(module, rewrite_kernels, graph_json));
  if (!rewrite.note.empty()) result.notes.push_back(rewrite.note);
  // Before the manifest, whose notes count the nodes; the nodes planned for kernel calls stay
  // as they are for ApplyRewrite.
  std::set<const torch::jit::Node*> planned;
  for (const PlannedNode& p : rewrite.nodes) planned.insert(p.nodes.begin(), p.nodes.end());
  if (const int rewritten = KeepScalarArithmeticOnHost(*rewrite.graph, planned); rewritten > 0) {
    result.notes.push_back(absl::StrCat(
        rewritten, " node(s) of the traced model's shape arithmetic take their constant as a "
        "number and stay on the host: with the model's constants on the GPU they computed "
        "sizes there only to read them back, a device synchronization each time (and a forward "
        "no CUDA graph can capture); the values are the same"));
  }

  KF_ASSIGN_OR_RETURN(std::unique_ptr<Compiler> compiler, Compiler::Create(options.compiler, nullptr));
  BundleManifest manifest;
  manifest.created_by = "kforge 0.1.0 export";
  manifest.source_run = run_root.string();
  manifest.model_sha256 = run.model_sha256;
  std::map<std::string, std::string> files;  // bundle-relative path -> bytes
  auto add_file = [&files](const std::string& path, const std::string& bytes) {
    files[path] = bytes;
    return BundleFile{path, Sha256Hex(bytes)};
  };
  for (const Winner& w : winners) {
    auto used = rewrite.nodes_per_kernel.find(w.kernel_id);
    if (used == rewrite.nodes_per_kernel.end()) {
      result.skipped.push_back({w.target.id(), TargetOpName(w.target),
                                absl::StrCat("no node of the TorchScript graph computes this "
                                             "target: ", rewrite.unmatched[w.kernel_id])});
      continue;
    }
    const v1::CompileResult& validated = w.candidate.compile();
    const std::string validated_arch = validated.arch().empty() ? DefaultArch() : validated.arch();
    KF_ASSIGN_OR_RETURN(LaunchPlan plan, LaunchPlan::Parse(w.candidate.candidate().launch_plan_json()));
    KF_ASSIGN_OR_RETURN(ReferenceRunner runner, ReferenceRunner::Create(w.target));

    BundleKernel k;
    k.id = w.kernel_id;
    k.target_id = w.target.id();
    k.op = TargetOpName(w.target);
    k.signature = TargetSignature(w.target);
    for (const v1::SubgraphNode& n : w.target.nodes()) {
      BundleNode node{n.op(), n.overload(), n.schema()};
      for (const v1::Argument& a : n.args()) {
        if (a.kind_case() == v1::Argument::kScalar) node.constants[a.name()] = ScalarJson(a.scalar());
      }
      k.chain.push_back(std::move(node));
    }
    if (k.chain.size() == 1) {  // a single op is described by the kernel's own fields
      k.overload = k.chain[0].overload;
      k.schema = k.chain[0].schema;
      k.constants = k.chain[0].constants;
      k.chain.clear();
    }
    for (const v1::TensorSignature& sig : w.target.inputs()) {
      TensorGuard g;
      g.dtype = KfDtypeName(static_cast<int>(sig.dtype()));
      g.sizes.assign(sig.sizes().begin(), sig.sizes().end());
      g.strides = StridesOf(sig);
      g.contiguous = plan.requirements().contiguous;
      g.alignment_bytes = std::max(plan.requirements().alignment_bytes, kMinProvenAlignment);
      k.inputs.push_back(std::move(g));
    }
    for (int j = 0; j < w.target.outputs_size(); ++j) {
      const v1::TensorSignature& sig = w.target.outputs(j);
      OutputSpec o;
      o.dtype = KfDtypeName(static_cast<int>(sig.dtype()));
      o.sizes.assign(sig.sizes().begin(), sig.sizes().end());
      o.strides = DenseStrides(o.sizes, StridesOf(sig));
      o.aliases_input = AliasedInput(w.target, j);
      // The memory written is that input's: its strides (size-1 dims may carry any).
      if (o.aliases_input >= 0) o.strides = k.inputs[o.aliases_input].strides;
      k.outputs.push_back(std::move(o));
    }
    k.int_args = runner.scalar_args().ints;
    k.float_args = runner.scalar_args().floats;
    k.launch_plan_json = plan.canonical_json();
    k.source = add_file(absl::StrCat("kernels/", k.id, ".cu"), w.candidate.candidate().source());
    k.candidate_id = w.candidate.candidate().id();
    k.gpu_name = w.candidate.evaluation().gpu_name();
    k.eager_s = w.candidate.evaluation().eager().median_s();
    k.kernel_s = w.candidate.evaluation().candidate().median_s();
    k.speedup = w.candidate.evaluation().speedup();

    std::vector<std::string> archs = options.archs.empty() ? std::vector<std::string>{validated_arch}
                                                           : options.archs;
    ExportedKernel exported{k.id, k.target_id, k.op, k.signature, k.speedup, used->second, {}};
    for (const std::string& arch : archs) {
      v1::CompileOptions compile_options;
      compile_options.set_arch(arch);
      v1::CompileResult compiled = compiler->Compile(w.candidate.candidate(), compile_options);
      if (compiled.status() != v1::COMPILE_OK) {
        std::string why = absl::StrCat("kernel ", k.id, ": compiling for ", arch, " failed (",
                                       v1::CompileStatus_Name(compiled.status()), "): ",
                                       compiled.log().substr(0, 400));
        if (arch == validated_arch) return absl::InternalError(why);
        result.notes.push_back(why + "; the bundle has no " + arch + " cubin for it");
        continue;
      }
      std::string cubin = compiled.cubin();
      const bool is_validated = arch == validated_arch;
      if (is_validated && !w.validated_cubin.empty() && w.validated_cubin != cubin) {
        // The binary that was validated is the one to ship.
        cubin = w.validated_cubin;
        result.notes.push_back(absl::StrCat("kernel ", k.id, ": the recompiled ", arch,
                                            " cubin differs from the run's; the run's validated "
                                            "cubin is used"));
      }
      KernelBinary b;
      b.arch = arch;
      b.validated = is_validated;
      b.cubin = add_file(absl::StrCat("kernels/", k.id, ".", arch, ".cubin"), cubin);
      b.ptx = add_file(absl::StrCat("kernels/", k.id, ".", arch, ".ptx"), compiled.ptx());
      k.binaries.push_back(std::move(b));
      exported.archs.push_back(arch);
    }
    if (k.binaries.empty()) {
      result.skipped.push_back({k.target_id, k.op, "no cubin could be compiled for any --arch"});
      continue;
    }
    if (std::none_of(k.binaries.begin(), k.binaries.end(), [](const KernelBinary& b) { return b.validated; })) {
      result.notes.push_back(absl::StrCat("kernel ", k.id, " was validated on ", validated_arch,
                                          ", which --arch leaves out: its cubins are compiled, "
                                          "not validated"));
    }
    manifest.kernels.push_back(std::move(k));
    result.kernels.push_back(std::move(exported));
  }
  if (manifest.kernels.empty()) {
    // Every winner was dropped here (the run's own skips come first): say why for each.
    std::vector<std::string> why;
    for (size_t i = result.skipped.size() - std::min(result.skipped.size(), winners.size());
         i < result.skipped.size(); ++i) {
      const ExportSkip& s = result.skipped[i];
      why.push_back(absl::StrCat("target ", s.target_id.substr(0, 12), " (", s.op, "): ",
                                 s.reason));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "nothing to export from ", run_root.string(), ": ",
        why.empty() ? "no winner" : absl::StrJoin(why, "; ")));
  }
  // Kernels that no node calls are not in the manifest: plan again without them.
  std::set<std::string> kept;
  for (const BundleKernel& k : manifest.kernels) kept.insert(k.id);
  for (PlannedNode& p : rewrite.nodes) {
    std::vector<std::string> ids;
    for (const std::string& id : p.kernel_ids) {
      if (kept.count(id)) ids.push_back(id);
    }
    p.kernel_ids = std::move(ids);
  }
  rewrite.nodes.erase(std::remove_if(rewrite.nodes.begin(), rewrite.nodes.end(),
                                     [](const PlannedNode& p) { return p.kernel_ids.empty(); }),
                      rewrite.nodes.end());
  manifest.notes = result.notes;
  const std::string manifest_text = ManifestToJson(manifest);
  KF_RETURN_IF_ERROR(ValidateManifest(manifest, "the exported manifest"));
  result.bundle_id = Sha256Hex(manifest_text);
  KF_RETURN_IF_ERROR(ApplyRewrite(rewrite, result.bundle_id, result.out_dir));
  result.nodes_rewritten = static_cast<int>(rewrite.nodes.size());

  // Written beside OUT, then renamed into place: a failed export leaves no half bundle.
  const fs::path out(result.out_dir);
  if (fs::exists(out, ec)) {
    const bool empty = fs::is_directory(out, ec) && fs::is_empty(out, ec);
    const bool bundle = fs::is_regular_file(out / kBundleManifestFile, ec);
    if (!empty && !(bundle && options.force)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--out ", out.string(),
          bundle ? " already holds a bundle; pass --force to replace it"
                 : " exists and is not an empty directory or a kforge bundle; choose another --out"));
    }
  }
  const fs::path staging = out.parent_path() / absl::StrCat(".", out.filename().string(), ".export-", getpid());
  fs::remove_all(staging, ec);
  fs::create_directories(staging / "kernels", ec);
  if (ec) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", staging.string(), ": ", ec.message()));
  }
  for (const auto& [path, bytes] : files) KF_RETURN_IF_ERROR(WriteFile(staging / path, bytes));
  KF_RETURN_IF_ERROR(WriteFile(staging / kBundleManifestFile, manifest_text));
  try {
    module.save((staging / "model.pt").string());
  } catch (const std::exception& e) {
    fs::remove_all(staging, ec);
    return absl::InternalError(absl::StrCat("saving the rewritten model failed: ", e.what()));
  }
  KF_RETURN_IF_ERROR(WriteFile(staging / "README.md", Readme(result, manifest)));
  if (fs::exists(out, ec)) fs::remove_all(out, ec);
  fs::rename(staging, out, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot move the bundle into ", out.string(), ": ", ec.message()));
  }
  // The bundle as users will load it: every checksum verified by the runtime library.
  try {
    const std::string id = runtime::LoadBundle(out.string());
    if (id != result.bundle_id) return absl::InternalError("the written manifest changed on disk");
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("the written bundle does not load: ", e.what()));
  }
  return result;
}

json ExportResultToJson(const ExportResult& r) {
  json kernels = json::array();
  for (const ExportedKernel& k : r.kernels) {
    kernels.push_back({{"kernel_id", k.kernel_id}, {"target_id", k.target_id}, {"op", k.op},
                       {"signature", k.signature}, {"speedup", k.speedup}, {"nodes", k.nodes},
                       {"archs", k.archs}});
  }
  json skipped = json::array();
  for (const ExportSkip& s : r.skipped) {
    skipped.push_back({{"target_id", s.target_id}, {"op", s.op}, {"reason", s.reason}});
  }
  return {{"out", r.out_dir},
          {"bundle_id", r.bundle_id},
          {"runtime_library", r.runtime_library},
          {"nodes_rewritten", r.nodes_rewritten},
          {"kernels", std::move(kernels)},
          {"skipped", std::move(skipped)},
          {"notes", r.notes}};
}

std::string FormatExportSummary(const ExportResult& r) {
  std::string out = absl::StrFormat("exported %d kernel%s (%d graph node%s rewritten) to %s\n",
                                    r.kernels.size(), r.kernels.size() == 1 ? "" : "s",
                                    r.nodes_rewritten, r.nodes_rewritten == 1 ? "" : "s", r.out_dir);
  for (const ExportedKernel& k : r.kernels) {
    absl::StrAppend(&out, absl::StrFormat("  %-32s %-48s %6.2fx  %d node(s)  %s\n", k.kernel_id,
                                          absl::StrCat(k.op, " ", k.signature).substr(0, 48),
                                          k.speedup, k.nodes, absl::StrJoin(k.archs, ",")));
  }
  for (const ExportSkip& s : r.skipped) {
    absl::StrAppend(&out, "  skipped ", s.target_id.substr(0, 12), " ", s.op, ": ", s.reason, "\n");
  }
  for (const std::string& n : r.notes) absl::StrAppend(&out, "  note: ", n, "\n");
  absl::StrAppend(&out, "load it: torch.ops.load_library(\"", r.runtime_library,
                  "\"); torch.jit.load(\"", r.out_dir, "/model.pt\", map_location=\"cuda\")  (see ",
                  r.out_dir,
                  "/README.md)\n");
  return out;
}

}  // namespace kforge
