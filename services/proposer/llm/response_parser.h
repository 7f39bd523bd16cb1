// Response parser: turns an LLM's answer into candidate source + launch plan, or into a
// Rejection whose message the next turn sees. An answer must hold exactly one CUDA code block
// and one JSON launch-plan block; the source must be device code only (it is only ever
// compiled by NVRTC, never as host code) with includes from an allow-list, and the plan's
// entries must be extern "C" __global__ functions of the source taking KfArgs.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/v1/proposer.pb.h"

namespace kforge {

// Rejection reasons (v1::Rejection.reason).
inline constexpr char kRejectNoCodeBlock[] = "NO_CODE_BLOCK";
inline constexpr char kRejectMultipleCodeBlocks[] = "MULTIPLE_CODE_BLOCKS";
inline constexpr char kRejectNoPlanBlock[] = "NO_PLAN_BLOCK";
inline constexpr char kRejectMultiplePlanBlocks[] = "MULTIPLE_PLAN_BLOCKS";
inline constexpr char kRejectUnterminatedBlock[] = "UNTERMINATED_BLOCK";
inline constexpr char kRejectHostCode[] = "HOST_CODE";
inline constexpr char kRejectBadInclude[] = "BAD_INCLUDE";
inline constexpr char kRejectBadPlanJson[] = "BAD_PLAN_JSON";
inline constexpr char kRejectBadPlan[] = "BAD_PLAN";
inline constexpr char kRejectBadEntryPoint[] = "BAD_ENTRY_POINT";
inline constexpr char kRejectRefused[] = "REFUSED";
inline constexpr char kRejectCallFailed[] = "CALL_FAILED";

struct ParsedAnswer {
  std::string source;
  std::string launch_plan_json;
  std::vector<std::string> entry_points;  // in the plan's order
};

struct ParseResult {
  std::optional<ParsedAnswer> answer;  // set when accepted
  v1::Rejection rejection;             // set when not
  bool ok() const { return answer.has_value(); }
};

ParseResult ParseLlmAnswer(std::string_view text);

// Lower-level checks, exposed for tests and for the synthesizer's own sanity checks.
// Source with comments blanked out (strings kept, newlines kept so line numbers hold).
std::string StripComments(std::string_view source);
// Names of the functions the source defines as extern "C" __global__.
std::vector<std::string> ExternCGlobalFunctions(std::string_view source);

}  // namespace kforge
