// The exporter's TorchScript rewrite (docs/guarded-dispatch.md): the aten nodes of the model —
// submodule methods inlined into forward — that compute an exported target become
//
//   %outs : Tensor[] = kforge::run(%bundle_id, %bundle_hint, %kernel_ids, %inputs)
//   %r = prim::If(len(%outs) == 0)
//     block0: the original node(s) (the fallback, through the dispatcher as before)
//     block1: %outs[0] (, %outs[1] ...)
//
// A node computes a target when it has the target's operator and overload and the same
// constant scalar arguments, and — with the capture's graph.json — when the capture observed it
// called with the target's input signature (sizes, strides, dtypes). An int list the graph
// computes (a traced reshape's sizes, read from its input's) matches too: kforge::run then
// takes a fifth argument, per kernel whether every such list equals the value its kernel was
// proven for (aten::eq in the graph), and a kernel whose lists differ falls back (`arguments`). A
// chain target's nodes must be such nodes each of whose one output only the next uses; the whole
// chain is replaced (and a node of it is not rewritten on its own as well); where several targets'
// chains end at one node, the one whose kernel saves the most per call is. graph.json lists the
// nodes of the same inlined graph in the same order; without it (or when it does not line up with
// the model's graph) every node with the operator and constants gets every such kernel, and the
// runtime's guards pick the one whose shape matches.
//
// Planning and applying are separate so the exporter can write the manifest — whose sha256
// the graph carries — with only the kernels that some node will call.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <torch/script.h>

#include "absl/status/statusor.h"
#include "kforge/v1/common.pb.h"

namespace kforge {

struct RewriteKernel {
  std::string kernel_id;
  v1::Target target;  // one node, or a chain
  // What one call saves over eager (the run's eager median minus the kernel's): where
  // several targets' chains end at one node, the one that saves most is rewritten there.
  double saving_s = 0;
};

// A scalar argument the graph computes, an int list, and the value the capture recorded.
struct ComputedIntList {
  size_t node = 0;   // index into PlannedNode::nodes
  size_t input = 0;  // position among that node's inputs
  std::vector<int64_t> captured;
};

struct PlannedNode {
  torch::jit::Node* node = nullptr;         // the node whose outputs the kernels compute
  // The target's nodes in order, `node` last: one for a single op; a chain's nodes go with it
  // (the fallback runs them all).
  std::vector<torch::jit::Node*> nodes;
  std::vector<std::string> kernel_ids;      // guard order: the runtime tries them in turn
  std::vector<torch::jit::Value*> inputs;   // the kernels' tensor inputs, in target order
  // Where they are — (index into `nodes`, position among that node's inputs): rewriting an
  // earlier node replaces its outputs, so a node that consumes them finds its inputs there,
  // not in `inputs`, at ApplyRewrite.
  std::vector<std::pair<size_t, size_t>> input_positions;
  // Per kernel id: the int lists the graph computes for it — (index into `nodes`, position among
  // that node's inputs) and the value the kernel was proven for — compared at run time.
  std::vector<std::vector<ComputedIntList>> computed_lists;
};

struct RewritePlan {
  std::shared_ptr<torch::jit::Graph> graph;  // forward's graph, submodule calls inlined
  std::vector<PlannedNode> nodes;
  std::map<std::string, int> nodes_per_kernel;  // kernel id -> nodes that will call it
  // Kernel id -> why no node computes its target, for every kernel no node calls.
  std::map<std::string, std::string> unmatched;
  bool used_observations = false;  // nodes were matched by the capture's observed signatures
  std::string note;  // set when graph.json was given but could not be used, and why
};

// Inlines forward's calls (InlineAllCalls) and finds the nodes to rewrite. Modifies the
// module's forward graph (inlining only: the model computes the same). `graph_json` is the
// capture's graph.json of this model ("" when there is none). InvalidArgument when the model
// has no forward.
absl::StatusOr<RewritePlan> PlanRewrite(torch::jit::Module& module,
                                        const std::vector<RewriteKernel>& kernels,
                                        const std::string& graph_json = "");

// Inlines every prim::CallMethod / prim::CallFunction, level by level, with each callee's graph
// as written, until none is left. torch::jit::Inline inlines each callee's *optimized* graph,
// which is itself inlined only while the graph executor's optimizations are on; the capture
// turns them off for the whole process (so that it records the graph as written), and then
// Inline inlines one level only. This does not depend on that switch, and gives the nodes in
// the order of the capture's graph.json.
void InlineAllCalls(torch::jit::Graph& graph);

// Rewrites the planned nodes; the graph then calls kforge::run (the runtime library must be
// loaded in this process for its schema). Lints the graph afterwards.
absl::Status ApplyRewrite(const RewritePlan& plan, const std::string& bundle_id,
                          const std::string& bundle_hint);

}  // namespace kforge
