// The anchor rows of ../shared/GPU.md ("Anchor figures") as single-node targets with
// real-looking inputs, and the enumeration of a synthesizer family's valid configs: what
// kforge-synth-sweep and kforge-bench-search share.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kforge/v1/common.pb.h"
#include "services/proposer/synth/family.h"

namespace kforge::bench {

// How a tensor input is filled: activations N(0, 1), affine weights 1 + 0.1 N(0, 1) and
// biases 0.1 N(0, 1) — the ranges a trained model's layers show.
enum class Fill { kNormal, kWeight, kBias };

const char* FillName(Fill f);

struct AnchorRow {
  std::string id;           // --rows name
  std::string label;        // a table's first column, as GPU.md writes it
  v1::Target target;        // id: <id_prefix><id>
  std::vector<Fill> fills;  // per target input
};

// The rows of GPU.md's "Anchor figures" table, in its order, built the way capture records
// them (schema argument names, tensor inputs by value name, dense strides on cuda:0, op cost
// set). Target ids are `id_prefix` + row id.
std::vector<AnchorRow> AnchorRows(std::string_view id_prefix);

// Targets of the example models where kforge trailed torch.compile (benchmarks of
// 2026-12-01): the attention-mask add of Qwen3/Gemma3 and the SD VAE decoder's group norms;
// their attention chain (scale, mask, softmax, cast) as one target, below 70% of its floor;
// and Gemma3's launch-bound RMSNorm weight chain.
// Swept only when named; the default sweep is the anchor table.
std::vector<AnchorRow> ModelRows(std::string_view id_prefix);

// The rows `filter` names ("" = every anchor row), in table order: comma-separated ids (anchor
// or model rows) or 1-based anchor positions. InvalidArgument naming the unknown row and
// listing the valid ids.
absl::StatusOr<std::vector<AnchorRow>> SelectRows(const std::string& filter,
                                                  std::string_view id_prefix);

// One real-looking call's inputs as torch.save bytes (CPU tensors, seeded by `seed`).
absl::StatusOr<std::string> MakeInputs(const AnchorRow& row, uint64_t seed);

// Every point of a bound family's product space, canonicalized and deduplicated, kept when
// Check() finds nothing wrong.
struct Enumeration {
  double product = 0;     // size of the raw product space
  int64_t canonical = 0;  // distinct canonical configs
  std::vector<synth::Config> valid;
  std::map<std::string, int64_t> refusals;  // Check() message (numbers folded) -> count
};

// ResourceExhausted when the product space exceeds 5e7 points (minutes of enumeration).
absl::StatusOr<Enumeration> Enumerate(const synth::KernelGenerator& generator);

}  // namespace kforge::bench
