// TEST DOUBLES for the search tests: a proposer over a small parameter grid and a simulated
// runner whose speedup is a deterministic function of a candidate's parameters. They stand
// in for the synthesizer and the GPU evaluator, which cannot run here (no GPU), so that the
// search's own behaviour can be pinned exactly. Never use them outside tests.
#pragma once

#include <array>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "services/coordinator/search/candidate_runner.h"
#include "services/coordinator/search/seed_derivation.h"
#include "services/proposer/proposer.h"

namespace kforge::testing {

// The grid: five parameters, each an ordered list of values; a point is one index per axis.
inline const std::array<std::pair<const char*, std::vector<int>>, 5>& GridAxes() {
  static const std::array<std::pair<const char*, std::vector<int>>, 5> axes = {{
      {"block", {32, 64, 128, 256, 512, 1024}},
      {"vec", {1, 2, 4, 8}},
      {"unroll", {1, 2, 4, 8}},
      {"rows", {1, 2, 4, 8, 16}},
      {"stages", {1, 2, 3, 4}},
  }};
  return axes;
}
using GridPoint = std::array<int, 5>;

inline std::string GridId(const GridPoint& p) {
  std::string id;
  for (size_t a = 0; a < p.size(); ++a) {
    absl::StrAppend(&id, a ? "-" : "", GridAxes()[a].first, GridAxes()[a].second[p[a]]);
  }
  return id;
}

inline v1::Candidate GridCandidate(const GridPoint& p) {
  v1::Candidate c;
  c.set_id(GridId(p));  // a canonical parameter string stands in for the sha256 here
  c.set_source(absl::StrCat("// simulated kernel ", GridId(p)));
  c.set_launch_plan_json("{}");
  c.set_proposer("grid-test");
  for (size_t a = 0; a < p.size(); ++a) {
    (*c.mutable_params())[GridAxes()[a].first] = std::to_string(GridAxes()[a].second[p[a]]);
  }
  for (size_t a = 0; a < p.size(); ++a) {
    (*c.mutable_params())[std::string("i_") + GridAxes()[a].first] = std::to_string(p[a]);
  }
  return c;
}

inline GridPoint GridPointOf(const v1::Candidate& c) {
  GridPoint p{};
  for (size_t a = 0; a < p.size(); ++a) {
    p[a] = std::stoi(c.params().at(std::string("i_") + GridAxes()[a].first));
  }
  return p;
}

// Test double for a Proposer (the synthesizer's role): roots are random grid points, children
// are one-step neighbours of the parent not already among its siblings. Deterministic in
// request.seed. Records every request for the tests to inspect.
class GridProposerForTests : public Proposer {
 public:
  absl::StatusOr<v1::ProposeResponse> Propose(const v1::ProposeRequest& request) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(request);
    }
    if (!error_.ok()) return error_;
    v1::ProposeResponse response;
    if (!refusal_.empty()) {
      response.set_refusal(refusal_);
      return response;
    }
    uint64_t state = request.seed();
    auto next = [&state](uint64_t bound) {
      state = SplitMix64(state);
      return state % bound;
    };
    std::set<std::string> taken;
    for (const v1::EvaluatedCandidate& s : request.siblings()) taken.insert(s.candidate().id());
    std::vector<GridPoint> options;
    if (!request.has_parent() && root_limit_ > 0) {
      for (int i = 0; i < root_limit_; ++i) options.push_back(GridPoint{i, 0, 0, 0, 0});
    } else if (!request.has_parent()) {
      for (int i = 0; i < 4 * request.n(); ++i) {
        GridPoint p{};
        for (size_t a = 0; a < p.size(); ++a)
          p[a] = static_cast<int>(next(GridAxes()[a].second.size()));
        options.push_back(p);
      }
    } else if (neighbours_) {
      const GridPoint parent = GridPointOf(request.parent().candidate());
      for (size_t a = 0; a < parent.size(); ++a) {
        for (int step : {-1, 1}) {
          GridPoint p = parent;
          p[a] += step;
          if (p[a] >= 0 && p[a] < static_cast<int>(GridAxes()[a].second.size())) {
            options.push_back(p);
          }
        }
      }
      for (size_t i = options.size(); i > 1; --i) std::swap(options[i - 1], options[next(i)]);
    }
    for (const GridPoint& p : options) {
      if (response.candidates_size() >= request.n()) break;
      if (!taken.insert(GridId(p)).second) continue;
      *response.add_candidates() = GridCandidate(p);
    }
    return response;
  }
  std::string Name() const override { return "grid-test"; }

  void set_error(absl::Status error) { error_ = std::move(error); }
  void set_refusal(std::string refusal) { refusal_ = std::move(refusal); }
  void set_neighbours(bool on) { neighbours_ = on; }
  // Roots come from a fixed list of this many points instead of random ones.
  void set_root_limit(int limit) { root_limit_ = limit; }
  std::vector<v1::ProposeRequest> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  std::mutex mu_;
  std::vector<v1::ProposeRequest> requests_;
  absl::Status error_;
  std::string refusal_;
  bool neighbours_ = true;
  int root_limit_ = 0;
};

// Test double for a CandidateRunner (the GPU evaluator's role): speedup is
//   peak * 0.8^(grid distance to the optimum point),
// the optimum being block256-vec4-unroll2-rows4-stages2, and a few parameter combinations
// fail with a fixed verdict. In threaded mode each result arrives on its own thread after a
// delay that depends on the candidate, so results finish out of dispatch order.
class SimulatedRunnerForTests : public CandidateRunner {
 public:
  static constexpr GridPoint kOptimum = {3, 2, 1, 2, 1};
  enum class Mode { kInline, kThreaded };

  explicit SimulatedRunnerForTests(Mode mode = Mode::kInline) : mode_(mode) {}
  ~SimulatedRunnerForTests() override {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
  }

  void Run(const v1::Target& target, const v1::Candidate& candidate, const RunOptions& options,
           Done done) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.emplace_back(candidate.id(), options.fresh_process);
    }
    absl::StatusOr<RunOutcome> outcome = Outcome(target, candidate, options);
    if (mode_ == Mode::kInline) {
      done(std::move(outcome));
      return;
    }
    const int delay_ms = static_cast<int>(Fnv1a64(candidate.id()) % 5);
    std::lock_guard<std::mutex> lock(mu_);
    threads_.emplace_back([delay_ms, outcome = std::move(outcome), done = std::move(done)] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      done(outcome);
    });
  }

  static double SimulatedSpeedup(const GridPoint& p, double peak) {
    int distance = 0;
    for (size_t a = 0; a < p.size(); ++a) distance += std::abs(p[a] - kOptimum[a]);
    return peak * std::pow(0.8, distance);
  }

  // The verdict a point gets (PASS unless it hits one of the simulated failure modes).
  v1::Verdict SimulatedVerdict(const GridPoint& p) const {
    if (!failures_) return v1::PASS;
    if (p[2] == 3 && p[4] == 3) return v1::COMPILE_ERROR;  // unroll 8 with 4 stages
    if (p[0] == 5 && p[1] == 3) return v1::MISMATCH;       // block 1024 with vec 8
    if (p[0] == 0 && p[3] == 4) return v1::TIMEOUT;        // block 32 with 16 rows
    return v1::PASS;
  }

  void set_failures(bool on) { failures_ = on; }
  void set_peak(const std::string& target_id, double peak) { peaks_[target_id] = peak; }
  void fail_in_fresh_process(const std::string& candidate_id) {
    fresh_failures_.insert(candidate_id);
  }
  // The speedup a candidate's fresh-process run measures (timing noise between processes).
  void set_fresh_speedup(const std::string& candidate_id, double speedup) {
    fresh_speedups_[candidate_id] = speedup;
  }
  void set_runner_error(absl::Status error) { runner_error_ = std::move(error); }
  std::vector<std::pair<std::string, bool>> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  absl::StatusOr<RunOutcome> Outcome(const v1::Target& target, const v1::Candidate& candidate,
                                     const RunOptions& options) const {
    if (!runner_error_.ok()) return runner_error_;
    const GridPoint p = GridPointOf(candidate);
    RunOutcome out;
    v1::Verdict verdict = SimulatedVerdict(p);
    if (options.fresh_process && fresh_failures_.contains(candidate.id())) {
      verdict = v1::NONDETERMINISTIC;
    }
    if (verdict == v1::COMPILE_ERROR) {
      out.compile.set_status(v1::COMPILE_FAILED);
      out.compile.set_log("simulated: too many registers");
      return out;
    }
    out.compile.set_status(v1::COMPILE_OK);
    out.compile.set_cubin("simulated cubin");
    out.evaluation.set_verdict(verdict);
    if (verdict != v1::PASS) {
      out.evaluation.mutable_diagnostics()->set_message("simulated failure");
      return out;
    }
    auto peak = peaks_.find(target.id());
    double speedup = SimulatedSpeedup(p, peak == peaks_.end() ? 3.0 : peak->second);
    if (auto fresh = fresh_speedups_.find(candidate.id());
        options.fresh_process && fresh != fresh_speedups_.end()) {
      speedup = fresh->second;
    }
    out.evaluation.set_speedup(speedup);
    out.evaluation.mutable_eager()->set_median_s(target.eager_time_s());
    out.evaluation.mutable_candidate()->set_median_s(target.eager_time_s() / speedup);
    out.evaluation.set_floor_s(target.floor_s());
    return out;
  }

  Mode mode_;
  bool failures_ = true;
  std::map<std::string, double> peaks_;
  std::set<std::string> fresh_failures_;
  std::map<std::string, double> fresh_speedups_;
  absl::Status runner_error_;
  std::mutex mu_;
  std::vector<std::thread> threads_;
  std::vector<std::pair<std::string, bool>> calls_;
};

inline v1::Target MakeTarget(const std::string& id, double share, double eager_time_s = 1e-4,
                             double floor_s = 0.0) {
  v1::Target t;
  t.set_id(id);
  t.set_share(share);
  t.set_eager_time_s(eager_time_s);
  t.set_floor_s(floor_s);
  t.set_calls_per_forward(1);
  t.set_family("softmax");
  return t;
}

}  // namespace kforge::testing
