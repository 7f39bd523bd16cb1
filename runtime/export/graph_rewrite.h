// The exporter's TorchScript rewrite (docs/guarded-dispatch.md): every aten node of the model
// — submodule methods inlined into forward — that matches an exported target (same operator
// and overload, the same constant scalar arguments, and where the graph records types, the
// same sizes and dtypes) becomes
//
//   %outs : Tensor[] = kforge::run(%bundle_id, %bundle_hint, %kernel_ids, %inputs)
//   %r = prim::If(len(%outs) == 0)
//     block0: the original node (the fallback, through the dispatcher as before)
//     block1: %outs[0] (, %outs[1] ...)
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
  v1::Target target;  // a single-node target
};

struct PlannedNode {
  torch::jit::Node* node = nullptr;
  std::vector<std::string> kernel_ids;      // guard order: the runtime tries them in turn
  std::vector<torch::jit::Value*> inputs;   // the kernels' tensor inputs, in target order
};

struct RewritePlan {
  std::shared_ptr<torch::jit::Graph> graph;  // forward's graph, submodule calls inlined
  std::vector<PlannedNode> nodes;
  std::map<std::string, int> nodes_per_kernel;  // kernel id -> nodes that will call it
};

// Inlines forward's calls and finds the nodes to rewrite. Modifies the module's forward graph
// (inlining only: the model computes the same). InvalidArgument when it has no forward.
absl::StatusOr<RewritePlan> PlanRewrite(torch::jit::Module& module,
                                        const std::vector<RewriteKernel>& kernels);

// Rewrites the planned nodes; the graph then calls kforge::run (the runtime library must be
// loaded in this process for its schema). Lints the graph afterwards.
absl::Status ApplyRewrite(const RewritePlan& plan, const std::string& bundle_id,
                          const std::string& bundle_hint);

}  // namespace kforge
