// Proposer: the one interface every candidate source implements (the built-in synthesizer,
// the LLM backends, and the gRPC client of a remote ProposalService).
#pragma once

#include "absl/status/statusor.h"
#include "kforge/v1/proposer.pb.h"

namespace kforge {

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Children of request.parent (roots when it is absent), at most request.n of them, best
  // first by the proposer's own prior. Deterministic for a given request.seed where the
  // backend allows (the synthesizer always; an LLM at temperature 0 at best). Rejected LLM
  // answers are returned in the response, not as an error: they are feedback.
  virtual absl::StatusOr<v1::ProposeResponse> Propose(const v1::ProposeRequest& request) = 0;
  // The name a job selects it by: "synth", "openai", "anthropic".
  virtual std::string Name() const = 0;
};

}  // namespace kforge
