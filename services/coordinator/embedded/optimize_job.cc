// RunOptimize: capture, target selection, search, report (see optimize_job.h).
#include "services/coordinator/embedded/optimize_job.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/blob_store.h"
#include "common/config.h"
#include "common/status.h"
#include "common/store.h"
#include "common/tensor_signature.h"
#include "services/capture/capture_report.h"
#include "services/capture/capturer.h"
#include "services/coordinator/embedded/embedded_runner.h"
#include "services/coordinator/embedded/gpu_lane.h"
#include "services/coordinator/embedded/local_gpus.h"
#include "services/coordinator/embedded/run_directory.h"
#include "services/coordinator/embedded/target_selection.h"
#include "services/coordinator/search/search_driver.h"
#include "services/coordinator/search/search_tree.h"
#include "services/proposer/llm/llm_proposer.h"
#include "services/proposer/synth/family_registry.h"
#include "services/proposer/synth/synthesizer.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

// With the synthesizer, capture keeps --top targets it covers and up to this many others
// ranked above them, whose refusals the report lists; with an LLM, this many more than --top.
constexpr int kExtraCapturedTargets = 10;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Say(ProgressDisplay* display, const std::string& line) {
  if (display != nullptr) display->Message(line);
}

bool IsLlmProposer(const std::string& name) { return name == "openai" || name == "anthropic"; }

absl::Status CheckInputFile(const std::string& flag, const std::string& path) {
  std::error_code ec;
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, " is required"));
  if (!fs::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(flag, " ", path, ": no such file"));
  }
  if (!fs::is_regular_file(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": not a regular file"));
  }
  return absl::OkStatus();
}

absl::Status Validate(const OptimizeOptions& o) {
  KF_RETURN_IF_ERROR(CheckInputFile("model", o.model_path));
  KF_RETURN_IF_ERROR(CheckInputFile("--inputs", o.inputs_path));
  if (o.out_dir.empty()) {
    return absl::InvalidArgumentError("--out is required: the directory the results go to");
  }
  if (o.top_k < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--top must be at least 1 (got ", o.top_k,
                                                   "): the number of targets to "
                                                   "search"));
  }
  if (o.iterations < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--iterations must be at least 1 (got ",
                                                   o.iterations, "): evaluations per target"));
  }
  if (o.time_budget_s < 0) {
    return absl::InvalidArgumentError("--time-budget must not be negative");
  }
  if (o.proposer != "synth" && !IsLlmProposer(o.proposer)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --proposer '", o.proposer, "': use synth, openai or anthropic"));
  }
  if (o.device != "auto" && o.device != "cuda" && o.device != "cpu") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --device '", o.device, "': use cuda, cpu or auto"));
  }
  std::set<int> seen;
  for (int gpu : o.gpus) {
    if (gpu < 0) return absl::InvalidArgumentError(absl::StrCat("--gpus: bad GPU index ", gpu));
    if (!seen.insert(gpu).second) {
      return absl::InvalidArgumentError(absl::StrCat("--gpus lists GPU ", gpu, " twice"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Proposer>> MakeProposer(const OptimizeOptions& o, Store* store) {
  if (o.proposer == "synth") return std::unique_ptr<Proposer>(new synth::Synthesizer());
  LlmOptions llm = o.llm;
  llm.backend = o.proposer;
  absl::StatusOr<std::unique_ptr<Proposer>> proposer = MakeLlmProposer(llm, store);
  if (!proposer.ok()) {
    // A missing key or a bad setting is this machine's configuration, not a flag typo.
    return absl::FailedPreconditionError(
        absl::StrCat("--proposer ", o.proposer, ": ", proposer.status().message()));
  }
  return proposer;
}

// Why the proposer cannot work on a target, or "".
TargetRefusal RefusalFor(const std::string& proposer) {
  if (proposer != "synth") return nullptr;  // an LLM may try any op
  return [](const v1::Target& target) -> std::string {
    std::string why;
    if (synth::FamilyRegistry::Default().Find(target, &why) != nullptr) return "";
    // The registry's reason already names the families and suggests an LLM proposer.
    return why.empty() ? std::string("no synthesizer family covers it; try --proposer openai")
                       : why;
  };
}

TargetReport ReportFromTree(const SearchTree& tree) {
  TargetReport r;
  r.target = tree.target();
  r.iterations = tree.CompletedCount();
  r.verdict_counts = tree.VerdictCounts();
  r.eager_s = tree.target().eager_time_s();
  r.floor_s = tree.target().floor_s();
  if (std::optional<int> best = tree.BestNode()) {
    r.search_best_speedup = tree.node(*best).speedup();
  }
  r.rejected = RejectedCandidates(tree);
  return r;
}

TargetReport ReportFromSearch(const SearchTree& tree, const TargetSearchResult& result) {
  TargetReport r = ReportFromTree(tree);
  r.iterations = result.progress.iterations();
  r.stop_reason = std::string(StopReasonName(result.stop_reason));
  r.search_best_speedup = result.search_best_speedup;
  r.error = result.error;
  r.notes = result.notes;
  if (result.best) {
    const v1::EvaluationResult& e = result.best->evaluation();
    r.speedup = e.speedup();
    r.best_s = e.candidate().median_s();
    if (e.eager().median_s() > 0) r.eager_s = e.eager().median_s();
    if (e.floor_s() > 0) r.floor_s = e.floor_s();
    r.best_candidate_id = result.best->candidate().id();
    r.best_proposer = result.best->candidate().proposer();
    r.best_params = {result.best->candidate().params().begin(),
                     result.best->candidate().params().end()};
    r.reconfirmed = e.reconfirmed();
  }
  return r;
}

// The capture, or the resumed run's profile, and the targets to search.
struct Plan {
  v1::OperatorProfile profile;
  std::vector<v1::Target> targets;
  std::vector<SkippedTarget> skipped;
};

absl::StatusOr<Plan> CaptureAndSelect(const OptimizeOptions& o, const RunDirectory& dir,
                                      Store& store, bool use_gpu, const v1::GpuInfo& gpu,
                                      ProgressDisplay* display) {
  Plan plan;
  const TargetRefusal refusal = RefusalFor(o.proposer);
  CaptureOptions capture;
  capture.model_path = o.model_path;
  capture.inputs_path = o.inputs_path;
  capture.device = use_gpu ? (o.device == "auto" ? "cuda" : o.device) : "cpu";
  capture.top_k = o.top_k;
  if (refusal) capture.uncovered_top_k = kExtraCapturedTargets;
  capture.ops = o.ops;
  capture.fuse = o.fuse;
  capture.max_target_input_bytes = o.max_target_input_bytes;
  Say(display, absl::StrCat("capturing ", o.model_path, " on ", capture.device, " ..."));
  const double start = Now();
  absl::StatusOr<CaptureResult> captured = Capturer::Run(capture, &store, [](const v1::Target& t) {
    return synth::FamilyRegistry::Default().FamilyFor(ForCudaKernels(t));
  });
  if (!captured.ok()) return captured.status();
  plan.profile = captured->profile;
  if (plan.profile.device() == "cpu") {
    for (v1::Target& t : *plan.profile.mutable_targets()) t = ForCudaKernels(std::move(t));
    plan.profile.add_notes(
        "captured on the CPU: the targets' tensors are described as CUDA tensors of the same "
        "sizes, strides and dtypes, which is what their kernels will run on; capture/ keeps the "
        "capture as recorded");
  }
  // Floors on the GPU that will time the kernels (none without one): selection ranks by them,
  // and a resumed run reads them back from the profile, so it selects the same targets.
  SetFloors(plan.profile, gpu);
  KF_RETURN_IF_ERROR(dir.WriteProfile(plan.profile));
  KF_RETURN_IF_ERROR(WriteCaptureDir(dir.capture_dir().string(), *captured));
  Say(display, absl::StrFormat("captured %d targets in %.1f s: forward %.3f ms on %s, %d ops",
                               plan.profile.targets_size(), Now() - start,
                               plan.profile.forward_time_s() * 1e3, plan.profile.device(),
                               plan.profile.ops_size()));
  if (!o.ops.empty() && plan.profile.targets().empty()) {
    std::vector<std::string> hottest;
    for (const v1::OpGroup& op : plan.profile.ops()) {
      if (hottest.size() < 8 && std::find(hottest.begin(), hottest.end(), op.op()) == hottest.end())
        hottest.push_back(op.op());
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "--ops ", absl::StrJoin(o.ops, ","), ": no such op ran in the model's profiled forward; "
        "its hottest ops are ", absl::StrJoin(hottest, ", ")));
  }
  TargetSelection selection = SelectTargets(plan.profile, o.top_k, refusal);
  plan.targets = std::move(selection.selected);
  plan.skipped = std::move(selection.skipped);
  return plan;
}

absl::StatusOr<Plan> ResumePlan(const OptimizeOptions& o, const RunDirectory& dir,
                                const RunManifest& manifest, ProgressDisplay* display) {
  Plan plan;
  KF_ASSIGN_OR_RETURN(plan.profile, dir.ReadProfile());
  std::map<std::string, const v1::Target*> by_id;
  for (const v1::Target& t : plan.profile.targets()) by_id[t.id()] = &t;
  for (const std::string& id : manifest.target_ids) {
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir.profile_path().string(), " has no target ", id, " that ",
          dir.manifest_path().string(), " selected; the directory was edited: use a new --out"));
    }
    plan.targets.push_back(*it->second);
  }
  TargetSelection again = SelectTargets(plan.profile, manifest.top_k, RefusalFor(o.proposer));
  plan.skipped = std::move(again.skipped);
  Say(display,
      absl::StrFormat("resuming the run in %s: %d targets, profile from %s", dir.root().string(),
                      plan.targets.size(), dir.profile_path().string()));
  if (o.top_k != manifest.top_k) {
    Say(display, absl::StrFormat("note: --top %d is ignored when resuming; the run keeps its "
                                 "%d targets",
                                 o.top_k, plan.targets.size()));
  }
  return plan;
}

// The trees as the previous run left them (checkpoints), or fresh ones.
absl::StatusOr<std::vector<SearchTree>> LoadTrees(const RunDirectory& dir, const Plan& plan,
                                                  uint64_t run_seed, const SearchOptions& search) {
  std::vector<SearchTree> trees;
  for (const v1::Target& target : plan.targets) {
    KF_ASSIGN_OR_RETURN(std::optional<v1::SearchTreeState> state, dir.ReadTree(target.id()));
    if (state) {
      absl::StatusOr<SearchTree> tree = SearchTree::FromState(*state);
      if (!tree.ok()) {
        return absl::DataLossError(absl::StrCat(dir.tree_path(target.id()).string(), ": ",
                                                tree.status().message(),
                                                "; delete it to restart that target's search"));
      }
      trees.push_back(*std::move(tree));
    } else {
      trees.emplace_back(target, SearchDriver::TreeSeed(run_seed, target.id()), search);
    }
  }
  return trees;
}

std::string SkippedLine(const SkippedTarget& s) {
  return absl::StrFormat("skipped %s %s (%.1f%% of the forward): %s", TargetOpName(s.target),
                         TargetSignature(s.target), s.target.share() * 100, s.reason);
}

CompiledCandidate DescribeCompiled(const v1::Candidate& candidate,
                                   const v1::CompileResult& compile) {
  CompiledCandidate c;
  c.candidate_id = candidate.id();
  c.proposer = candidate.proposer();
  c.params.insert(candidate.params().begin(), candidate.params().end());
  c.status = compile.status();
  c.cache_hit = compile.cache_hit();
  if (compile.kernels_size() > 0) {
    c.registers = compile.kernels(0).registers();
    c.spill_bytes = compile.kernels(0).spill_store_bytes() + compile.kernels(0).spill_load_bytes();
  }
  if (compile.status() != v1::COMPILE_OK) c.log_excerpt = compile.log().substr(0, 2048);
  return c;
}

// No GPU: propose a few candidates per target, compile them, keep them pending in the trees.
absl::Status CompileOnly(const OptimizeOptions& o, const RunDirectory& dir,
                         std::vector<SearchTree>& trees, Proposer& proposer, EmbeddedRunner& runner,
                         const ProposeContext& context, OptimizeResult& result,
                         ProgressDisplay* display) {
  int64_t sequence = 0;
  for (const SearchTree& tree : trees)
    sequence = std::max(sequence, tree.MaxDispatchSequence() + 1);
  const int wanted = std::min(o.iterations, std::max(1, o.compile_only_candidates));

  struct Pending {
    size_t tree;
    v1::Candidate candidate;
    std::future<absl::StatusOr<RunOutcome>> outcome;
  };
  std::vector<Pending> pending;
  for (size_t i = 0; i < trees.size(); ++i) {
    if (o.interrupt != nullptr && o.interrupt->load()) {
      return absl::CancelledError("interrupted while proposing");
    }
    SearchTree& tree = trees[i];
    TargetReport& report = result.report.targets[i];
    while (tree.DispatchedCount() < wanted) {
      absl::StatusOr<Expansion> expansion = tree.ExpandOnce(proposer, context, sequence);
      if (!expansion.ok()) {
        report.error = std::string(expansion.status().message());
        break;
      }
      if (!expansion->child) {
        report.error = expansion->refusal.empty() ? "the proposer had nothing new to propose"
                                                  : expansion->refusal;
        break;
      }
      ++sequence;
    }
    KF_RETURN_IF_ERROR(dir.WriteTree(tree.target().id(), tree.Serialize()));
    for (int node : tree.PendingNodes()) {
      auto promise = std::make_shared<std::promise<absl::StatusOr<RunOutcome>>>();
      Pending p{i, tree.node(node).evaluated.candidate(), promise->get_future()};
      runner.Run(tree.target(), p.candidate, RunOptions{},
                 [promise](absl::StatusOr<RunOutcome> outcome) {
                   promise->set_value(std::move(outcome));
                 });
      pending.push_back(std::move(p));
    }
    result.proposed += tree.DispatchedCount();
  }
  Say(display, absl::StrFormat("compiling %d proposed candidates with NVRTC ...", pending.size()));
  for (Pending& p : pending) {
    absl::StatusOr<RunOutcome> outcome = p.outcome.get();
    if (!outcome.ok()) return outcome.status();
    CompiledCandidate compiled = DescribeCompiled(p.candidate, outcome->compile);
    if (compiled.status == v1::COMPILE_OK) ++result.compiled_ok;
    result.report.targets[p.tree].compiled.push_back(std::move(compiled));
  }
  for (TargetReport& report : result.report.targets) report.stop_reason = "not_searched";
  return absl::OkStatus();
}

absl::Status WriteReport(const RunDirectory& dir, const OptimizeReport& report) {
  KF_RETURN_IF_ERROR(WriteFileAtomically(dir.report_path(), ReportToJson(report).dump(2) + "\n"));
  return WriteFileAtomically(dir.summary_path(), FormatSummaryText(report));
}

}  // namespace

absl::StatusOr<OptimizeResult> RunOptimize(const OptimizeOptions& o, ProgressDisplay* display) {
  KF_RETURN_IF_ERROR(Validate(o));
  const RunDirectory dir{fs::path(o.out_dir)};
  std::optional<RunManifest> previous;
  if (o.resume) {
    if (!dir.HasManifest()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--resume: ", o.out_dir,
                       " holds no optimize run (no run.json); drop --resume to "
                       "start one there"));
    }
    KF_ASSIGN_OR_RETURN(previous, dir.ReadManifest());
  } else if (dir.HasManifest()) {
    return absl::InvalidArgumentError(
        absl::StrCat(o.out_dir,
                     " already holds an optimize run; pass --resume to continue it, or choose "
                     "another --out"));
  }

  RunManifest manifest;
  manifest.model_path = fs::absolute(o.model_path).string();
  manifest.inputs_path = fs::absolute(o.inputs_path).string();
  KF_ASSIGN_OR_RETURN(manifest.model_sha256, Sha256OfFile(o.model_path));
  KF_ASSIGN_OR_RETURN(manifest.inputs_sha256, Sha256OfFile(o.inputs_path));
  if (previous) {
    if (previous->model_sha256 != manifest.model_sha256 ||
        previous->inputs_sha256 != manifest.inputs_sha256) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--resume: ", o.out_dir, " was made from another model or inputs (", previous->model_path,
          ", ", previous->inputs_path, "); pass those, or drop --resume and choose another --out"));
    }
  }
  manifest.store_url = !o.store_url.empty() ? o.store_url
                       : previous
                           ? previous->store_url
                           : absl::StrCat("dir:", (fs::absolute(o.out_dir) / "store").string());
  manifest.proposer = o.proposer;
  manifest.seed = previous ? previous->seed : o.seed;
  manifest.top_k = previous ? previous->top_k : o.top_k;

  KF_RETURN_IF_ERROR(dir.Create());
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(manifest.store_url);
  if (!store.ok()) {
    return absl::Status(
        store.status().code(),
        absl::StrCat("cannot open store ", manifest.store_url, ": ", store.status().message()));
  }
  if (absl::StatusOr<std::optional<std::string>> probe = (*store)->Get("kforge/probe");
      !probe.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot reach store ", manifest.store_url, ": ",
                                               probe.status().message(),
                                               "; check --store or start the store"));
  }

  // What this machine lacks is found before the (long) capture.
  KF_ASSIGN_OR_RETURN(std::unique_ptr<Proposer> proposer, MakeProposer(o, store->get()));
  absl::StatusOr<std::unique_ptr<Compiler>> compiler = Compiler::Create(o.compiler, store->get());
  if (!compiler.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot compile kernels here: ", compiler.status().message()));
  }
  const LocalGpus local = FindLocalGpus();
  const bool use_gpu = o.device != "cpu" && local.count > 0;
  if (o.device == "cuda" && local.count == 0) {
    return absl::FailedPreconditionError(absl::StrCat("--device cuda: ", local.why_none,
                                                      "; use --device cpu to capture and "
                                                      "compile without a GPU"));
  }
  std::vector<int> gpus = o.gpus;
  if (use_gpu) {
    if (gpus.empty()) {
      for (int i = 0; i < local.count; ++i) gpus.push_back(i);
    }
    for (int gpu : gpus) {
      if (gpu >= local.count) {
        return absl::InvalidArgumentError(
            absl::StrCat("--gpus: GPU ", gpu, " does not exist; this machine has ", local.count,
                         " (indices 0..", local.count - 1, ")"));
      }
    }
  }

  // The evaluator starts before the capture: its measured bandwidth and peak arithmetic give
  // each captured target its floor, which target selection weighs.
  std::vector<std::unique_ptr<GpuLane>> lanes;
  v1::GpuInfo gpu_info;
  if (use_gpu) {
    for (int gpu : gpus) {
      KF_ASSIGN_OR_RETURN(
          std::unique_ptr<EvaluatorGpuLane> lane,
          EvaluatorGpuLane::Create(gpu, compiler->get(), store->get(), o.evaluator));
      if (lanes.empty()) {
        Say(display, absl::StrCat("starting the evaluator on GPU ", gpu, " ..."));
        absl::StatusOr<v1::GpuInfo> info = lane->Info();
        if (!info.ok()) {
          return absl::FailedPreconditionError(
              absl::StrCat("GPU ", gpu, " cannot evaluate candidates: ", info.status().message()));
        }
        gpu_info = *info;
      }
      lanes.push_back(std::move(lane));
    }
  }

  Plan plan;
  if (previous) {
    KF_ASSIGN_OR_RETURN(plan, ResumePlan(o, dir, *previous, display));
  } else {
    KF_ASSIGN_OR_RETURN(plan, CaptureAndSelect(o, dir, **store, use_gpu, gpu_info, display));
  }
  for (const SkippedTarget& s : plan.skipped) Say(display, SkippedLine(s));
  if (plan.targets.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("none of the ", plan.profile.targets_size(),
                     " captured targets can be searched with --proposer ", o.proposer,
                     plan.skipped.empty() ? "" : absl::StrCat(": ", plan.skipped.front().reason)));
  }
  // Validation reads the captured inputs from the store: check they are there.
  for (const v1::Target& t : plan.targets) {
    absl::StatusOr<std::optional<std::string>> manifest_blob =
        (*store)->Get(absl::StrCat("blob/", t.captured_inputs().sha256()));
    if (!manifest_blob.ok() || !manifest_blob->has_value()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the captured inputs of target ", t.id(), " are not in store ", manifest.store_url,
          "; pass the --store this run was made with, or start a new run"));
    }
  }
  manifest.device = plan.profile.device();
  for (const v1::Target& t : plan.targets) manifest.target_ids.push_back(t.id());
  KF_RETURN_IF_ERROR(dir.WriteManifest(manifest));
  {
    std::vector<std::string> names;
    for (const v1::Target& t : plan.targets) {
      names.push_back(
          absl::StrFormat("%s %s (%.1f%%)", TargetOpName(t), TargetSignature(t), t.share() * 100));
    }
    Say(display,
        absl::StrCat("searching ", plan.targets.size(), " targets: ", absl::StrJoin(names, "; ")));
  }

  OptimizeResult result;
  result.captured_targets = plan.profile.targets_size();
  OptimizeReport& report = result.report;
  report.model_path = manifest.model_path;
  report.inputs_path = manifest.inputs_path;
  report.model_name = plan.profile.model_name();
  report.capture_device = plan.profile.device();
  report.proposer = o.proposer;
  report.store_url = manifest.store_url;
  report.seed = manifest.seed;
  report.iterations_per_target = o.iterations;
  report.time_budget_s = o.time_budget_s;
  report.forward_time_s = plan.profile.forward_time_s();
  report.resumed = previous.has_value();
  report.skipped = plan.skipped;

  SearchOptions search;
  if (IsLlmProposer(o.proposer)) search.proposals_per_expansion = 1;  // each call is billed
  KF_ASSIGN_OR_RETURN(std::vector<SearchTree> trees, LoadTrees(dir, plan, manifest.seed, search));
  for (const SearchTree& tree : trees) report.targets.push_back(ReportFromTree(tree));

  // The runner: compiles on a pool; evaluates on one lane per GPU (none: compile only).
  EmbeddedRunnerOptions runner_options;
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  runner_options.compile_threads =
      o.compile_threads > 0 ? o.compile_threads : std::clamp(cpus / 2, 2, 8);
  ProposeContext context;
  context.proposer = o.proposer;
  context.job_id = absl::StrCat("optimize-", manifest.model_sha256.substr(0, 12));
  context.gpu = gpu_info;
  report.gpu_name = gpu_info.name();
  runner_options.compile.set_arch(!context.gpu.arch().empty() ? context.gpu.arch() : DefaultArch());
  Compiler* compile_with = compiler->get();
  Store* inputs_store = store->get();
  EmbeddedRunner runner(
      [compile_with](const v1::Candidate& candidate, const v1::CompileOptions& options) {
        return compile_with->Compile(candidate, options);
      },
      [inputs_store](const v1::Target& target) {
        return GetBlob(*inputs_store, target.captured_inputs());
      },
      std::move(lanes), runner_options);

  if (!use_gpu) {
    result.no_gpu = true;
    result.no_gpu_why =
        local.count == 0 ? "none was found on this machine" : "--device cpu uses none";
    absl::Status compiled = CompileOnly(o, dir, trees, *proposer, runner, context, result, display);
    report.runner = runner.stats();
    report.status = compiled.ok()                 ? "no_gpu"
                    : absl::IsCancelled(compiled) ? "interrupted"
                                                  : "failed";
    report.message = compiled.ok() ? "validation and timing need a CUDA GPU; the candidates "
                                     "were proposed and compiled only"
                                   : std::string(compiled.message());
    KF_RETURN_IF_ERROR(WriteReport(dir, report));
    if (!compiled.ok()) return compiled;
    return result;
  }

  SearchDriverOptions driver_options;
  driver_options.seed = manifest.seed;
  driver_options.max_in_flight = std::max(2, 2 * runner.lane_count());
  driver_options.time_budget_s = o.time_budget_s;
  driver_options.search = search;
  driver_options.scheduler.iterations_per_target = o.iterations;
  driver_options.scheduler.near_floor_factor = o.stop_near_floor;
  driver_options.propose = context;
  SearchDriver driver(*proposer, runner, driver_options);
  std::vector<int> completed;
  for (SearchTree& tree : trees) {
    completed.push_back(tree.CompletedCount());
    KF_RETURN_IF_ERROR(driver.ResumeTarget(tree.ToState()).status());
  }
  absl::Status checkpoint_error;
  driver.OnCheckpoint([&](size_t index, const SearchTree& tree) {
    absl::Status s = dir.WriteTree(tree.target().id(), tree.Serialize());
    if (!s.ok() && checkpoint_error.ok()) {
      checkpoint_error = s;
      driver.Cancel();  // a run that cannot be resumed should not go on
    }
    (void)index;
  });
  if (display != nullptr) {
    display->StartSearch(plan.targets, completed, o.iterations, o.time_budget_s);
    driver.OnProgress([display](const SearchEvent& event) { display->OnEvent(event); });
  }

  std::atomic<bool> search_over{false};
  std::thread interrupt_watch;
  if (o.interrupt != nullptr) {
    interrupt_watch = std::thread([&] {
      while (!search_over.load()) {
        if (o.interrupt->load()) {
          driver.Cancel();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
  }
  const double search_start = Now();
  absl::StatusOr<SearchResult> searched = driver.Run();
  search_over = true;
  if (interrupt_watch.joinable()) interrupt_watch.join();
  if (display != nullptr) display->Finish();
  report.search_wall_s = Now() - search_start;

  for (size_t i = 0; i < trees.size(); ++i) {
    report.targets[i] = searched.ok() ? ReportFromSearch(driver.tree(i), searched->targets[i])
                                      : ReportFromTree(driver.tree(i));
    result.proposed += driver.tree(i).DispatchedCount();
  }
  if (!checkpoint_error.ok()) searched = checkpoint_error;
  if (!searched.ok()) {
    runner.Shutdown();
    report.runner = runner.stats();
    const bool interrupted = absl::IsCancelled(searched.status());
    report.status = interrupted ? "interrupted" : "failed";
    report.message = interrupted ? "interrupted; run again with --resume to continue"
                                 : std::string(searched.status().message());
    KF_RETURN_IF_ERROR(WriteReport(dir, report));
    return searched.status();
  }
  report.llm_usage = searched->llm_usage;
  for (size_t i = 0; i < trees.size(); ++i) {
    const TargetSearchResult& target_result = searched->targets[i];
    if (!target_result.best) continue;
    v1::EvaluatedCandidate winner = *target_result.best;
    if (winner.compile().cubin().empty()) {  // from the compile cache
      *winner.mutable_compile() = compile_with->Compile(winner.candidate(), runner_options.compile);
    }
    KF_RETURN_IF_ERROR(WriteWinner(dir, plan.targets[i], winner));
    report.targets[i].kernel_dir = absl::StrCat("kernels/", plan.targets[i].id());
  }
  runner.Shutdown();
  report.runner = runner.stats();
  result.compiled_ok = static_cast<int>(report.runner.compiled_ok);
  report.status = "complete";
  KF_RETURN_IF_ERROR(WriteReport(dir, report));
  return result;
}

}  // namespace kforge
