// The verdict the search records for a runner's outcome.
#include "services/coordinator/search/candidate_runner.h"

namespace kforge {

v1::Verdict EffectiveVerdict(const RunOutcome& outcome) {
  switch (outcome.compile.status()) {
    case v1::COMPILE_FAILED:
    case v1::COMPILE_TIMEOUT:
    case v1::COMPILE_RESOURCE_LIMIT:
    case v1::COMPILE_REFUSED:
      return v1::COMPILE_ERROR;
    default:
      break;
  }
  if (outcome.evaluation.verdict() == v1::VERDICT_UNSPECIFIED) return v1::NOT_EVALUATED;
  return outcome.evaluation.verdict();
}

}  // namespace kforge
