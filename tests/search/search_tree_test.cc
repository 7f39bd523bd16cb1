// SearchTree: reward, UCT with progressive widening, virtual loss, failed nodes as context,
// seed reproducibility and persistence.
#include "services/coordinator/search/search_tree.h"

#include <cmath>
#include <set>

#include "gtest/gtest.h"
#include "services/coordinator/search/reward.h"
#include "tests/search/search_test_doubles.h"

namespace kforge {
namespace {

using testing::GridCandidate;
using testing::GridPoint;
using testing::GridProposerForTests;
using testing::MakeTarget;
using testing::SimulatedRunnerForTests;

// One sequential iteration with an inline runner: expand, run, back up. Returns the child.
std::optional<int> Iterate(SearchTree& tree, Proposer& proposer, CandidateRunner& runner,
                           int64_t sequence) {
  absl::StatusOr<Expansion> expansion = tree.ExpandOnce(proposer, ProposeContext{}, sequence);
  EXPECT_TRUE(expansion.ok()) << expansion.status();
  if (!expansion.ok() || !expansion->child) return std::nullopt;
  const int child = *expansion->child;
  absl::StatusOr<RunOutcome> outcome;
  runner.Run(tree.target(), tree.node(child).evaluated.candidate(), RunOptions{},
             [&outcome](absl::StatusOr<RunOutcome> r) { outcome = std::move(r); });
  EXPECT_TRUE(outcome.ok());
  EXPECT_TRUE(tree.Backup(child, *outcome).ok());
  return child;
}

SearchTree GrowTree(uint64_t seed, int iterations, SearchOptions options = {}) {
  GridProposerForTests proposer;
  SimulatedRunnerForTests runner;
  SearchTree tree(MakeTarget("t", 0.5), seed, options);
  for (int i = 0; i < iterations; ++i) Iterate(tree, proposer, runner, i);
  return tree;
}

RunOutcome PassOutcome(double speedup) {
  RunOutcome out;
  out.compile.set_status(v1::COMPILE_OK);
  out.evaluation.set_verdict(v1::PASS);
  out.evaluation.set_speedup(speedup);
  return out;
}

TEST(RewardTest, IsAFunctionOfSpeedupOnlyAndZeroForInvalid) {
  EXPECT_DOUBLE_EQ(RewardForSpeedup(1.0, 4.0), 0.5);
  EXPECT_NEAR(RewardForSpeedup(4.0, 4.0), 0.9, 1e-12);
  // Symmetric in log-speedup: 2x faster and 2x slower sit equally far from eager.
  EXPECT_NEAR(RewardForSpeedup(2.0, 4.0) + RewardForSpeedup(0.5, 4.0), 1.0, 1e-12);
  EXPECT_LT(RewardForSpeedup(1.5, 4.0), RewardForSpeedup(1.6, 4.0));
  EXPECT_GT(RewardForSpeedup(0.1, 4.0), 0.0);  // a slow valid kernel beats any invalid one
  EXPECT_LE(RewardForSpeedup(1e12, 4.0), 1.0);
  EXPECT_EQ(RewardForSpeedup(0.0, 4.0), 0.0);
  EXPECT_EQ(RewardForSpeedup(std::nan(""), 4.0), 0.0);
  v1::EvaluationResult mismatch;
  mismatch.set_verdict(v1::MISMATCH);
  mismatch.set_speedup(5.0);
  EXPECT_EQ(RewardForEvaluation(mismatch, 4.0), 0.0);
}

TEST(SearchTreeTest, ProgressiveWideningGrowsRootChildrenWithVisits) {
  for (double alpha : {0.5, 0.7}) {
    SearchOptions options;
    options.widening_exponent = alpha;
    GridProposerForTests proposer;
    SimulatedRunnerForTests runner;
    runner.set_failures(false);  // every child passes, so the root never widens by fallback
    SearchTree tree(MakeTarget("t", 0.5), 7, options);
    int previous_children = 0;
    for (int i = 0; i < 80; ++i) {
      const int visits_before = tree.node(SearchTree::kRoot).visits;
      ASSERT_TRUE(Iterate(tree, proposer, runner, i));
      const int children = static_cast<int>(tree.node(SearchTree::kRoot).children.size());
      const int allowed =
          static_cast<int>(std::ceil(std::pow(std::max(1, visits_before), alpha) - 1e-9));
      EXPECT_EQ(children, allowed) << "alpha " << alpha << " iteration " << i;
      EXPECT_GE(children, previous_children);
      previous_children = children;
    }
    EXPECT_EQ(previous_children, static_cast<int>(std::ceil(std::pow(79, alpha) - 1e-9)));
    // Deeper nodes obey the same limit.
    for (int n = 1; n < tree.size(); ++n) {
      EXPECT_LE(static_cast<int>(tree.node(n).children.size()),
                std::max(1, static_cast<int>(
                                std::ceil(std::pow(std::max(1, tree.node(n).visits - 1), alpha)))))
          << "node " << n;
    }
  }
}

TEST(SearchTreeTest, SelectionDescendsByUctAndTheBestSubtreeGetsMoreVisits) {
  SearchTree tree(MakeTarget("t", 0.5), 1);
  // Three root children: a fast, a slow and a mediocre kernel.
  const double speedups[] = {3.0, 0.5, 1.2};
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<int> child =
        tree.AddPendingChild(SearchTree::kRoot, GridCandidate(GridPoint{i, 0, 0, 0, 0}), i);
    ASSERT_TRUE(child.ok());
    ASSERT_TRUE(tree.Backup(*child, PassOutcome(speedups[i])).ok());
  }
  EXPECT_GT(tree.UctScore(1), tree.UctScore(3));
  EXPECT_GT(tree.UctScore(3), tree.UctScore(2));
  // Root has 3 visits -> ceil(sqrt(3)) = 2 allowed children; it has 3, so selection descends,
  // into the fast kernel, which has room for its first child.
  EXPECT_EQ(tree.SelectNodeToExpand(), std::optional<int>(1));
}

TEST(SearchTreeTest, VirtualLossSpreadsParallelSelections) {
  for (double virtual_loss : {1.0, 0.0}) {
    SearchOptions options;
    options.virtual_loss = virtual_loss;
    SearchTree tree(MakeTarget("t", 0.5), 1, options);
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<int> child =
          tree.AddPendingChild(SearchTree::kRoot, GridCandidate(GridPoint{i, 0, 0, 0, 0}), i);
      ASSERT_TRUE(child.ok());
      ASSERT_TRUE(tree.Backup(*child, PassOutcome(2.0)).ok());
    }
    // Three selections in flight at once, none backed up.
    std::vector<int> selected;
    for (int k = 0; k < 3; ++k) {
      std::optional<int> node = tree.SelectNodeToExpand();
      ASSERT_TRUE(node);
      selected.push_back(*node);
      ASSERT_TRUE(tree.AddPendingChild(*node, GridCandidate(GridPoint{k, 1, 1, 1, 1}), 3 + k).ok());
    }
    const std::set<int> distinct(selected.begin(), selected.end());
    if (virtual_loss > 0) {
      EXPECT_EQ(distinct, (std::set<int>{1, 2, 3}));
      EXPECT_EQ(tree.node(SearchTree::kRoot).virtual_loss, 3);
    } else {
      EXPECT_EQ(distinct, std::set<int>{1});  // without it every selection piles onto one node
    }
  }
}

TEST(SearchTreeTest, FailedNodesStayInTheTreeAsContextAndAreNeverExpanded) {
  GridProposerForTests proposer;
  SimulatedRunnerForTests runner;
  SearchTree tree(MakeTarget("t", 0.5), 3);
  for (int i = 0; i < 150; ++i) Iterate(tree, proposer, runner, i);
  const std::map<std::string, int> counts = tree.VerdictCounts();
  int failed = 0;
  for (int n = 1; n < tree.size(); ++n) {
    if (tree.node(n).verdict() == v1::PASS) continue;
    ++failed;
    EXPECT_TRUE(tree.node(n).children.empty()) << "failed node " << n << " was expanded";
    EXPECT_EQ(tree.node(n).reward, 0.0);
    EXPECT_EQ(tree.node(n).visits, 1);
  }
  ASSERT_GT(failed, 0) << "the simulated landscape should produce failures";
  EXPECT_EQ(tree.size() - 1, 150);  // nothing was dropped
  EXPECT_EQ(counts.at("PASS") + failed, 150);
  // A failed node went to a later proposal of its parent as a sibling, with its verdict.
  bool failed_sibling_seen = false;
  for (const v1::ProposeRequest& request : proposer.requests()) {
    for (const v1::EvaluatedCandidate& sibling : request.siblings()) {
      const v1::Verdict v = sibling.evaluation().verdict();
      if (v != v1::PASS && v != v1::VERDICT_UNSPECIFIED) failed_sibling_seen = true;
    }
  }
  EXPECT_TRUE(failed_sibling_seen);
  // A compile failure is recorded as COMPILE_ERROR with its log, and the cubin is not kept.
  for (int n = 1; n < tree.size(); ++n) {
    EXPECT_TRUE(tree.node(n).evaluated.compile().cubin().empty());
    if (tree.node(n).verdict() == v1::COMPILE_ERROR) {
      EXPECT_EQ(tree.node(n).evaluated.compile().status(), v1::COMPILE_FAILED);
    }
  }
}

TEST(SearchTreeTest, ProposeRequestCarriesParentSiblingsBestAndADerivedSeed) {
  GridProposerForTests proposer;
  SimulatedRunnerForTests runner;
  SearchTree tree(MakeTarget("t", 0.5), 11);
  for (int i = 0; i < 10; ++i) Iterate(tree, proposer, runner, i);
  const std::optional<int> best = tree.BestNode();
  ASSERT_TRUE(best);
  ProposeContext context;
  context.proposer = "synth";
  const v1::ProposeRequest request = tree.BuildProposeRequest(*best, context);
  EXPECT_EQ(request.parent().candidate().id(), tree.node(*best).candidate_id());
  EXPECT_EQ(request.siblings_size(), static_cast<int>(tree.node(*best).children.size()));
  EXPECT_EQ(request.best().candidate().id(), tree.node(*best).candidate_id());
  EXPECT_EQ(request.proposer(), "synth");
  EXPECT_EQ(request.seed(), tree.NextExpansionSeed(*best));
  // The history: every evaluated node of the tree, without its source.
  int evaluated = 0;
  for (int n = 1; n < tree.size(); ++n) evaluated += !tree.node(n).pending;
  EXPECT_EQ(request.history_size(), evaluated);
  for (const v1::EvaluatedCandidate& h : request.history()) {
    EXPECT_TRUE(h.candidate().source().empty());
    EXPECT_TRUE(h.compile().ptx().empty());
    EXPECT_FALSE(h.candidate().id().empty());
  }
  // Seeds differ between nodes and between expansions of the same node.
  std::set<uint64_t> seeds;
  for (const v1::ProposeRequest& r : proposer.requests()) seeds.insert(r.seed());
  EXPECT_EQ(seeds.size(), proposer.requests().size());
  const v1::ProposeRequest root = tree.BuildProposeRequest(SearchTree::kRoot, ProposeContext{});
  EXPECT_FALSE(root.has_parent());
}

TEST(SearchTreeTest, SameSeedGivesTheSameTreeAndAnotherSeedAnotherTree) {
  const std::string a = GrowTree(42, 60).Serialize();
  const std::string b = GrowTree(42, 60).Serialize();
  const std::string c = GrowTree(43, 60).Serialize();
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(SearchTreeTest, BestNodeIsTheFastestPassingCandidate) {
  SearchTree tree = GrowTree(5, 40);
  const std::optional<int> best = tree.BestNode();
  ASSERT_TRUE(best);
  const std::vector<int> ranked = tree.PassingNodesBySpeedup();
  ASSERT_FALSE(ranked.empty());
  EXPECT_EQ(ranked.front(), *best);
  for (size_t i = 1; i < ranked.size(); ++i) {
    EXPECT_GE(tree.node(ranked[i - 1]).speedup(), tree.node(ranked[i]).speedup());
  }
  EXPECT_GT(tree.node(SearchTree::kRoot).best_reward, 0.5);  // better than eager
  EXPECT_DOUBLE_EQ(tree.node(SearchTree::kRoot).best_reward, tree.node(*best).reward);
}

TEST(SearchTreeTest, RoundTripWithPendingNodesThenContinuingMatchesAnUninterruptedTree) {
  GridProposerForTests proposer;
  SimulatedRunnerForTests runner;
  SearchTree tree(MakeTarget("t", 0.5, 2e-4, 5e-5), 9);
  for (int i = 0; i < 20; ++i) Iterate(tree, proposer, runner, i);
  // Two in flight, as a coordinator would have at a crash.
  std::vector<int> pending;
  for (int k = 0; k < 2; ++k) {
    absl::StatusOr<Expansion> e = tree.ExpandOnce(proposer, ProposeContext{}, 20 + k);
    ASSERT_TRUE(e.ok() && e->child);
    pending.push_back(*e->child);
  }
  const std::string bytes = tree.Serialize();
  absl::StatusOr<SearchTree> restored = SearchTree::Deserialize(bytes);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->Serialize(), bytes);
  EXPECT_EQ(restored->PendingNodes(), pending);
  for (int n = 0; n < tree.size(); ++n) {
    EXPECT_EQ(restored->node(n).virtual_loss, tree.node(n).virtual_loss) << "node " << n;
    EXPECT_EQ(restored->node(n).children, tree.node(n).children) << "node " << n;
  }
  // Continue both the same way: finish the pending ones, then 20 more iterations each.
  for (SearchTree* t : {&tree, &*restored}) {
    for (int node : t->PendingNodes()) {
      absl::StatusOr<RunOutcome> outcome;
      runner.Run(t->target(), t->node(node).evaluated.candidate(), RunOptions{},
                 [&outcome](absl::StatusOr<RunOutcome> r) { outcome = std::move(r); });
      ASSERT_TRUE(t->Backup(node, *outcome).ok());
    }
    for (int i = 22; i < 42; ++i) Iterate(*t, proposer, runner, i);
  }
  EXPECT_EQ(restored->Serialize(), tree.Serialize());
}

TEST(SearchTreeTest, DeserializeRejectsCorruptState) {
  EXPECT_FALSE(SearchTree::Deserialize("not a tree \xff\xff").ok());
  v1::SearchTreeState state = GrowTree(1, 5).ToState();
  state.set_format_version(99);
  EXPECT_FALSE(SearchTree::FromState(state).ok());
  state = GrowTree(1, 5).ToState();
  state.mutable_nodes(2)->set_parent(4);  // a parent after its child
  EXPECT_FALSE(SearchTree::FromState(state).ok());
  state = GrowTree(1, 5).ToState();
  *state.mutable_nodes(2)->mutable_evaluated()->mutable_candidate()->mutable_id() =
      state.nodes(1).evaluated().candidate().id();
  EXPECT_FALSE(SearchTree::FromState(state).ok());
}

TEST(SearchTreeTest, BackupAndAddChildRejectMisuse) {
  SearchTree tree(MakeTarget("t", 0.5), 1);
  absl::StatusOr<int> child =
      tree.AddPendingChild(SearchTree::kRoot, GridCandidate({0, 0, 0, 0, 0}), 0);
  ASSERT_TRUE(child.ok());
  EXPECT_EQ(
      tree.AddPendingChild(SearchTree::kRoot, GridCandidate({0, 0, 0, 0, 0}), 1).status().code(),
      absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(tree.AddPendingChild(*child, GridCandidate({1, 0, 0, 0, 0}), 1).ok());  // pending
  v1::Candidate no_id = GridCandidate({2, 0, 0, 0, 0});
  no_id.clear_id();
  EXPECT_FALSE(tree.AddPendingChild(SearchTree::kRoot, no_id, 1).ok());
  RunOutcome mismatch;
  mismatch.evaluation.set_verdict(v1::MISMATCH);
  ASSERT_TRUE(tree.Backup(*child, mismatch).ok());
  EXPECT_FALSE(tree.Backup(*child, mismatch).ok());                                    // twice
  EXPECT_FALSE(tree.AddPendingChild(*child, GridCandidate({1, 0, 0, 0, 0}), 1).ok());  // failed
}

// Answers root requests from a script: call i returns the grid points in script[i].
class ScriptedProposerForTests : public Proposer {
 public:
  explicit ScriptedProposerForTests(std::vector<std::vector<GridPoint>> script)
      : script_(std::move(script)) {}
  absl::StatusOr<v1::ProposeResponse> Propose(const v1::ProposeRequest&) override {
    v1::ProposeResponse response;
    if (calls_ < script_.size()) {
      for (const GridPoint& p : script_[calls_]) *response.add_candidates() = GridCandidate(p);
    }
    ++calls_;
    return response;
  }
  std::string Name() const override { return "scripted-test"; }
  size_t calls() const { return calls_; }

 private:
  std::vector<std::vector<GridPoint>> script_;
  size_t calls_ = 0;
};

TEST(SearchTreeTest, ARepeatedAnswerDoesNotExhaustANodeUntilTheBarrenLimit) {
  const GridPoint a{0, 0, 0, 0, 0};
  const GridPoint b{1, 0, 0, 0, 0};
  for (int limit : {2, 1}) {
    ScriptedProposerForTests proposer({{a}, {a}, {b}});
    SearchOptions options;
    options.barren_expansions_to_exhaust = limit;
    SearchTree tree(MakeTarget("t", 0.5), 1, options);
    absl::StatusOr<Expansion> first = tree.ExpandOnce(proposer, ProposeContext{}, 0);
    ASSERT_TRUE(first.ok() && first->child);
    // The first child is still pending, so the root is the only node to expand.
    absl::StatusOr<Expansion> second = tree.ExpandOnce(proposer, ProposeContext{}, 1);
    ASSERT_TRUE(second.ok());
    if (limit == 2) {
      ASSERT_TRUE(second->child);  // the repeat was tolerated; the next call brought b
      EXPECT_EQ(tree.node(*second->child).candidate_id(), testing::GridId(b));
      EXPECT_FALSE(tree.node(SearchTree::kRoot).exhausted);
      EXPECT_EQ(proposer.calls(), 3u);
    } else {
      EXPECT_FALSE(second->child);
      EXPECT_TRUE(tree.node(SearchTree::kRoot).exhausted);
      EXPECT_EQ(proposer.calls(), 2u);
    }
  }
}

TEST(SearchTreeTest, AProposerWithNothingNewExhaustsTheTree) {
  GridProposerForTests proposer;
  proposer.set_neighbours(false);  // three roots, no children
  proposer.set_root_limit(3);
  SimulatedRunnerForTests runner;
  SearchOptions options;
  options.proposals_per_expansion = 1;
  SearchTree tree(MakeTarget("t", 0.5), 2, options);
  int added = 0;
  for (int i = 0; i < 500 && Iterate(tree, proposer, runner, i); ++i) ++added;
  EXPECT_EQ(added, 3);
  EXPECT_FALSE(tree.SelectNodeToExpand());
  EXPECT_TRUE(tree.node(SearchTree::kRoot).exhausted);
}

}  // namespace
}  // namespace kforge
