// The report of an optimize run: report.json (what the export step and the web UI read),
// summary.txt and the table printed at the end, and the winners' kernel directories.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kforge/v1/common.pb.h"
#include "kforge/v1/proposer.pb.h"
#include "nlohmann/json.hpp"
#include "services/coordinator/embedded/embedded_runner.h"
#include "services/coordinator/embedded/run_directory.h"
#include "services/coordinator/embedded/target_selection.h"
#include "services/coordinator/search/search_tree.h"

namespace kforge {

// A candidate proposed and compiled in a run without a GPU.
struct CompiledCandidate {
  std::string candidate_id;
  std::string proposer;
  std::map<std::string, std::string> params;
  v1::CompileStatus status = v1::COMPILE_STATUS_UNSPECIFIED;
  bool cache_hit = false;
  int registers = 0;
  int spill_bytes = 0;
  std::string log_excerpt;  // for failures
};

// A candidate the evaluator turned down (any verdict but PASS and NOT_EVALUATED): its
// config and the evaluator's diagnostics, so that a wrong or crashing kernel can be
// reproduced from the report alone (the run's tree holds its source).
struct RejectedCandidate {
  std::string candidate_id;
  std::string proposer;
  std::map<std::string, std::string> params;
  v1::Verdict verdict = v1::VERDICT_UNSPECIFIED;
  v1::Diagnostics diagnostics;
};

struct TargetReport {
  v1::Target target;
  int iterations = 0;  // completed evaluations
  std::map<std::string, int> verdict_counts;
  std::string stop_reason;  // StopReasonName, or "not_searched" without a GPU
  double eager_s = 0;       // per call: the winner's interleaved eager time, else the capture's
  double best_s = 0;        // the winner's time in its fresh-process re-run; 0: no winner
  double floor_s = 0;
  double speedup = 0;  // re-confirmed; 0: no winner
  double search_best_speedup = 0;
  std::string best_candidate_id;
  std::string best_proposer;                      // "synth:group_norm", "openai:MODEL" ...
  std::map<std::string, std::string> best_params;  // the synthesizer's config; empty for LLMs
  bool reconfirmed = false;
  std::string kernel_dir;  // relative to the run directory; empty without a winner
  std::string error;
  std::vector<std::string> notes;
  std::vector<CompiledCandidate> compiled;  // runs without a GPU
  std::vector<RejectedCandidate> rejected;  // in the order they joined the search tree
};

struct OptimizeReport {
  // "complete", "no_gpu" (compiled only), "interrupted", "failed".
  std::string status;
  std::string message;
  std::string model_path;
  std::string inputs_path;
  std::string model_name;
  std::string capture_device;
  std::string gpu_name;
  std::string proposer;
  std::string store_url;
  uint64_t seed = 0;
  int iterations_per_target = 0;
  double time_budget_s = 0;
  double forward_time_s = 0;
  bool resumed = false;
  double search_wall_s = 0;
  std::vector<TargetReport> targets;
  std::vector<SkippedTarget> skipped;
  v1::LlmUsage llm_usage;
  EmbeddedRunnerStats runner;
};

// Amdahl over the targets: 1 / (1 - sum share * (1 - 1 / speedup)), counting winners only.
// Shares are of the profiled forward, so this is an estimate; 1 when nothing won.
double EstimatedForwardSpeedup(const OptimizeReport& report);

// The tree's evaluated candidates that were turned down, in the order they joined it.
std::vector<RejectedCandidate> RejectedCandidates(const SearchTree& tree);

nlohmann::json ReportToJson(const OptimizeReport& report);
// The table printed at the end and kept as summary.txt.
std::string FormatSummaryText(const OptimizeReport& report);

// What one target's search tried (`kforge report --search`): every candidate in dispatch
// order with its parent, verdict, time and parameters, then, per synthesizer parameter that
// took several values, how many candidates had each value and the fastest that passed — which
// parts of the space the search visited and how they measured.
std::string FormatSearchHistory(const SearchTree& tree);

// kernels/<target id>/: kernel.cu, plan.json, candidate.json (EvaluatedCandidate as JSON,
// cubin and PTX left out), target.json and the cubin. `winner.compile` must hold the cubin.
absl::Status WriteWinner(const RunDirectory& dir, const v1::Target& target,
                         const v1::EvaluatedCandidate& winner);

// Protobuf JSON with the .proto field names.
std::string MessageToJsonText(const google::protobuf::Message& message);

}  // namespace kforge
