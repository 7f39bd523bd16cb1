// SearchTree: the MCTS over candidate kernels of one target (DESIGN.md, "MCTS").
//
// Nodes are candidates; node 0 is the root, the eager baseline, whose children are the
// proposer's roots. One iteration selects a node, asks the Proposer for a child of it, runs
// the child through a CandidateRunner and backs its reward up to the root.
//
// - Reward: scale-free, see reward.h; 0 for any non-PASS verdict.
// - Selection: UCT with progressive widening. A node may get a new child while it has fewer
//   than ceil(c * max(1, visits)^alpha) children (visits = completed evaluations in its
//   subtree; in-flight ones do not widen). Otherwise the search descends into the passing
//   child with the highest Q + C * sqrt(ln N'(parent) / N'(child)), where
//   Q = w * mean' + (1 - w) * best-in-subtree: the best matters because only the best kernel
//   is kept, the mean because one lucky sample is noise. When no child can be descended
//   into (all failed, pending, or dead subtrees), the node widens past its limit rather than
//   stall; a node the proposer keeps having nothing new for is marked exhausted.
// - Failed children (every verdict but PASS) stay in the tree and go to the proposer as
//   siblings, so the next proposal sees what broke and why; they are never expanded or
//   descended into. A fix of a broken kernel therefore arrives as a sibling whose parent is a
//   working kernel, which keeps every edge of the tree "refine a kernel that works".
// - Virtual loss: every in-flight evaluation counts as `virtual_loss` zero-reward visits on
//   its path (mean' = value_sum / (visits + vl), N' = visits + vl), so k parallel
//   selections spread over the tree instead of piling onto one node.
// - Reproducible: there is no RNG state. The seed of each proposer call is derived from the
//   tree seed, the node's candidate id and how often that node was expanded before; ties in
//   UCT go to the older node. The same seed, a deterministic proposer and the same outcomes
//   applied in the same order give the same tree.
// - Persistence: ToState/FromState (protos/kforge/v1/search.proto) keep every node,
//   including pending ones, which a resumed search runs again.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kforge/v1/coordinator.pb.h"
#include "kforge/v1/proposer.pb.h"
#include "kforge/v1/search.pb.h"
#include "services/coordinator/search/candidate_runner.h"
#include "services/proposer/proposer.h"

namespace kforge {

struct SearchOptions {
  // UCT constant. Small because competitive kernels differ by a few hundredths of reward
  // (2.0x vs 2.4x is 0.74 vs 0.80): the textbook ~0.7 makes selection near-uniform. On the
  // simulated landscape of tests/search, 0.7 found the optimum in 3 of 20 seeds within 120
  // iterations, 0.1 in 19 of 20.
  double exploration = 0.1;
  double widening_coefficient = 1.0;
  double widening_exponent = 0.5;
  // Weight of the subtree mean against its best: mostly the best (only the best kernel is
  // kept), some mean so one lucky timing does not capture the search.
  double mean_weight = 0.2;
  double reference_speedup = 4.0;  // see reward.h
  double virtual_loss = 1.0;
  // Candidates asked of the proposer per expansion; the first one not already in the tree
  // becomes the child. More than one lets a proposer that ignores siblings still make
  // progress; an LLM backend would rather set 1.
  int proposals_per_expansion = 4;
  // A node is exhausted after this many proposer calls that brought nothing new (an LLM may
  // repeat itself once; the next call has another seed), or at once on a refusal.
  int barren_expansions_to_exhaust = 2;
};

// What the proposer is told besides the tree: the GPU, the backend name and the job.
struct ProposeContext {
  v1::GpuInfo gpu;
  std::string proposer;
  std::string job_id;
};

struct SearchTreeNode {
  int index = 0;
  int parent = -1;  // -1 for the root
  std::vector<int> children;
  v1::EvaluatedCandidate evaluated;  // empty for the root
  bool pending = false;
  int visits = 0;
  double value_sum = 0.0;
  double best_reward = 0.0;
  double reward = 0.0;
  int virtual_loss = 0;  // in-flight evaluations in this subtree
  bool exhausted = false;
  int expansions = 0;
  int64_t dispatch_sequence = -1;

  bool is_root() const { return parent < 0; }
  const std::string& candidate_id() const { return evaluated.candidate().id(); }
  v1::Verdict verdict() const { return evaluated.evaluation().verdict(); }
  double speedup() const { return evaluated.evaluation().speedup(); }
  bool passed() const { return !is_root() && !pending && verdict() == v1::PASS; }
};

// One expansion: the child added (nullopt when no node of the tree can be expanded any more)
// and what the proposer reported on the way.
struct Expansion {
  std::optional<int> child;
  v1::LlmUsage usage;
  std::vector<v1::Rejection> rejections;
  std::string refusal;  // last refusal seen, if the proposer refused
};

class SearchTree {
 public:
  static constexpr int kRoot = 0;
  static constexpr int kFormatVersion = 1;

  // `seed` is this tree's seed; SearchDriver derives it from the run seed and target id.
  SearchTree(v1::Target target, uint64_t seed, SearchOptions options = {});

  static absl::StatusOr<SearchTree> FromState(const v1::SearchTreeState& state);
  static absl::StatusOr<SearchTree> Deserialize(std::string_view bytes);
  v1::SearchTreeState ToState() const;
  // Deterministic protobuf bytes of ToState().
  std::string Serialize() const;

  // --- One iteration, in steps (ExpandOnce runs the first three). ---

  // The node to ask the proposer for a child of; nullopt when nothing can be expanded.
  std::optional<int> SelectNodeToExpand() const;
  v1::ProposeRequest BuildProposeRequest(int node, const ProposeContext& context) const;
  // Adds `candidate` as a pending child of `parent` and puts virtual loss on its path.
  // Fails when the candidate has no id, is already in the tree, or `parent` cannot have
  // children (a failed or pending node).
  absl::StatusOr<int> AddPendingChild(int parent, v1::Candidate candidate,
                                      int64_t dispatch_sequence);
  // Selects, asks `proposer`, and adds the first new candidate as a pending child. When the
  // proposer returns nothing new, selection repeats; a node gets exhausted after
  // barren_expansions_to_exhaust such calls (barren calls = expansions - children), or on a
  // refusal. A proposer error is returned as is.
  absl::StatusOr<Expansion> ExpandOnce(Proposer& proposer, const ProposeContext& context,
                                       int64_t dispatch_sequence);
  // Records the outcome of a pending node and backs its reward up to the root.
  absl::Status Backup(int node, const RunOutcome& outcome);

  // --- Queries. ---

  int size() const { return static_cast<int>(nodes_.size()); }
  const SearchTreeNode& node(int index) const { return nodes_.at(index); }
  const v1::Target& target() const { return target_; }
  uint64_t seed() const { return seed_; }
  const SearchOptions& options() const { return options_; }
  std::optional<int> FindCandidate(std::string_view candidate_id) const;

  // ceil(c * max(1, visits)^alpha) for `node`.
  int AllowedChildren(int node) const;
  // UCT score of a non-root node as seen from its parent, virtual loss included.
  double UctScore(int node) const;
  // The seed of the next proposer call made for `node`.
  uint64_t NextExpansionSeed(int node) const;

  // Passing node with the highest speedup (ties: the older node); nullopt when none passed.
  std::optional<int> BestNode() const;
  // Passing nodes, fastest first (ties: older first).
  std::vector<int> PassingNodesBySpeedup() const;
  // Nodes dispatched but not yet backed up, in dispatch order.
  std::vector<int> PendingNodes() const;
  int DispatchedCount() const { return size() - 1; }
  int CompletedCount() const { return nodes_[kRoot].visits; }
  // Completed evaluations per verdict name ("PASS", "MISMATCH", ...).
  std::map<std::string, int> VerdictCounts() const;
  int64_t MaxDispatchSequence() const;  // -1 when nothing was dispatched
  // The tree as the UI's GetTree shows it (root omitted; parent_id "" for root children).
  std::vector<v1::SearchNode> ToSearchNodes() const;

 private:
  std::optional<int> SelectFrom(int node) const;
  bool CanHaveChildren(int node) const;
  double EffectiveVisits(int node) const;

  v1::Target target_;
  uint64_t seed_ = 0;
  SearchOptions options_;
  std::vector<SearchTreeNode> nodes_;
  std::unordered_map<std::string, int> index_by_candidate_;
};

// Options <-> their persisted form.
v1::SearchParameters ToProto(const SearchOptions& options);
SearchOptions SearchOptionsFromProto(const v1::SearchParameters& parameters);

}  // namespace kforge
