// Torch rows: a target as the JSON row that tools/bench/torch_compile_times.py times (eager and
// torch.compile of its aten op, or of its chain of ops, on the target's exact signature).
// Written by `kforge-synth-sweep --emit-rows` for its anchor rows and by `kforge report
// --torch-rows` for the targets of an optimize run. A row:
//   {"id", "label", "op": "aten::softmax", "overload": "int",
//    "inputs": [{"sizes", "strides", "dtype": "FLOAT32", "fill": "normal"|"weight"|"bias"}],
//    "args": [{"name", "input": INDEX} | {"name", "value": SCALAR}]  (the node's order),
//    "min_bytes"}
// A chain's row has no "overload" and "args" but "chain": [{"op", "overload", "args"}] in order,
// where an argument may also be {"name", "node": INDEX}, an earlier node's output, and "op"
// names them all ("aten::mul -> aten::add -> aten::softmax").
// No LibTorch: the coordinator links it.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kforge/v1/common.pb.h"
#include "nlohmann/json.hpp"

namespace kforge {

// The row of `target`; `fills` holds one fill name per target input ("normal", "weight",
// "bias": how torch_compile_times.py draws random inputs). InvalidArgument when `fills` does not
// match the inputs or an argument names a value that is neither a target input nor an earlier
// node's output.
absl::StatusOr<nlohmann::json> TorchRow(const v1::Target& target, const std::string& id,
                                        const std::string& label,
                                        const std::vector<std::string>& fills);

// Fills guessed from the schema argument each input feeds: "weight" and "bias" arguments get
// those fills (the ranges of a trained layer's affine parameters), everything else "normal".
std::vector<std::string> FillsByArgumentName(const v1::Target& target);

}  // namespace kforge
