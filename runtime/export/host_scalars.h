// Scalar arithmetic that a traced model does on the device only to read the result on the host.
//
// torch.jit.trace records `x.shape[-1] // 2` as prim::NumToTensor(aten::size(x, -1)) (a CPU
// tensor) divided by a 0-dim tensor constant that holds the 2 on the device the model was traced
// on, then aten::Int of the result. With a CUDA constant the division runs on the GPU, and
// aten::Int copies its result back: a device synchronization per layer, which also makes the
// forward impossible to capture in a CUDA graph (Qwen3's and Gemma3's rotary split, every
// layer). The values are the same computed on the host, since such results feed only scalar
// reads (aten::Int, aten::Float, ...) and the ops are exact or correctly rounded alike on both.
// (A host copy of the constant would not last: torch.jit.load(..., map_location="cuda") moves
// every tensor constant to the GPU again.)
#pragma once

#include <set>
#include <vector>

#include <torch/csrc/jit/ir/ir.h>

namespace kforge {

// The arithmetic nodes whose results are read only on the host, in graph order: a node's
// tensor inputs are host scalars (NumToTensor, 0-dim constants or such nodes' outputs), its op
// gives the same result on every device (add, sub, mul, div, floor_divide, remainder, neg),
// and its output is used only by scalar reads (aten::Int, aten::Float, ...) or such nodes.
std::vector<torch::jit::Node*> HostScalarArithmetic(torch::jit::Graph& graph);

// Rewrites each of those nodes whose 0-dim tensor constant is its `other` operand (or, for add
// and mul, either) to take that value as a number instead (the op's Scalar overload): the
// result then lives where the host scalar does, whatever device the model's constants are
// loaded on (the exporter loads the model on the CPU; the user with map_location="cuda").
// Integer and float32 constants only, whose numbers promote alike. Nodes in `leave` (the
// nodes an export rewrites into kernel calls) stay as they are. Returns how many nodes it
// rewrote.
int KeepScalarArithmeticOnHost(torch::jit::Graph& graph,
                               const std::set<const torch::jit::Node*>& leave = {});

}  // namespace kforge
