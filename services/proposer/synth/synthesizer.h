// Synthesizer: the built-in Proposer ("synth"). Roots are the best configs of the target's
// family by the cost-model prior, chosen to differ from each other; children are neighbour
// moves of the parent's config (one parameter to an adjacent value), ordered by the prior,
// skipping what was already tried and steering by the parent's and siblings' feedback. The
// prior is first calibrated on the request's history, the target's measured candidates
// (prior_calibration.h).
// Deterministic for a seed: the only randomness is SeededRng.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "kforge/v1/proposer.pb.h"
#include "services/proposer/proposer.h"
#include "services/proposer/synth/family_registry.h"

namespace kforge::synth {

struct SynthesizerOptions {
  int default_n = 8;            // when request.n is 0
  int root_samples = 2000;      // random configs scored for the roots
  int climb_starts = 6;         // best samples refined by greedy neighbour moves
  double prior_jitter = 0.08;   // seeded +-8% on the prior: different seeds explore differently
  // Share of a root expansion's proposals drawn uniformly from the sampled space instead of
  // by the prior: a hedge where the cost model misjudges a shape (MCTS vs random on the
  // H200 lost on group_norm to a config the prior ranked low).
  double root_explore_fraction = 0.25;
  // Correct the prior by what the request's history measured (prior_calibration.h).
  bool calibrate_prior = true;
};

// What the synthesizer knows about one config of a target: for display (kforge propose).
struct ConfigReport {
  std::string family;
  std::string config;       // canonical string
  double estimated_s = 0;   // cost-model prior
  double floor_s = 0;       // MinBytes / bandwidth
  int64_t shared_bytes = 0;
};

class Synthesizer : public Proposer {
 public:
  explicit Synthesizer(SynthesizerOptions options = {},
                       const FamilyRegistry* registry = &FamilyRegistry::Default());

  // No family for the target: OK with response.refusal set and no candidates.
  absl::StatusOr<v1::ProposeResponse> Propose(const v1::ProposeRequest& request) override;
  std::string Name() const override { return "synth"; }

  // The prior of the config `params` names for `target` on `gpu` (defaults: H200).
  absl::StatusOr<ConfigReport> Explain(const v1::Target& target, const v1::GpuInfo& gpu,
                                       const std::map<std::string, std::string>& params) const;

  const FamilyRegistry& registry() const { return *registry_; }

 private:
  SynthesizerOptions options_;
  const FamilyRegistry* registry_;
};

}  // namespace kforge::synth
