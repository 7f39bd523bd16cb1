// kforge-bench-search: does the tree search earn its keep? For real targets (GPU.md's anchor
// rows, built and filled by anchor_rows.h as kforge-synth-sweep builds them) it runs
//   (1) the real SearchDriver — MCTS trees over the synthesizer proposer — for N evaluations
//       per target, and
//   (2) uniform random sampling of N valid canonical configs of the same synthesizer family
//       space (every point of the family's product space, canonicalized, Check()ed and
//       deduplicated, then a seeded shuffle; configs that generate an already drawn kernel
//       are skipped, as the tree never evaluates a kernel twice either),
// each candidate through the same worker evaluation — the EmbeddedRunner of `kforge
// optimize`: the Compiler behind a compile cache, then full validation and timing by one
// kforge-evaluator child on the GPU (default policy, eager interleaved). The two methods run
// at the same time with the same number in flight per target, so they share the GPU and the
// caches evenly and a --time-budget-s cut costs both alike. It prints one markdown table: the
// best speedup over eager after 10, 25 and N evaluations (in dispatch order) and how many
// evaluations passed. No re-confirmation: the curve is the search's own view.
//
// --compile-only runs without a GPU: both methods' candidate streams are proposed and
// compiled, and the table counts what compiled. A benchmark, not a test.
//
//   kforge-bench-search [--rows ID,...] [--evaluations N] [--seeds N] [--time-budget-s S]
//                       [--compile-only] [--out FILE]   (--help lists the rest)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/digest.h"
#include "common/file_io.h"
#include "common/op_cost.h"
#include "common/status.h"
#include "common/store.h"
#include "services/coordinator/embedded/embedded_runner.h"
#include "services/coordinator/embedded/gpu_lane.h"
#include "services/coordinator/search/search_driver.h"
#include "services/coordinator/search/seed_derivation.h"
#include "services/proposer/synth/family_registry.h"
#include "services/proposer/synth/seeded_rng.h"
#include "services/proposer/synth/synthesizer.h"
#include "services/worker/compiler.h"
#include "tools/bench/anchor_rows.h"
#include "tools/bench/bench_compiler.h"
#include "tools/bench/sweep_details.h"

namespace kforge {
namespace {

using Clock = std::chrono::steady_clock;
using bench::AnchorRow;
using synth::Config;
using synth::KernelGenerator;

constexpr char kTargetIdPrefix[] = "search-bench-";
constexpr char kDefaultRows[] = "gn-vae-fp32,softmax-attn-fp32,avgpool-r50";

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Progress lines come from the driver's thread and the runner's threads.
std::mutex print_mu;
Clock::time_point start_time = Clock::now();

template <typename... Args>
void Progress(const absl::FormatSpec<Args...>& format, const Args&... args) {
  const std::string line = absl::StrFormat(format, args...);
  std::lock_guard<std::mutex> lock(print_mu);
  std::fprintf(stderr, "[%6.1f s] %s\n", Seconds(start_time), line.c_str());
}

// ---------------------------------------------------------------------------------------
// Targets and their family spaces.

struct Row {
  AnchorRow anchor;
  std::string family;
  std::unique_ptr<KernelGenerator> generator;
  std::vector<Config> valid;  // every valid canonical config, enumeration order
  std::string inputs;         // torch.save bytes of one call (GPU mode)
  std::string error;          // why the row cannot be searched
};

// The candidate a config generates, made as the Synthesizer makes its proposals (same id,
// proposer and params), so both methods hit the same compile and evaluation caches.
absl::StatusOr<v1::Candidate> CandidateFor(const Row& row, const Config& config) {
  KF_ASSIGN_OR_RETURN(synth::GeneratedKernel kernel, row.generator->Generate(config));
  v1::Candidate candidate;
  candidate.set_id(CandidateId(kernel.source, kernel.launch_plan_json));
  candidate.set_source(std::move(kernel.source));
  candidate.set_launch_plan_json(std::move(kernel.launch_plan_json));
  candidate.set_proposer(absl::StrCat("synth:", row.family));
  for (const auto& [name, value] : config.values()) (*candidate.mutable_params())[name] = value;
  return candidate;
}

// The random method's stream for one target and seed: valid configs in a seeded uniform
// order, the first `n` distinct kernels.
absl::StatusOr<std::vector<v1::Candidate>> RandomStream(const Row& row, uint64_t seed, int n) {
  std::vector<size_t> order(row.valid.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  synth::SeededRng rng(DeriveSeed(seed, absl::StrCat("random:", row.anchor.target.id()), 0));
  rng.Shuffle(order);
  std::vector<v1::Candidate> out;
  std::set<std::string> ids;
  for (size_t i = 0; i < order.size() && static_cast<int>(out.size()) < n; ++i) {
    absl::StatusOr<v1::Candidate> c = CandidateFor(row, row.valid[order[i]]);
    if (!c.ok()) {
      return absl::InternalError(absl::StrCat("Generate(", row.valid[order[i]].ToString(),
                                              ") failed: ", c.status().message()));
    }
    if (ids.insert(c->id()).second) out.push_back(*std::move(c));
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Results.

struct Eval {
  v1::Verdict verdict = v1::VERDICT_UNSPECIFIED;
  bool compiled = false;
  double speedup = 0;  // PASS only
  double candidate_s = 0, eager_s = 0, floor_s = 0;
  std::string config;   // "name=value ..."
  std::string message;  // why it failed
  int depth = 0;        // MCTS: 1 for a child of the root
};

Eval EvalOf(const v1::EvaluatedCandidate& e, int depth) {
  Eval out;
  out.verdict = e.evaluation().verdict();
  out.compiled = e.compile().status() == v1::COMPILE_OK;
  if (out.verdict == v1::PASS) out.speedup = e.evaluation().speedup();
  out.candidate_s = e.evaluation().candidate().median_s();
  out.eager_s = e.evaluation().eager().median_s();
  out.floor_s = e.evaluation().floor_s();
  std::vector<std::string> parts;
  for (const auto& [name, value] : std::map<std::string, std::string>(
           e.candidate().params().begin(), e.candidate().params().end())) {
    parts.push_back(absl::StrCat(name, "=", value));
  }
  out.config = absl::StrJoin(parts, " ");
  if (out.verdict != v1::PASS) {
    out.message = e.evaluation().diagnostics().message();
    if (!out.compiled) out.message = e.compile().log();
    if (out.message.size() > 300) out.message.resize(300);
    for (char& ch : out.message) {
      if (ch == '\n' || ch == '\t' || ch == '|') ch = ' ';
    }
  }
  out.depth = depth;
  return out;
}

struct MethodRun {
  std::vector<Eval> evals;  // completed, in dispatch order
  std::string note;         // why it stopped early, if it did
};

enum Method { kMcts = 0, kRandom = 1 };
constexpr const char* kMethodNames[] = {"MCTS (synth proposer)", "random sampling"};

struct SeedRuns {
  uint64_t seed = 0;
  std::vector<MethodRun> runs[2];  // [method][row]
  bool finished = false;
};

// ---------------------------------------------------------------------------------------
// The random method: a stream per target through the runner, at most `in_flight` per target
// outstanding, round robin over the targets as the scheduler does for the trees.

class RandomSampling {
 public:
  using Observer =
      std::function<void(size_t target, size_t index, const Eval& eval, double best_speedup)>;

  RandomSampling(CandidateRunner& runner, std::vector<v1::Target> targets,
                 std::vector<std::vector<v1::Candidate>> streams, int in_flight,
                 std::function<bool()> time_over, Observer observer)
      : runner_(runner),
        targets_(std::move(targets)),
        streams_(std::move(streams)),
        in_flight_cap_(std::max(1, in_flight)),
        time_over_(std::move(time_over)),
        observer_(std::move(observer)),
        results_(targets_.size()),
        next_(targets_.size(), 0),
        in_flight_(targets_.size(), 0),
        best_(targets_.size(), 0.0) {
    for (size_t t = 0; t < targets_.size(); ++t) results_[t].resize(streams_[t].size());
  }

  // Blocks until every submitted candidate is back. The runner's own failure stops it.
  absl::Status Run() {
    while (true) {
      std::vector<std::pair<size_t, size_t>> submit;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (error_.ok() && !time_over_()) {
          for (size_t t = 0; t < targets_.size(); ++t) {
            while (in_flight_[t] < in_flight_cap_ && next_[t] < streams_[t].size()) {
              submit.emplace_back(t, next_[t]++);
              ++in_flight_[t];
            }
          }
        }
        if (submit.empty()) {
          int outstanding = 0;
          for (int n : in_flight_) outstanding += n;
          if (outstanding == 0) {
            stopped_early_ = time_over_() || !error_.ok();
            break;
          }
          changed_.wait_for(lock, std::chrono::seconds(1));
          continue;
        }
      }
      // Outside the lock: a runner may call back synchronously.
      for (const auto& [t, i] : submit) {
        runner_.Run(targets_[t], streams_[t][i], RunOptions{},
                    [this, t = t, i = i](absl::StatusOr<RunOutcome> outcome) {
                      Deliver(t, i, std::move(outcome));
                    });
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

  // Per target: the completed prefix, in dispatch order.
  std::vector<MethodRun> Snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<MethodRun> out(targets_.size());
    for (size_t t = 0; t < targets_.size(); ++t) {
      for (const std::optional<Eval>& e : results_[t]) {
        if (!e) break;
        out[t].evals.push_back(*e);
      }
      if (stopped_early_ && out[t].evals.size() < streams_[t].size()) {
        out[t].note = error_.ok() ? "time budget spent" : std::string(error_.message());
      }
    }
    return out;
  }

 private:
  void Deliver(size_t t, size_t i, absl::StatusOr<RunOutcome> outcome) {
    std::optional<Eval> eval;
    double best = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      --in_flight_[t];
      if (!outcome.ok()) {
        if (error_.ok()) error_ = outcome.status();
      } else {
        v1::EvaluatedCandidate e;
        *e.mutable_candidate() = streams_[t][i];
        *e.mutable_compile() = outcome->compile;
        *e.mutable_evaluation() = outcome->evaluation;
        e.mutable_evaluation()->set_verdict(EffectiveVerdict(*outcome));
        results_[t][i] = EvalOf(e, 0);
        best_[t] = std::max(best_[t], results_[t][i]->speedup);
        eval = results_[t][i];
        best = best_[t];
      }
    }
    changed_.notify_all();
    if (eval && observer_) observer_(t, i, *eval, best);
  }

  CandidateRunner& runner_;
  std::vector<v1::Target> targets_;
  std::vector<std::vector<v1::Candidate>> streams_;
  int in_flight_cap_;
  std::function<bool()> time_over_;
  Observer observer_;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::vector<std::optional<Eval>>> results_;
  std::vector<size_t> next_;
  std::vector<int> in_flight_;
  std::vector<double> best_;
  absl::Status error_;
  bool stopped_early_ = false;
};

// The MCTS's completed evaluations of one tree, in dispatch order.
MethodRun TreeRun(const SearchTree& tree) {
  std::vector<std::pair<int64_t, int>> done;
  for (int i = 1; i < tree.size(); ++i) {
    const SearchTreeNode& n = tree.node(i);
    if (!n.pending && n.dispatch_sequence >= 0) done.emplace_back(n.dispatch_sequence, i);
  }
  std::sort(done.begin(), done.end());
  MethodRun run;
  for (const auto& [sequence, i] : done) {
    int depth = 0;
    for (int v = i; v > SearchTree::kRoot; v = tree.node(v).parent) ++depth;
    run.evals.push_back(EvalOf(tree.node(i).evaluated, depth));
  }
  return run;
}

// ---------------------------------------------------------------------------------------
// Runners.

// The real lane, timed: how long the GPU is held per target is what sizes this benchmark's
// budget.
class TimedLane : public GpuLane {
 public:
  explicit TimedLane(std::unique_ptr<EvaluatorGpuLane> lane) : lane_(std::move(lane)) {}

  v1::EvaluationResult Evaluate(const v1::EvaluateRequest& request,
                                const std::string& captured_inputs) override {
    Clock::time_point t = Clock::now();
    v1::EvaluationResult r = lane_->Evaluate(request, captured_inputs);
    std::lock_guard<std::mutex> lock(mu_);
    Busy& b = busy_[request.target().id()];
    b.seconds += Seconds(t);
    ++b.evaluations;
    for (const auto& [phase, seconds] : r.phase_seconds()) b.phase_seconds[phase] += seconds;
    return r;
  }
  std::string Name() const override { return lane_->Name(); }

  struct Busy {
    double seconds = 0;
    int evaluations = 0;
    std::map<std::string, double> phase_seconds;  // the evaluator's phases, summed
  };
  std::map<std::string, Busy> busy() const {
    std::lock_guard<std::mutex> lock(mu_);
    return busy_;
  }

 private:
  std::unique_ptr<EvaluatorGpuLane> lane_;
  mutable std::mutex mu_;
  std::map<std::string, Busy> busy_;
};

// Where the evaluator spent a lane's time, per evaluation: ": prepare 0.05, timing 0.40, ...".
std::string PhaseShares(const TimedLane::Busy& b) {
  if (b.phase_seconds.empty() || b.evaluations == 0) return "";
  std::vector<std::string> parts;
  for (const auto& [phase, seconds] : b.phase_seconds) {
    parts.push_back(absl::StrFormat("%s %.2f", phase, seconds / b.evaluations));
  }
  return absl::StrCat(": ", absl::StrJoin(parts, ", "));
}

// --compile-only only. No GPU can validate or time anything here, and the MCTS never expands
// a candidate that did not pass: scored NOT_EVALUATED, its tree would only ever widen the
// root and the stream compiled here would not be the one a GPU run makes. So each compiled
// candidate gets a simulated PASS whose "speedup" is the cost-model prior's (2 x floor /
// estimate), which steers the tree into refinements as measured times would. Nothing it
// produces is reported as a speedup.
class SimulatedPriorRunner : public CandidateRunner {
 public:
  SimulatedPriorRunner(CandidateRunner& compile_only, const std::vector<Row>& rows,
                       const synth::GpuModel& gpu)
      : inner_(compile_only), gpu_(gpu) {
    for (const Row& r : rows) {
      if (r.generator) generators_[r.anchor.target.id()] = r.generator.get();
    }
  }

  void Run(const v1::Target& target, const v1::Candidate& candidate, const RunOptions& options,
           Done done) override {
    const KernelGenerator* generator =
        generators_.count(target.id()) ? generators_.at(target.id()) : nullptr;
    const double floor_s = generator ? generator->MinBytes() / gpu_.bandwidth_bytes_per_s : 0;
    std::map<std::string, std::string> params(candidate.params().begin(), candidate.params().end());
    inner_.Run(target, candidate, options,
               [generator, floor_s, params, done](absl::StatusOr<RunOutcome> outcome) {
                 if (outcome.ok() && outcome->compile.status() == v1::COMPILE_OK && generator) {
                   absl::StatusOr<Config> config = generator->Space().FromMap(params);
                   const double estimate =
                       config.ok() ? generator->EstimateSeconds(generator->Canonicalize(*config))
                                   : 0;
                   if (estimate > 0) {
                     outcome->evaluation.set_verdict(v1::PASS);
                     outcome->evaluation.set_speedup(2 * floor_s / estimate);
                     outcome->evaluation.mutable_diagnostics()->set_message(
                         "simulated from the cost-model prior (--compile-only)");
                   }
                 }
                 done(std::move(outcome));
               });
  }

 private:
  CandidateRunner& inner_;
  synth::GpuModel gpu_;
  std::map<std::string, const KernelGenerator*> generators_;
};

// --replay: every candidate is answered from an exhaustive kforge-synth-sweep's --details —
// the verdict and time its quick pass recorded for that config (one input set, a few
// L2-flushed launches) and the row's eager time by the same method — with no compile and no
// GPU. What the search and the random method then find after k evaluations, against the best
// the whole space holds, measures the proposer's prior and the tree policy, over as many
// seeds as wanted, in seconds. Nothing it prints is a new measurement. Runs synchronously:
// each evaluation is back before the next is chosen, where a GPU run keeps --in-flight out.
class ReplayRunner : public CandidateRunner {
 public:
  struct RowTimes {
    const KernelGenerator* generator = nullptr;
    std::map<std::string, bench::DetailsLine> lines;  // by Config::ToString()
    double eager_s = 0, floor_s = 0;
    double best_s = 0;        // the fastest PASS of the sweep
    std::string best_config;  // ... and its config
  };

  // Reads `dir` for every searchable row; a row whose sweep is missing or not exhaustive gets
  // its `error` set (a replay of part of a space would credit configs nobody timed).
  ReplayRunner(const std::string& dir, std::vector<Row>& rows, const synth::GpuModel& gpu) {
    for (Row& row : rows) {
      if (!row.error.empty()) continue;
      absl::StatusOr<std::map<std::string, bench::DetailsLine>> lines =
          bench::ReadFinishedDetails(dir, row.anchor.id);
      absl::StatusOr<double> eager_us = bench::ReadEagerUs(dir, row.anchor.id);
      if (!lines.ok() || !eager_us.ok()) {
        row.error = std::string((!lines.ok() ? lines.status() : eager_us.status()).message());
        continue;
      }
      size_t covered = 0;
      for (const Config& c : row.valid) covered += lines->count(c.ToString());
      if (covered < row.valid.size()) {
        row.error = absl::StrFormat(
            "--replay %s covers %d of the row's %d valid configs: replay needs an exhaustive "
            "sweep (kforge-synth-sweep --details DIR --resume until it covers them all)",
            dir, covered, row.valid.size());
        continue;
      }
      RowTimes t;
      t.generator = row.generator.get();
      t.eager_s = *eager_us * 1e-6;
      t.floor_s = row.generator->MinBytes() / gpu.bandwidth_bytes_per_s;
      for (const auto& [config, line] : *lines) {
        if (line.quick_verdict == "PASS" && line.quick_us > 0 &&
            (t.best_s == 0 || line.quick_us * 1e-6 < t.best_s)) {
          t.best_s = line.quick_us * 1e-6;
          t.best_config = config;
        }
      }
      t.lines = *std::move(lines);
      rows_[row.anchor.target.id()] = std::move(t);
    }
  }

  const RowTimes* Times(const std::string& target_id) const {
    auto it = rows_.find(target_id);
    return it == rows_.end() ? nullptr : &it->second;
  }

  void Run(const v1::Target& target, const v1::Candidate& candidate, const RunOptions&,
           Done done) override {
    RunOutcome outcome;
    const RowTimes* t = Times(target.id());
    if (t == nullptr) {
      done(absl::FailedPreconditionError(absl::StrCat("--replay has no times for ", target.id())));
      return;
    }
    std::map<std::string, std::string> params(candidate.params().begin(),
                                              candidate.params().end());
    absl::StatusOr<Config> config = t->generator->Space().FromMap(params);
    const bench::DetailsLine* line = nullptr;
    if (config.ok()) {
      auto it = t->lines.find(t->generator->Canonicalize(*config).ToString());
      if (it != t->lines.end()) line = &it->second;
    }
    if (line == nullptr) {  // a proposal outside the enumerated space: the sweep never saw it
      outcome.compile.set_status(v1::COMPILE_OK);
      outcome.evaluation.set_verdict(v1::NOT_EVALUATED);
      outcome.evaluation.mutable_diagnostics()->set_message(
          "--replay: not a valid config of the swept space");
      done(std::move(outcome));
      return;
    }
    v1::CompileStatus compiled = v1::COMPILE_OK;
    if (!v1::CompileStatus_Parse(line->compile, &compiled)) compiled = v1::COMPILE_FAILED;
    outcome.compile.set_status(compiled);
    v1::Verdict verdict = v1::NOT_EVALUATED;
    if (!v1::Verdict_Parse(line->quick_verdict, &verdict)) verdict = v1::NOT_EVALUATED;
    outcome.evaluation.set_verdict(verdict);
    outcome.evaluation.mutable_diagnostics()->set_message(
        absl::StrCat("replayed quick pass", line->message.empty() ? "" : ": ", line->message));
    outcome.evaluation.mutable_eager()->set_median_s(t->eager_s);
    outcome.evaluation.set_floor_s(t->floor_s);
    if (verdict == v1::PASS && line->quick_us > 0) {
      outcome.evaluation.mutable_candidate()->set_median_s(line->quick_us * 1e-6);
      outcome.evaluation.set_speedup(t->eager_s / (line->quick_us * 1e-6));
    }
    done(std::move(outcome));
  }

 private:
  std::map<std::string, RowTimes> rows_;
};

// ---------------------------------------------------------------------------------------
// Output.

// One progress line's outcome. --compile-only's "speedups" are the prior's, and say so.
std::string OutcomeText(v1::Verdict verdict, bool compiled, double speedup, double best,
                        bool compile_only) {
  if (compile_only) {
    return compiled ? absl::StrFormat("compiled (prior-simulated %.2f×, best %.2f×)", speedup, best)
                    : "COMPILE FAILED";
  }
  return absl::StrFormat("%-14s %6s (best %s)", v1::Verdict_Name(verdict),
                         speedup > 0 ? absl::StrFormat("%.2f×", speedup) : "",
                         best > 0 ? absl::StrFormat("%.2f×", best) : "—");
}

struct TableContext {
  bool compile_only = false;
  const ReplayRunner* replay = nullptr;  // --replay: cells also say how near the sweep's best
  bool final = false;
  v1::GpuInfo gpu;
  int evaluations = 0;
  int in_flight = 0;
  double total_s = 0;
  double budget_s = 0;
  std::map<std::string, TimedLane::Busy> busy;  // by target id
};

std::vector<int> Checkpoints(int n) {
  std::vector<int> out;
  for (int k : {10, 25, 50}) {
    if (k < n) out.push_back(k);
  }
  out.push_back(n);
  return out;
}

// Best PASS speedup among the first k evaluations; 0 when none passed.
double BestAfter(const MethodRun& run, int k) {
  double best = 0;
  for (int i = 0; i < k && i < static_cast<int>(run.evals.size()); ++i) {
    best = std::max(best, run.evals[i].speedup);
  }
  return best;
}

std::string CompileOnlyTable(const std::vector<Row>& rows, const std::vector<SeedRuns>& seeds,
                             const TableContext& ctx) {
  std::string out = absl::StrFormat(
      "Search benchmark, --compile-only (no GPU: nothing validated or timed; the MCTS was "
      "steered by the cost-model prior), %d evaluations per target and method, %zu seed(s).\n\n",
      ctx.evaluations, seeds.size());
  absl::StrAppend(&out,
                  "| target | method | candidates | compiled | compile failed | deepest node | "
                  "first compile failure |\n| --- | --- | ---: | ---: | ---: | ---: | --- |\n");
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int m : {kMcts, kRandom}) {
      if (!rows[r].error.empty()) {
        absl::StrAppend(&out, "| ", rows[r].anchor.label, " | ", kMethodNames[m], " | ",
                        rows[r].error, " | | | | |\n");
        continue;
      }
      int candidates = 0, compiled = 0, failed = 0, depth = 0;
      std::string failure;
      for (const SeedRuns& s : seeds) {
        if (s.runs[m].size() <= r) continue;
        for (const Eval& e : s.runs[m][r].evals) {
          ++candidates;
          (e.compiled ? compiled : failed)++;
          depth = std::max(depth, e.depth);
          if (!e.compiled && failure.empty()) failure = absl::StrCat(e.config, ": ", e.message);
        }
      }
      absl::StrAppendFormat(&out, "| %s | %s | %d | %d | %d | %s | %s |\n", rows[r].anchor.label,
                            kMethodNames[m], candidates, compiled, failed,
                            m == kMcts ? std::to_string(depth) : "—",
                            failure.empty() ? "—" : failure.substr(0, 200));
    }
  }
  absl::StrAppendFormat(&out,
                        "\nTotal %.1f s. deepest node: 1 = a root proposal, 2 = its refinement, "
                        "...\n",
                        ctx.total_s);
  return out;
}

std::string Us(double s) { return s > 0 ? absl::StrFormat("%.1f", s * 1e6) : "—"; }

std::string Table(const std::vector<Row>& rows, const std::vector<SeedRuns>& seeds,
                  const TableContext& ctx) {
  if (ctx.compile_only) return CompileOnlyTable(rows, seeds, ctx);
  const std::vector<int> checkpoints = Checkpoints(ctx.evaluations);
  std::string out = absl::StrFormat(
      "Search benchmark on %s (%s, %d SMs)%s: best speedup over eager after k evaluations, "
      "MCTS (SearchDriver + synthesizer proposer) beside uniform random sampling of the same "
      "family space; %s. %zu seed(s)%s; %d in flight per target and method.\n\n",
      ctx.gpu.name(), ctx.gpu.arch(), ctx.gpu.sm_count(), ctx.final ? "" : " — IN PROGRESS",
      ctx.replay ? "every evaluation replays the exhaustive sweep's recorded quick pass "
                   "(percent: of the sweep's best speedup; evaluations are answered one at a "
                   "time)"
                 : "every evaluation is the worker's full validation + timing (default policy, "
                   "eager interleaved, median)",
      seeds.size(),
      seeds.size() > 1    ? ": mean over seeds (min–max)"
      : seeds.size() == 1 ? absl::StrCat(" (", seeds[0].seed, ")")
                          : std::string(),
      ctx.in_flight);
  absl::StrAppend(&out, "| target | method |");
  for (int k : checkpoints) absl::StrAppend(&out, " after ", k, " |");
  absl::StrAppend(&out, " evaluations that passed |\n| --- | --- |");
  for (size_t i = 0; i < checkpoints.size(); ++i) absl::StrAppend(&out, " ---: |");
  absl::StrAppend(&out, " ---: |\n");
  bool short_runs = false;
  std::vector<std::string> notes;
  for (size_t r = 0; r < rows.size(); ++r) {
    const Row& row = rows[r];
    std::vector<double> eager_s;
    double floor_s = 0;
    for (int m : {kMcts, kRandom}) {
      absl::StrAppend(&out, "| ", row.anchor.label, " | ", kMethodNames[m], " |");
      if (!row.error.empty()) {
        for (size_t i = 0; i < checkpoints.size(); ++i) absl::StrAppend(&out, " — |");
        absl::StrAppend(&out, " ", row.error, " |\n");
        continue;
      }
      std::vector<const MethodRun*> runs;
      for (const SeedRuns& s : seeds) {
        if (s.runs[m].size() > r) runs.push_back(&s.runs[m][r]);
      }
      for (int k : checkpoints) {
        std::vector<double> bests;
        int fewer = 0;
        for (const MethodRun* run : runs) {
          if (static_cast<int>(run->evals.size()) < k) ++fewer;
          const double b = BestAfter(*run, k);
          if (b > 0) bests.push_back(b);
        }
        std::string cell = "—";
        if (!bests.empty()) {
          double sum = 0;
          for (double b : bests) sum += b;
          cell = absl::StrFormat("%.2f×", sum / bests.size());
          if (const ReplayRunner::RowTimes* t =
                  ctx.replay ? ctx.replay->Times(row.anchor.target.id()) : nullptr) {
            absl::StrAppendFormat(&cell, " (%.0f%%)",
                                  100 * sum / bests.size() * t->best_s / t->eager_s);
          }
          if (runs.size() > 1) {
            absl::StrAppendFormat(&cell, " (%.2f–%.2f)",
                                  *std::min_element(bests.begin(), bests.end()),
                                  *std::max_element(bests.begin(), bests.end()));
          }
          if (bests.size() < runs.size()) {
            absl::StrAppendFormat(&cell, " [%d of %d seeds passed]", bests.size(), runs.size());
          }
        }
        if (fewer > 0) {
          absl::StrAppend(&cell, "*");
          short_runs = true;
        }
        absl::StrAppend(&out, " ", cell, " |");
      }
      int passed = 0, done = 0, depth = 0;
      const Eval* best = nullptr;
      for (const MethodRun* run : runs) {
        for (const Eval& e : run->evals) {
          ++done;
          depth = std::max(depth, e.depth);
          if (e.verdict == v1::PASS) {
            ++passed;
            if (!best || e.speedup > best->speedup) best = &e;
          }
          if (e.eager_s > 0) eager_s.push_back(e.eager_s);
          if (e.floor_s > 0) floor_s = e.floor_s;
        }
        if (!run->note.empty()) {
          notes.push_back(absl::StrCat(row.anchor.id, ", ", kMethodNames[m], ": stopped after ",
                                       run->evals.size(), " evaluations: ", run->note));
        }
      }
      if (runs.size() > 1) {
        absl::StrAppendFormat(&out, " %d of %d (%zu seeds) |\n", passed, done, runs.size());
      } else {
        absl::StrAppendFormat(&out, " %d of %d |\n", passed, done);
      }
      std::map<std::string, int> failures;
      for (const MethodRun* run : runs) {
        for (const Eval& e : run->evals) {
          if (e.verdict != v1::PASS) ++failures[v1::Verdict_Name(e.verdict)];
        }
      }
      std::vector<std::string> failure_text;
      for (const auto& [verdict, n] : failures)
        failure_text.push_back(absl::StrCat(verdict, " ", n));
      notes.push_back(absl::StrCat(
          row.anchor.id, ", ", kMethodNames[m], ": ",
          best ? absl::StrFormat("best %.2f× = %s µs (%s)", best->speedup, Us(best->candidate_s),
                                 best->config)
               : std::string("nothing passed"),
          failure_text.empty() ? "" : absl::StrCat("; failed: ", absl::StrJoin(failure_text, ", ")),
          m == kMcts && depth > 0 ? absl::StrCat("; deepest tree node ", depth) : ""));
    }
    if (const ReplayRunner::RowTimes* t =
            ctx.replay ? ctx.replay->Times(row.anchor.target.id()) : nullptr) {
      notes.push_back(absl::StrFormat("%s: the sweep's best %.2f× = %s µs (%s) of %d configs",
                                      row.anchor.id, t->eager_s / t->best_s, Us(t->best_s),
                                      t->best_config, t->lines.size()));
    }
    if (!eager_s.empty()) {
      std::sort(eager_s.begin(), eager_s.end());
      const auto busy = ctx.busy.find(row.anchor.target.id());
      notes.push_back(absl::StrFormat(
          "%s: eager %s µs (%s), floor %s µs%s", row.anchor.id, Us(eager_s[eager_s.size() / 2]),
          ctx.replay ? "the sweep's, by its quick-pass method"
                     : "median of its evaluations' interleaved eager timings",
          Us(floor_s),
          busy == ctx.busy.end()
              ? ""
              : absl::StrFormat("; GPU lane held %.1f s for %d evaluations (%.2f s each%s)",
                                busy->second.seconds, busy->second.evaluations,
                                busy->second.seconds / std::max(1, busy->second.evaluations),
                                PhaseShares(busy->second))));
    }
  }
  absl::StrAppendFormat(&out,
                        "\n\"after k\": the best speedup over eager among the first k evaluations "
                        "in dispatch order (— when none had passed). Total %.0f s%s.",
                        ctx.total_s,
                        ctx.budget_s > 0 ? absl::StrCat(", time budget ", ctx.budget_s, " s") : "");
  if (short_runs) {
    absl::StrAppend(&out, " *: fewer than k evaluations were made (see below).");
  }
  absl::StrAppend(&out, "\n\n");
  for (const std::string& n : notes) absl::StrAppend(&out, "- ", n, "\n");
  return out;
}

// Every evaluation of row `r`, both methods and all seeds, in dispatch order, tab-separated.
// --compile-only: the verdict column says what compiled, the speedup column holds the prior's.
absl::Status WriteDetails(const Row& row, size_t r, const std::vector<SeedRuns>& seeds,
                          bool compile_only, const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string text = absl::StrCat("method\tseed\tindex\tdepth\tcompiled\tverdict\t",
                                  compile_only ? "prior_speedup" : "speedup",
                                  "\tcandidate_us\teager_us\tconfig\tmessage\n");
  for (const SeedRuns& s : seeds) {
    for (int m : {kMcts, kRandom}) {
      if (s.runs[m].size() <= r) continue;
      const std::vector<Eval>& evals = s.runs[m][r].evals;
      for (size_t i = 0; i < evals.size(); ++i) {
        const Eval& e = evals[i];
        absl::StrAppendFormat(&text, "%s\t%d\t%d\t%d\t%d\t%s\t%.4f\t%.3f\t%.3f\t%s\t%s\n",
                              m == kMcts ? "mcts" : "random", s.seed, i + 1, e.depth,
                              e.compiled ? 1 : 0,
                              compile_only ? (e.compiled ? "COMPILED" : "COMPILE_ERROR")
                                           : v1::Verdict_Name(e.verdict),
                              e.speedup, e.candidate_s * 1e6, e.eager_s * 1e6, e.config, e.message);
      }
    }
  }
  return WriteFileAtomically(dir / absl::StrCat(row.anchor.id, ".tsv"), text);
}

// ---------------------------------------------------------------------------------------

int Main(int argc, char** argv) {
  CLI::App app{
      "kforge-bench-search: MCTS over the synthesizer beside random sampling of its space, on "
      "GPU.md's anchor rows"};
  std::string rows_filter = kDefaultRows, out_path, cache_dir, details_dir, replay_dir;
  int evaluations = 50, seeds = 1, in_flight = 2, compile_threads = 0, gpu_index = 0;
  uint64_t seed = 1, input_seed = 1234;
  double budget_s = 0;
  bool compile_only = false;
  app.add_option("--rows", rows_filter,
                 "comma-separated anchor row ids or 1-based positions (kforge-synth-sweep's)")
      ->capture_default_str();
  app.add_option("--evaluations", evaluations, "evaluations per target and method")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--seeds", seeds, "seeds per method: --seed, --seed + 1, ...")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--seed", seed, "first search seed")->capture_default_str();
  app.add_option("--input-seed", input_seed, "seed of the targets' random inputs")
      ->capture_default_str();
  app.add_option("--in-flight", in_flight,
                 "evaluations outstanding per target for each method (the MCTS's per-target cap)")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  app.add_option("--time-budget-s", budget_s,
                 "stop dispatching once this many seconds have passed (both methods, all seeds); "
                 "0: no limit")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--compile-threads", compile_threads, "compiles in flight (0: cores / 2, 2..8)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--gpu", gpu_index, "the GPU to evaluate on")->check(CLI::NonNegativeNumber);
  auto* compile_only_flag = app.add_flag(
      "--compile-only", compile_only,
      "no GPU: propose and compile both methods' candidate streams and count them");
  app.add_option("--replay", replay_dir,
                 "no GPU, no compile: answer every candidate from this exhaustive "
                 "kforge-synth-sweep --details directory (its quick-pass verdicts and times, "
                 "<row>.eager-us) and say how near each method gets to the sweep's best")
      ->excludes(compile_only_flag)
      ->check(CLI::ExistingDirectory);
  app.add_option("--out", out_path,
                 "also write the table to this file (rewritten as results come in)");
  app.add_option(
      "--details", details_dir,
      "write every evaluation (method, seed, verdict, speedup, config) as DIR/<row>.tsv");
  app.add_option("--cache", cache_dir,
                 "compile and evaluation cache directory (default: a temp dir, removed)");
  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<std::vector<AnchorRow>> anchors = bench::SelectRows(rows_filter, kTargetIdPrefix);
  if (!anchors.ok()) {
    std::fprintf(stderr, "%s\n", std::string(anchors.status().message()).c_str());
    return 2;
  }
  if (anchors->empty()) {
    std::fprintf(stderr, "--rows '%s' names no row; pass ids such as %s\n", rows_filter.c_str(),
                 kDefaultRows);
    return 2;
  }
  if (!out_path.empty()) {
    std::error_code ec;
    const std::filesystem::path parent = std::filesystem::path(out_path).parent_path();
    if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
      std::fprintf(stderr, "--out %s: directory %s does not exist; create it first\n",
                   out_path.c_str(), parent.string().c_str());
      return 2;
    }
  }

  const bool temp_cache = cache_dir.empty();
  if (temp_cache) cache_dir = absl::StrCat("/tmp/kforge-bench-search-cache-", ::getpid());
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    }
  } cleanup{temp_cache ? cache_dir : ""};
  int open_failed = 0;
  std::unique_ptr<bench::BenchCompiler> compile =
      bench::OpenBenchCompiler(cache_dir, /*cache_compiles=*/true, &open_failed);
  if (!compile) return open_failed;

  // The GPU first: the synthesizer and the random method bind the families for it.
  start_time = Clock::now();
  v1::GpuInfo gpu;
  std::vector<std::unique_ptr<GpuLane>> lanes;
  TimedLane* timed_lane = nullptr;
  const bool replay = !replay_dir.empty();
  if (!compile_only && !replay) {
    absl::StatusOr<std::unique_ptr<EvaluatorGpuLane>> lane =
        EvaluatorGpuLane::Create(gpu_index, compile->compiler.get(), compile->store.get());
    if (!lane.ok()) {
      std::fprintf(stderr, "%s\n", std::string(lane.status().message()).c_str());
      return 3;
    }
    Progress("starting the evaluator on GPU %d ...", gpu_index);
    absl::StatusOr<v1::GpuInfo> info = (*lane)->Info();
    if (!info.ok()) {
      std::fprintf(stderr, "no GPU to evaluate on (%s); --compile-only runs without one\n",
                   std::string(info.status().message()).c_str());
      return 3;
    }
    gpu = *info;
    auto timed = std::make_unique<TimedLane>(*std::move(lane));
    timed_lane = timed.get();
    lanes.push_back(std::move(timed));
  } else {
    gpu.set_arch("sm_90");  // the synthesizer's H200 defaults for the rest
    gpu.set_sm_count(synth::GpuModel{}.sm_count);
    gpu.set_name(replay ? "none (--replay of an H200 sweep)" : "none (--compile-only)");
  }
  const synth::GpuModel model = synth::GpuModel::FromInfo(gpu);

  std::vector<Row> rows;
  for (AnchorRow& a : *anchors) {
    Row row;
    row.anchor = std::move(a);
    std::string refusal;
    const synth::Family* family =
        synth::FamilyRegistry::Default().Find(row.anchor.target, &refusal);
    if (family == nullptr) {
      row.error = absl::StrCat("no synthesizer family covers it: ", refusal);
    } else {
      row.family = family->Name();
      absl::StatusOr<std::unique_ptr<KernelGenerator>> generator =
          family->Bind(row.anchor.target, model);
      if (!generator.ok()) {
        row.error = absl::StrCat(row.family, " refuses it: ", generator.status().message());
      } else {
        row.generator = *std::move(generator);
        absl::StatusOr<bench::Enumeration> e = bench::Enumerate(*row.generator);
        if (!e.ok()) {
          row.error = absl::StrCat("cannot enumerate its space: ", e.status().message());
        } else {
          row.valid = std::move(e->valid);
        }
      }
    }
    if (row.error.empty() && !compile_only && !replay) {
      absl::StatusOr<std::string> inputs = bench::MakeInputs(row.anchor, input_seed);
      if (!inputs.ok()) {
        row.error = absl::StrCat("inputs: ", inputs.status().message());
      } else {
        row.inputs = *std::move(inputs);
      }
    }
    Progress("%s: %s", row.anchor.id,
             row.error.empty() ? absl::StrFormat("%s family, %d valid canonical configs",
                                                 row.family, row.valid.size())
                               : row.error);
    rows.push_back(std::move(row));
  }

  // One runner for both methods: one compile pool and cache, one evaluator on the GPU.
  std::map<std::string, const std::string*> inputs_by_target;
  for (const Row& r : rows) inputs_by_target[r.anchor.target.id()] = &r.inputs;
  EmbeddedRunnerOptions runner_options;
  runner_options.compile.set_arch(gpu.arch());
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  runner_options.compile_threads =
      compile_threads > 0 ? compile_threads : std::clamp(cpus / 2, 2, 8);
  Compiler* compile_with = compile->compiler.get();
  EmbeddedRunner embedded(
      [compile_with](const v1::Candidate& candidate, const v1::CompileOptions& options) {
        return compile_with->Compile(candidate, options);
      },
      [&inputs_by_target](const v1::Target& target) -> absl::StatusOr<std::string> {
        auto it = inputs_by_target.find(target.id());
        if (it == inputs_by_target.end() || it->second->empty()) {
          return absl::NotFoundError(absl::StrCat("no inputs for target ", target.id()));
        }
        return *it->second;
      },
      std::move(lanes), runner_options);
  std::unique_ptr<SimulatedPriorRunner> simulated;
  if (compile_only) simulated = std::make_unique<SimulatedPriorRunner>(embedded, rows, model);
  std::unique_ptr<ReplayRunner> replayed;
  if (replay) {
    replayed = std::make_unique<ReplayRunner>(replay_dir, rows, model);
    for (const Row& row : rows) {
      if (!row.error.empty()) Progress("%s: not replayed: %s", row.anchor.id, row.error);
    }
  }
  CandidateRunner& runner = compile_only ? static_cast<CandidateRunner&>(*simulated)
                            : replay     ? static_cast<CandidateRunner&>(*replayed)
                                         : static_cast<CandidateRunner&>(embedded);

  auto time_over = [&] { return budget_s > 0 && Seconds(start_time) >= budget_s; };
  TableContext ctx;
  ctx.compile_only = compile_only;
  ctx.replay = replayed.get();
  ctx.gpu = gpu;
  ctx.evaluations = evaluations;
  ctx.in_flight = in_flight;
  ctx.budget_s = budget_s;
  std::vector<SeedRuns> results;
  auto publish = [&](bool final) {
    ctx.final = final;
    ctx.total_s = Seconds(start_time);
    if (timed_lane) ctx.busy = timed_lane->busy();
    const std::string table = Table(rows, results, ctx);
    if (final) {
      std::printf("%s", table.c_str());
      std::fflush(stdout);
    }
    if (!out_path.empty()) {
      absl::Status s = WriteFileAtomically(out_path, table);
      if (!s.ok()) std::fprintf(stderr, "--out: %s\n", std::string(s.message()).c_str());
    }
    if (!details_dir.empty()) {
      for (size_t r = 0; r < rows.size(); ++r) {
        if (!rows[r].error.empty()) continue;
        absl::Status s = WriteDetails(rows[r], r, results, compile_only, details_dir);
        if (!s.ok()) std::fprintf(stderr, "--details: %s\n", std::string(s.message()).c_str());
      }
    }
  };

  std::vector<size_t> searchable;  // rows with a space, in row order
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].error.empty()) searchable.push_back(r);
  }
  int exit_code = 0;
  for (int s = 0; s < seeds && !searchable.empty(); ++s) {
    if (time_over()) break;
    results.push_back(SeedRuns{});
    SeedRuns& current = results.back();
    current.seed = seed + static_cast<uint64_t>(s);
    for (int m : {kMcts, kRandom}) current.runs[m].assign(rows.size(), MethodRun{});

    // Random: the streams first (CPU only), then a thread feeding the runner.
    std::vector<v1::Target> targets;
    std::vector<std::vector<v1::Candidate>> streams;
    for (size_t r : searchable) {
      absl::StatusOr<std::vector<v1::Candidate>> stream =
          RandomStream(rows[r], current.seed, evaluations);
      if (!stream.ok()) {
        std::fprintf(stderr, "%s: %s\n", rows[r].anchor.id.c_str(),
                     std::string(stream.status().message()).c_str());
        return 1;
      }
      targets.push_back(rows[r].anchor.target);
      streams.push_back(*std::move(stream));
    }
    RandomSampling random(
        runner, targets, std::move(streams), in_flight, time_over,
        [&](size_t t, size_t i, const Eval& e, double best) {
          Progress("seed %d random %-18s #%-3d %s", current.seed, rows[searchable[t]].anchor.id,
                   i + 1, OutcomeText(e.verdict, e.compiled, e.speedup, best, compile_only));
        });

    // MCTS: the real driver over all the targets at once, on this thread.
    SearchDriverOptions options;
    options.seed = current.seed;
    options.max_in_flight = in_flight * static_cast<int>(searchable.size());
    options.max_reconfirmations = 0;  // the curve is the search's own view
    options.scheduler.iterations_per_target = evaluations;
    options.scheduler.max_in_flight_per_target = in_flight;
    // Both methods spend every evaluation: no stop near the floor.
    options.scheduler.near_floor_factor = 0;
    if (budget_s > 0) options.time_budget_s = std::max(1e-3, budget_s - Seconds(start_time));
    options.propose.gpu = gpu;
    options.propose.proposer = "synth";
    options.propose.job_id = "search-bench";
    synth::Synthesizer proposer;
    SearchDriver driver(proposer, runner, options);
    for (size_t r : searchable) {
      absl::StatusOr<size_t> added = driver.AddTarget(rows[r].anchor.target);
      if (!added.ok()) {
        std::fprintf(stderr, "%s\n", std::string(added.status().message()).c_str());
        return 1;
      }
    }
    absl::Status random_status;
    std::thread random_thread([&] { random_status = random.Run(); });
    auto snapshot = [&](bool mcts_done, const absl::StatusOr<SearchResult>* searched) {
      std::vector<MethodRun> random_runs = random.Snapshot();
      for (size_t t = 0; t < searchable.size(); ++t) {
        const size_t r = searchable[t];
        current.runs[kRandom][r] = std::move(random_runs[t]);
        current.runs[kMcts][r] = TreeRun(driver.tree(t));
        if (mcts_done && searched != nullptr) {
          MethodRun& run = current.runs[kMcts][r];
          if (!searched->ok()) {
            run.note = std::string(searched->status().message());
          } else if (static_cast<int>(run.evals.size()) < evaluations) {
            const TargetSearchResult& tr = (**searched).targets[t];
            run.note = absl::StrCat(std::string(StopReasonName(tr.stop_reason)),
                                    tr.error.empty() ? "" : absl::StrCat(": ", tr.error));
          }
        }
      }
    };
    Clock::time_point last_publish = Clock::now();
    driver.OnProgress([&](const SearchEvent& event) {
      if (event.kind != SearchEvent::Kind::kIteration || event.latest == nullptr) return;
      const v1::EvaluationResult& e = event.latest->evaluation();
      Progress("seed %d mcts   %-18s #%-3d %s", current.seed,
               rows[searchable[event.target_index]].anchor.id, event.progress.iterations(),
               OutcomeText(e.verdict(), event.latest->compile().status() == v1::COMPILE_OK,
                           e.verdict() == v1::PASS ? e.speedup() : 0, event.progress.best_speedup(),
                           compile_only));
      if (Seconds(last_publish) > 15) {
        last_publish = Clock::now();
        snapshot(false, nullptr);
        publish(false);
      }
    });
    absl::StatusOr<SearchResult> searched = driver.Run();
    if (!searched.ok()) {
      Progress("seed %d: the search failed: %s", current.seed,
               std::string(searched.status().message()));
      exit_code = 1;
    }
    random_thread.join();
    if (!random_status.ok()) {
      Progress("seed %d: random sampling failed: %s", current.seed,
               std::string(random_status.message()));
      exit_code = 1;
    }
    snapshot(true, &searched);
    current.finished = true;
    publish(false);
    if (exit_code != 0) break;
  }
  embedded.Shutdown();
  publish(true);
  if (compile_only) {
    const EmbeddedRunnerStats stats = embedded.stats();
    Progress("%d compiles (%d from the cache), %d compiled", stats.compiles,
             stats.compile_cache_hits, stats.compiled_ok);
    for (const SeedRuns& s : results) {
      for (int m : {kMcts, kRandom}) {
        for (const MethodRun& run : s.runs[m]) {
          for (const Eval& e : run.evals) {
            if (!e.compiled) exit_code = 1;
          }
        }
      }
    }
  }
  return exit_code;
}

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) { return kforge::Main(argc, argv); }
