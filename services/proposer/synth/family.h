// Family and KernelGenerator: a family covers a set of aten ops; bound to one target it
// becomes a generator with a parameter space, a cost-model prior and source + plan output.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kforge/v1/common.pb.h"
#include "services/proposer/synth/cost_model.h"
#include "services/proposer/synth/param_space.h"

namespace kforge::synth {

struct GeneratedKernel {
  std::string source;
  std::string launch_plan_json;
};

// One family bound to one target and GPU.
class KernelGenerator {
 public:
  virtual ~KernelGenerator() = default;

  virtual const ParamSpace& Space() const = 0;
  // Sets parameters that have no effect under the others to their first value, so that
  // configs that generate the same kernel compare equal.
  virtual Config Canonicalize(const Config& config) const = 0;
  // Empty when `config` can run on this target and GPU; otherwise why it cannot (block too
  // large, vector wider than 16 bytes, clusters on a pre-sm_90 GPU, ...).
  virtual std::string Check(const Config& config) const = 0;
  // Cost-model time estimate in seconds; lower is better.
  virtual double EstimateSeconds(const Config& config) const = 0;
  // Shared memory per block (static + dynamic) the config asks for on this target.
  virtual int64_t SharedBytes(const Config& config) const = 0;
  // Bytes the op must move at least: the floor the prior is compared against.
  virtual double MinBytes() const = 0;
  // Hand-picked starting points that join the sampled root pool.
  virtual std::vector<Config> Seeds() const { return {}; }
  // The parameter whose values are different algorithms (a split row's way of combining its
  // chunks), the prior's errors shared within a value and not between values: the roots
  // measure the best config of each value the prior rates near the best before its ranking
  // across them is trusted. Empty: none.
  virtual std::string StrategyParam() const { return ""; }
  virtual absl::StatusOr<GeneratedKernel> Generate(const Config& config) const = 0;
};

class Family {
 public:
  virtual ~Family() = default;
  // "rowwise", "group_norm", "batch_norm", "pooling", "reduction", "elementwise", "layout".
  virtual std::string Name() const = 0;
  // aten ops it may cover, e.g. "aten::softmax".
  virtual std::vector<std::string> Ops() const = 0;
  // The generator for `target`, or a refusal (Unimplemented / InvalidArgument) whose
  // message says what the family does not cover.
  virtual absl::StatusOr<std::unique_ptr<KernelGenerator>> Bind(const v1::Target& target,
                                                                const GpuModel& gpu) const = 0;
};

// The families, one factory each (their .cc files).
std::unique_ptr<Family> MakeRowwiseFamily();
std::unique_ptr<Family> MakeGroupNormFamily();
std::unique_ptr<Family> MakeBatchNormFamily();
std::unique_ptr<Family> MakePoolingFamily();
std::unique_ptr<Family> MakeReductionFamily();
std::unique_ptr<Family> MakeElementwiseFamily();
std::unique_ptr<Family> MakeLayoutFamily();

}  // namespace kforge::synth
