// RunOptimize: `kforge optimize` as a library call — the whole job in this process: capture
// the model (Capturer), pick the top-K targets a proposer can work on, search each with MCTS
// (SearchDriver over an EmbeddedRunner on the local GPUs), re-confirm the winners and write
// the run directory (see run_directory.h).
//
// Without a GPU (none found, or --device cpu) it captures on the CPU, proposes and compiles a
// few candidates per target and stops: validation and timing need a GPU, and a search whose
// every evaluation is missing would only pretend. The proposed candidates stay in the trees as
// pending nodes, so `--resume` on a GPU machine evaluates them first and searches on.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/coordinator/embedded/optimize_report.h"
#include "services/coordinator/embedded/progress_display.h"
#include "services/coordinator/search/target_scheduler.h"
#include "services/proposer/llm/llm_options.h"
#include "services/worker/compiler.h"
#include "services/worker/evaluator.h"

namespace kforge {

struct OptimizeOptions {
  std::string model_path;   // TorchScript (torch.jit.save)
  std::string inputs_path;  // torch.save'd tensor or tuple/list/dict of tensors
  std::string out_dir;
  int top_k = 5;                   // targets searched
  // Only targets of these ops ("aten::softmax"); empty: any op.
  std::vector<std::string> ops;
  bool fuse = true;  // chains of nodes as targets too (CaptureOptions::fuse)
  // Captured inputs of one target above this are not kept (and the target is not searched).
  int64_t max_target_input_bytes = int64_t{1} << 30;
  int iterations = 64;             // evaluations per target
  // A target stops when its best time is within this factor of its floor; 0: never.
  double stop_near_floor = SchedulerOptions{}.near_floor_factor;
  double time_budget_s = 0;        // wall time of the search; 0: none
  std::string proposer = "synth";  // "synth", "openai", "anthropic"
  std::vector<int> gpus;           // local GPU indices; empty: all
  uint64_t seed = 0;
  std::string store_url;  // empty: the resumed run's store, else dir:<out>/store
  bool resume = false;
  std::string device = "auto";      // capture device: auto, cuda, cpu (cpu: no GPU evaluation)
  int compile_threads = 0;          // 0: half the CPUs, 2..8
  int compile_only_candidates = 4;  // proposed per target when there is no GPU
  // The LLM backend's settings (the backend itself comes from `proposer`).
  LlmOptions llm;
  CompilerOptions compiler;
  EvaluatorOptions evaluator;  // gpus is set per lane
  // Set (from a signal handler's thread) to stop the search; the trees keep their state.
  const std::atomic<bool>* interrupt = nullptr;
};

struct OptimizeResult {
  OptimizeReport report;
  bool no_gpu = false;     // compiled only; validation and timing need a GPU
  std::string no_gpu_why;  // "none was found on this machine" or "--device cpu uses none"
  int captured_targets = 0;
  int proposed = 0;     // candidates proposed (pending and evaluated nodes of the trees)
  int compiled_ok = 0;  // of the candidates compiled in this run
};

// Errors: InvalidArgument / NotFound for bad input (flags, files, an --out that holds another
// run), FailedPrecondition for what this machine lacks (no LLM key, --device cuda without a
// GPU), Cancelled when interrupted (report.json says so; --resume continues), others as they
// come. Progress goes to `display` (may be null).
absl::StatusOr<OptimizeResult> RunOptimize(const OptimizeOptions& options,
                                           ProgressDisplay* display);

}  // namespace kforge
