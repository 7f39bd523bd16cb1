// Capturer: runs a TorchScript model under LibTorch, records every top-level aten call with
// its signature and time, and returns the OperatorProfile (op table, operator graph, hot
// targets with the real inputs of one call each). The library behind `kforge capture` and
// CaptureService; this header keeps LibTorch out of its users.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/store.h"
#include "kforge/v1/common.pb.h"

namespace kforge {

struct CaptureOptions {
  // The TorchScript model and its inputs (torch.save of a tensor or a tuple/list/dict of
  // tensors). The *_bytes fields, when non-empty, are used instead of reading the paths;
  // the paths then only name the inputs in messages.
  std::string model_path;
  std::string inputs_path;
  std::string model_bytes;
  std::string inputs_bytes;
  std::string model_name;  // default: the model file's name without extension
  // "cuda", "cpu", or "auto" (cuda when a GPU is present, else cpu).
  std::string device = "auto";
  int warmup = 3;
  int iters = 10;  // plain forwards timed (median) and profiled forwards averaged
  int top_k = 5;
  // With a family lookup: top_k counts only the targets a synthesizer family covers, and of
  // the others ranked above the K-th such, the first `uncovered_top_k` are kept too (a report
  // says why they were skipped). A model whose time is mostly convolutions and GEMMs (a
  // diffusion UNet) then still gets its group norms searched. -1: top_k counts every target.
  int uncovered_top_k = -1;
  // When not empty, targets are the top K among ops named here ("aten::softmax"); a chain
  // target qualifies when any of its nodes does.
  std::vector<std::string> ops;
  // Chains of nodes (each one's output used only by the next, every node of a synthesizer
  // family, at most one not elementwise) become targets of their own, and their calls leave
  // their ops' targets. On by default: every example model ran faster end to end with its
  // chains as one kernel each (docs/benchmarks/2026-12-03-h200-chain-kernels.md).
  bool fuse = true;
  // The captured inputs of one target larger than this are not kept (a note says so).
  int64_t max_target_input_bytes = int64_t{256} << 20;
};

// Synthesizer family for a target ("softmax", "layer_norm", ...), "" when none exists.
using FamilyLookup = std::function<std::string(const v1::Target&)>;

struct CaptureResult {
  v1::OperatorProfile profile;
  // Mean forward time with the recording callbacks on; coverage and every op's share are
  // fractions of this (profile.forward_time_s is the plain forward's median).
  double profiled_forward_s = 0;
  // Target id -> its captured inputs as a tensor file (common/tensor_io format), for targets
  // whose inputs were kept.
  std::map<std::string, std::string> target_inputs;
};

class Capturer {
 public:
  // Loads, checks and profiles the model. Errors say which input was wrong and what to do:
  // NOT_FOUND (missing file), INVALID_ARGUMENT (not TorchScript, not tensors, inputs that
  // the model's forward rejects), FAILED_PRECONDITION (no CUDA device). `store` (may be
  // null) receives the targets' captured inputs via PutBlob; `family` (may be empty)
  // names each target's synthesizer family.
  static absl::StatusOr<CaptureResult> Run(const CaptureOptions& options, Store* store,
                                           const FamilyLookup& family = nullptr);
};

// How coverage is computed, for every report that shows it.
inline constexpr char kCoverageDefinition[] =
    "coverage = sum of the times of the recorded top-level aten calls / the profiled forward "
    "time (both with recording on, averaged over the profiled forwards); each op's share is "
    "its time / the same profiled forward time, so the shares add up to the coverage";

}  // namespace kforge
