// Synthesizer: roots by prior with diversity, one per untried strategy, children by neighbour moves
// and feedback.
#include "services/proposer/synth/synthesizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/digest.h"
#include "common/status.h"
#include "services/proposer/synth/prior_calibration.h"
#include "services/proposer/synth/seeded_rng.h"

namespace kforge::synth {
namespace {

constexpr int kMaxProposals = 64;

// Portable 64-bit hashing for the per-config jitter (std::hash differs across libraries).
uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Threads per block of a config, whatever the family calls its parameters.
int BlockThreads(const Config& c) {
  if (!c.Get("row_threads").empty()) return c.GetInt("row_threads") * c.GetInt("rows_per_block");
  if (!c.Get("tile_threads").empty()) return c.GetInt("tile_threads") * c.GetInt("reduce_threads");
  return c.GetInt("threads");
}

bool UsesSplitMode(const Config& c, std::string_view mode) {
  return c.GetInt("split") > 1 && c.Get("split_mode") == mode;
}

// Splits whose blocks spin until other blocks' partials arrive (sync, sync_keep, ordered).
bool BlocksWaitOnEachOther(const Config& c) {
  return UsesSplitMode(c, "sync") || UsesSplitMode(c, "sync_keep") || UsesSplitMode(c, "ordered");
}

// Register pressure of a config, relative only: more cached/in-flight elements, more registers.
int Pressure(const Config& c) {
  return c.GetInt("reg_cache") + std::max(1, c.GetInt("vec")) *
                                     std::max({1, c.GetInt("unroll"), c.GetInt("ilp")});
}

// What the tree has learned about this target from the parent and its siblings.
struct Feedback {
  std::set<std::string> tried;
  int64_t max_shared = std::numeric_limits<int64_t>::max();
  int max_block_threads = 1024;
  bool no_fast_math = false;
  bool no_cluster = false;
  bool no_sync = false;  // a cooperative launch was refused: its blocks did not all fit
  bool no_waiting_split = false;  // a split whose blocks wait on each other timed out
  int max_pressure = std::numeric_limits<int>::max();  // parent spilled: stay below it
};

std::string FailureText(const v1::EvaluatedCandidate& evaluated) {
  const v1::Diagnostics& d = evaluated.evaluation().diagnostics();
  return absl::AsciiStrToLower(
      absl::StrCat(d.message(), "\n", d.log_excerpt(), "\n", evaluated.compile().log()));
}

class Proposal {
 public:
  Proposal(const KernelGenerator& generator, std::string family, uint64_t seed, double jitter)
      : generator_(generator), family_(std::move(family)), seed_(seed), jitter_(jitter) {}

  const KernelGenerator& generator() const { return generator_; }

  // What the target's measured candidates say about the prior here; before any Score.
  void Calibrate(const google::protobuf::RepeatedPtrField<v1::EvaluatedCandidate>& history) {
    for (const v1::EvaluatedCandidate& e : history) {
      std::optional<Config> config = ConfigOf(e.candidate());
      if (!config.has_value() || e.evaluation().verdict() != v1::PASS) continue;
      calibration_.Add(*config, generator_.EstimateSeconds(*config),
                       e.evaluation().candidate().median_s());
    }
    calibration_.Fit();
  }

  // The config a tree node holds, when a synth proposal of this family made it.
  std::optional<Config> ConfigOf(const v1::Candidate& candidate) const {
    if (candidate.proposer() != absl::StrCat("synth:", family_)) return std::nullopt;
    std::map<std::string, std::string> params(candidate.params().begin(), candidate.params().end());
    auto config = generator_.Space().FromMap(params);
    if (!config.ok()) return std::nullopt;
    return generator_.Canonicalize(*config);
  }

  void Absorb(const v1::EvaluatedCandidate& evaluated, bool is_parent, Feedback* fb) const {
    std::optional<Config> config = ConfigOf(evaluated.candidate());
    if (config.has_value()) fb->tried.insert(config->ToString());
    if (!evaluated.has_evaluation() && !evaluated.has_compile()) return;
    const v1::Verdict verdict = evaluated.evaluation().verdict();
    const std::string text = FailureText(evaluated);
    if (verdict == v1::LAUNCH_ERROR || evaluated.compile().status() == v1::COMPILE_RESOURCE_LIMIT) {
      if (config.has_value() && absl::StrContains(text, "shared")) {
        fb->max_shared = std::min(fb->max_shared, generator_.SharedBytes(*config) - 1);
      }
      if (config.has_value() && (absl::StrContains(text, "too many resources") ||
                                 absl::StrContains(text, "register"))) {
        fb->max_block_threads = std::min(fb->max_block_threads, BlockThreads(*config) / 2);
      }
      // A cluster launch that failed for no other stated reason: clusters are the suspect.
      if (absl::StrContains(text, "cluster") ||
          (config.has_value() && UsesSplitMode(*config, "cluster") &&
           !absl::StrContains(text, "shared"))) {
        fb->no_cluster = true;
      }
      if (absl::StrContains(text, "cooperative")) fb->no_sync = true;
    }
    // A hang, a crawl or a fault where blocks wait on each other's partials (a wait that
    // outlasts its bound traps): the wait is the suspect.
    if ((verdict == v1::TIMEOUT || verdict == v1::CRASH) && config.has_value() &&
        BlocksWaitOnEachOther(*config)) {
      fb->no_waiting_split = true;
    }
    if ((verdict == v1::MISMATCH || verdict == v1::NONDETERMINISTIC) && config.has_value() &&
        config->GetInt("fast_math") == 1) {
      fb->no_fast_math = true;
    }
    if (is_parent && config.has_value()) {
      for (const v1::KernelResources& k : evaluated.compile().kernels()) {
        if (k.spill_store_bytes() > 0 || k.spill_load_bytes() > 0) {
          fb->max_pressure = std::min(fb->max_pressure, Pressure(*config) - 1);
        }
      }
    }
  }

  // Applies what feedback forbids where a fix exists (fast math off; a cluster, cooperative or
  // waiting split to scratch), then canonicalizes. nullopt when the result is invalid or
  // forbidden.
  std::optional<Config> Admit(Config c, const Feedback& fb) const {
    if (fb.no_fast_math && c.GetInt("fast_math") == 1) c.Set("fast_math", "0");
    if ((fb.no_cluster && UsesSplitMode(c, "cluster")) ||
        (fb.no_sync && (UsesSplitMode(c, "sync") || UsesSplitMode(c, "sync_keep"))) ||
        (fb.no_waiting_split && BlocksWaitOnEachOther(c))) {
      c.Set("split_mode", "scratch");
    }
    c = generator_.Canonicalize(c);
    if (!generator_.Space().Contains(c)) return std::nullopt;
    if (!generator_.Check(c).empty()) return std::nullopt;
    if (generator_.SharedBytes(c) > fb.max_shared) return std::nullopt;
    if (BlockThreads(c) > fb.max_block_threads) return std::nullopt;
    if (Pressure(c) > fb.max_pressure) return std::nullopt;
    if (fb.tried.count(c.ToString()) > 0) return std::nullopt;
    return c;
  }

  // Prior with a seeded jitter: lower is better.
  double Score(const Config& c) {
    const std::string key = c.ToString();
    auto it = scores_.find(key);
    if (it != scores_.end()) return it->second;
    const double u = static_cast<double>(SplitMix(Fnv1a(key) ^ SplitMix(seed_)) >> 11) * 0x1.0p-53;
    const double score = generator_.EstimateSeconds(c) *
                         std::exp(calibration_.Correction(c) + jitter_ * (2 * u - 1));
    scores_.emplace(key, score);
    return score;
  }

  // Ranks configs by score, ties by canonical string (stable across runs).
  void Rank(std::vector<Config>& configs) {
    std::vector<std::pair<double, Config>> scored;
    for (Config& c : configs) scored.emplace_back(Score(c), std::move(c));
    std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first < b.first;
      return a.second.ToString() < b.second.ToString();
    });
    configs.clear();
    for (auto& [score, c] : scored) configs.push_back(std::move(c));
  }

 private:
  const KernelGenerator& generator_;
  std::string family_;
  uint64_t seed_;
  double jitter_;
  PriorCalibration calibration_;
  std::map<std::string, double> scores_;
};

int Distance(const Config& a, const Config& b) {
  int d = 0;
  for (size_t i = 0; i < a.values().size() && i < b.values().size(); ++i) {
    if (a.values()[i].second != b.values()[i].second) ++d;
  }
  return d;
}

// Picks up to n configs from a ranked list, first keeping them (and the `chosen` ones) at
// least `spread` parameters apart, then filling up in rank order.
std::vector<Config> PickDiverse(const std::vector<Config>& ranked, int n, int spread,
                                const std::vector<Config>& chosen = {}) {
  std::vector<Config> picked;
  std::set<std::string> taken;
  for (int pass_spread : {spread, 1}) {
    for (const Config& c : ranked) {
      if (static_cast<int>(picked.size()) >= n) return picked;
      if (taken.count(c.ToString())) continue;
      bool far = true;
      for (const Config& p : picked) far = far && Distance(c, p) >= pass_spread;
      for (const Config& p : chosen) far = far && Distance(c, p) >= pass_spread;
      if (!far) continue;
      picked.push_back(c);
      taken.insert(c.ToString());
    }
  }
  return picked;
}

// A root's picks among the strategies (KernelGenerator::StrategyParam) no candidate of the
// target has used, best first: each value whose best config in `ranked` (best first) scores
// within kStrategyCoverage of the best of all. The calibration corrects the prior per value
// only where a value was measured, so without these a strategy the prior underrates stays
// behind one it overrates: the H100's VAE group norm searches measured 50 stream splits
// (~145 us) a target and no ordered one (~121 us in a sweep) (session 43). A value's pick is
// its best-ranked seed where it has one (the shape measured best for the strategy, where the
// prior's ranking within it is about its seeded jitter: the ordered seed's 32 KB chunks ran
// 120.7 us, the 64 KB the prior put 7% ahead 139.1), but for the best config's own value, else
// its best config at least two parameters from `chosen` and the other picks.
constexpr double kStrategyCoverage = 1.25;
std::vector<Config> UntriedStrategies(const std::vector<Config>& ranked,
                                      const std::vector<Config>& seeds, const std::string& param,
                                      const std::set<std::string>& used, Proposal& proposal, int n,
                                      std::vector<Config> chosen) {
  std::vector<Config> picked;
  if (ranked.empty()) return picked;
  const double limit = kStrategyCoverage * proposal.Score(ranked.front());
  std::vector<std::string> values;  // in the order of their best configs
  std::map<std::string, std::vector<Config>> by_value;
  for (const Config& c : ranked) {
    const std::string value = c.Get(param);
    if (used.count(value)) continue;
    if (!by_value.count(value)) {
      if (proposal.Score(c) > limit) continue;
      values.push_back(value);
    }
    by_value[value].push_back(c);
  }
  std::set<std::string> seed_keys;
  for (const Config& c : seeds) seed_keys.insert(c.ToString());
  for (const std::string& value : values) {
    if (static_cast<int>(picked.size()) >= n) break;
    std::vector<Config> seed;
    if (value != ranked.front().Get(param)) {
      const std::vector<Config>& configs = by_value[value];
      auto it = std::find_if(configs.begin(), configs.end(),
                             [&](const Config& c) { return seed_keys.count(c.ToString()) > 0; });
      if (it != configs.end()) seed.push_back(*it);
    }
    for (Config& c : seed.empty() ? PickDiverse(by_value[value], 1, /*spread=*/2, chosen) : seed) {
      chosen.push_back(c);
      picked.push_back(std::move(c));
    }
  }
  return picked;
}

}  // namespace

Synthesizer::Synthesizer(SynthesizerOptions options, const FamilyRegistry* registry)
    : options_(options), registry_(registry) {}

absl::StatusOr<v1::ProposeResponse> Synthesizer::Propose(const v1::ProposeRequest& request) {
  v1::ProposeResponse response;
  std::string refusal;
  const Family* family = registry_->Find(request.target(), &refusal);
  if (family == nullptr) {
    response.set_refusal(refusal);
    return response;
  }
  const GpuModel gpu = GpuModel::FromInfo(request.gpu());
  auto bound = family->Bind(request.target(), gpu);
  if (!bound.ok()) {
    response.set_refusal(std::string(bound.status().message()));
    return response;
  }
  const KernelGenerator& generator = **bound;
  const int n = std::clamp(request.n() > 0 ? request.n() : options_.default_n, 1, kMaxProposals);
  Proposal proposal(generator, family->Name(), request.seed(), options_.prior_jitter);
  if (options_.calibrate_prior) proposal.Calibrate(request.history());

  Feedback feedback;
  for (const v1::EvaluatedCandidate& sibling : request.siblings()) {
    proposal.Absorb(sibling, /*is_parent=*/false, &feedback);
  }
  if (request.has_best()) proposal.Absorb(request.best(), false, &feedback);
  std::optional<Config> parent;
  if (request.has_parent()) {
    proposal.Absorb(request.parent(), /*is_parent=*/true, &feedback);
    parent = proposal.ConfigOf(request.parent().candidate());
  }

  std::vector<Config> chosen;
  std::set<std::string> seen;
  auto admit_all = [&](const std::vector<Config>& configs) {
    std::vector<Config> out;
    for (const Config& c : configs) {
      std::optional<Config> admitted = proposal.Admit(c, feedback);
      if (admitted.has_value() && seen.insert(admitted->ToString()).second) {
        out.push_back(std::move(*admitted));
      }
    }
    return out;
  };

  if (parent.has_value()) {
    // A parent that failed for a fixable reason gets the fix as its first child.
    std::vector<Config> ring = {*parent};
    std::vector<Config> first = admit_all(ring);
    for (Config& c : first) chosen.push_back(std::move(c));
    // Neighbours by prior, then neighbours of neighbours when those run out.
    for (int radius = 1; radius <= 2 && static_cast<int>(chosen.size()) < n; ++radius) {
      std::vector<Config> next;
      for (const Config& c : ring) {
        for (Config& m : generator.Space().Neighbours(c)) next.push_back(generator.Canonicalize(m));
      }
      std::vector<Config> admitted = admit_all(next);
      proposal.Rank(admitted);
      for (Config& c : admitted) {
        if (static_cast<int>(chosen.size()) >= n) break;
        chosen.push_back(std::move(c));
      }
      ring = std::move(next);
    }
  }

  if (static_cast<int>(chosen.size()) < n) {
    // Roots: hand-picked seeds plus a seeded sample, refined by greedy descent on the prior.
    SeededRng rng(request.seed());
    std::vector<Config> pool = generator.Seeds();
    for (int i = 0; i < options_.root_samples; ++i) pool.push_back(generator.Space().Sample(rng));
    const size_t seeds = pool.size() - options_.root_samples;
    Feedback root_feedback = feedback;
    std::vector<Config> admitted;
    std::vector<Config> seeded;   // admitted seeds
    std::vector<Config> sampled;  // admitted configs of the uniform sample, in sample order
    std::set<std::string> pooled;
    for (size_t i = 0; i < pool.size(); ++i) {
      std::optional<Config> a = proposal.Admit(pool[i], root_feedback);
      if (a.has_value() && pooled.insert(a->ToString()).second) {
        admitted.push_back(*a);
        (i < seeds ? seeded : sampled).push_back(*a);
      }
    }
    proposal.Rank(admitted);
    const size_t starts = std::min<size_t>(admitted.size(), options_.climb_starts);
    for (size_t s = 0; s < starts; ++s) {
      Config current = admitted[s];
      for (int step = 0; step < 40; ++step) {
        std::optional<Config> best;
        double best_score = proposal.Score(current);
        for (const Config& m : generator.Space().Neighbours(current)) {
          std::optional<Config> a = proposal.Admit(m, root_feedback);
          if (!a.has_value()) continue;
          if (pooled.insert(a->ToString()).second) admitted.push_back(*a);
          const double score = proposal.Score(*a);
          if (score < best_score) {
            best_score = score;
            best = *a;
          }
        }
        if (!best.has_value()) break;
        current = *best;
      }
    }
    proposal.Rank(admitted);
    std::vector<Config> fresh;
    for (const Config& c : admitted) {
      if (!seen.count(c.ToString())) fresh.push_back(c);
    }
    const int remaining = n - static_cast<int>(chosen.size());
    const int explore =
        remaining >= 2 && options_.root_explore_fraction > 0
            ? std::max(1, static_cast<int>(remaining * options_.root_explore_fraction))
            : 0;
    const std::string strategy = parent.has_value() ? "" : generator.StrategyParam();
    if (!strategy.empty()) {
      std::set<std::string> used;
      for (const auto* measured : {&request.history(), &request.siblings()}) {
        for (const v1::EvaluatedCandidate& e : *measured) {
          std::optional<Config> c = proposal.ConfigOf(e.candidate());
          if (c.has_value()) used.insert(c->Get(strategy));
        }
      }
      for (Config& c : UntriedStrategies(fresh, seeded, strategy, used, proposal,
                                         remaining - explore, chosen)) {
        seen.insert(c.ToString());
        chosen.push_back(std::move(c));
      }
    }
    for (Config& c : PickDiverse(fresh, n - explore - static_cast<int>(chosen.size()),
                                 /*spread=*/2, chosen)) {
      seen.insert(c.ToString());
      chosen.push_back(std::move(c));
    }
    // Exploration: uniform picks among the sampled configs nobody chose yet.
    std::vector<Config> unexplored;
    for (const Config& c : sampled) {
      if (!seen.count(c.ToString())) unexplored.push_back(c);
    }
    rng.Shuffle(unexplored);
    for (Config& c : PickDiverse(unexplored, n - static_cast<int>(chosen.size()),
                                 /*spread=*/2, chosen)) {
      seen.insert(c.ToString());
      chosen.push_back(std::move(c));
    }
    for (Config& c : fresh) {  // a space too small to sample from: the prior's next
      if (static_cast<int>(chosen.size()) >= n) break;
      if (seen.insert(c.ToString()).second) chosen.push_back(std::move(c));
    }
  }

  const std::string parent_id = request.has_parent() ? request.parent().candidate().id() : "";
  for (const Config& config : chosen) {
    auto kernel = generator.Generate(config);
    if (!kernel.ok()) {
      v1::Rejection* rejection = response.add_rejections();
      rejection->set_reason("SYNTH_GENERATE_FAILED");
      rejection->set_message(std::string(kernel.status().message()));
      continue;
    }
    v1::Candidate* candidate = response.add_candidates();
    candidate->set_id(CandidateId(kernel->source, kernel->launch_plan_json));
    candidate->set_source(std::move(kernel->source));
    candidate->set_launch_plan_json(std::move(kernel->launch_plan_json));
    candidate->set_parent_id(parent_id);
    candidate->set_proposer(absl::StrCat("synth:", family->Name()));
    for (const auto& [name, value] : config.values()) (*candidate->mutable_params())[name] = value;
  }
  return response;
}

absl::StatusOr<ConfigReport> Synthesizer::Explain(
    const v1::Target& target, const v1::GpuInfo& gpu_info,
    const std::map<std::string, std::string>& params) const {
  std::string refusal;
  const Family* family = registry_->Find(target, &refusal);
  if (family == nullptr) return absl::UnimplementedError(refusal);
  const GpuModel gpu = GpuModel::FromInfo(gpu_info);
  KF_ASSIGN_OR_RETURN(std::unique_ptr<KernelGenerator> generator, family->Bind(target, gpu));
  KF_ASSIGN_OR_RETURN(Config config, generator->Space().FromMap(params));
  ConfigReport report;
  report.family = family->Name();
  report.config = config.ToString();
  report.estimated_s = generator->EstimateSeconds(config);
  report.floor_s = generator->MinBytes() / gpu.bandwidth_bytes_per_s;
  report.shared_bytes = generator->SharedBytes(config);
  return report;
}

}  // namespace kforge::synth
