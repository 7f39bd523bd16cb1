// SearchTree: UCT with progressive widening and virtual loss over candidate kernels.
#include "services/coordinator/search/search_tree.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "services/coordinator/search/reward.h"
#include "services/coordinator/search/seed_derivation.h"

namespace kforge {
namespace {

void AddUsage(const v1::LlmUsage& from, v1::LlmUsage* to) {
  to->set_input_tokens(to->input_tokens() + from.input_tokens());
  to->set_output_tokens(to->output_tokens() + from.output_tokens());
  to->set_cost_usd(to->cost_usd() + from.cost_usd());
  to->set_calls(to->calls() + from.calls());
}

}  // namespace

v1::SearchParameters ToProto(const SearchOptions& options) {
  v1::SearchParameters p;
  p.set_exploration(options.exploration);
  p.set_widening_coefficient(options.widening_coefficient);
  p.set_widening_exponent(options.widening_exponent);
  p.set_mean_weight(options.mean_weight);
  p.set_reference_speedup(options.reference_speedup);
  p.set_virtual_loss(options.virtual_loss);
  p.set_proposals_per_expansion(options.proposals_per_expansion);
  p.set_barren_expansions_to_exhaust(options.barren_expansions_to_exhaust);
  return p;
}

SearchOptions SearchOptionsFromProto(const v1::SearchParameters& p) {
  SearchOptions options;
  options.exploration = p.exploration();
  options.widening_coefficient = p.widening_coefficient();
  options.widening_exponent = p.widening_exponent();
  options.mean_weight = p.mean_weight();
  options.reference_speedup = p.reference_speedup();
  options.virtual_loss = p.virtual_loss();
  options.proposals_per_expansion = p.proposals_per_expansion();
  options.barren_expansions_to_exhaust = p.barren_expansions_to_exhaust();
  return options;
}

SearchTree::SearchTree(v1::Target target, uint64_t seed, SearchOptions options)
    : target_(std::move(target)), seed_(seed), options_(options) {
  options_.proposals_per_expansion = std::max(1, options_.proposals_per_expansion);
  options_.barren_expansions_to_exhaust = std::max(1, options_.barren_expansions_to_exhaust);
  nodes_.emplace_back();  // the root: eager
}

absl::StatusOr<SearchTree> SearchTree::FromState(const v1::SearchTreeState& state) {
  if (state.format_version() != kFormatVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("search tree state has format_version ", state.format_version(),
                     ", this build reads ", kFormatVersion,
                     "; resume with the kforge version that wrote it or start the target "
                     "afresh"));
  }
  if (state.nodes_size() == 0 || state.nodes(0).parent() != -1) {
    return absl::InvalidArgumentError(
        "search tree state has no root (nodes[0] with parent -1); the stored tree is corrupt, "
        "start the target afresh");
  }
  SearchTree tree(state.target(), state.seed(), SearchOptionsFromProto(state.parameters()));
  tree.nodes_.clear();
  for (int i = 0; i < state.nodes_size(); ++i) {
    const v1::SearchTreeNodeState& s = state.nodes(i);
    SearchTreeNode node;
    node.index = i;
    node.parent = s.parent();
    if (i > 0) {
      if (s.parent() < 0 || s.parent() >= i) {
        return absl::InvalidArgumentError(
            absl::StrCat("search tree node ", i, " has parent ", s.parent(),
                         "; parents must precede their children. The stored tree is corrupt."));
      }
      const std::string& id = s.evaluated().candidate().id();
      if (id.empty() || !tree.index_by_candidate_.emplace(id, i).second) {
        return absl::InvalidArgumentError(absl::StrCat("search tree node ", i,
                                                       " has an empty or duplicate candidate id '",
                                                       id, "'. The stored tree is corrupt."));
      }
      tree.nodes_[s.parent()].children.push_back(i);
    }
    node.evaluated = s.evaluated();
    node.pending = s.pending();
    node.visits = s.visits();
    node.value_sum = s.value_sum();
    node.best_reward = s.best_reward();
    node.reward = s.reward();
    node.exhausted = s.exhausted();
    node.expansions = s.expansions();
    node.dispatch_sequence = s.dispatch_sequence();
    tree.nodes_.push_back(std::move(node));
  }
  // Virtual loss is not stored: it is exactly one per pending node on that node's path.
  for (const SearchTreeNode& n : tree.nodes_) {
    if (!n.pending) continue;
    for (int v = n.index; v >= 0; v = tree.nodes_[v].parent) ++tree.nodes_[v].virtual_loss;
  }
  return tree;
}

absl::StatusOr<SearchTree> SearchTree::Deserialize(std::string_view bytes) {
  v1::SearchTreeState state;
  if (!state.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot parse ", bytes.size(),
        " bytes as kforge.v1.SearchTreeState; the stored tree is corrupt or not a tree"));
  }
  return FromState(state);
}

v1::SearchTreeState SearchTree::ToState() const {
  v1::SearchTreeState state;
  state.set_format_version(kFormatVersion);
  *state.mutable_target() = target_;
  state.set_seed(seed_);
  *state.mutable_parameters() = ToProto(options_);
  for (const SearchTreeNode& n : nodes_) {
    v1::SearchTreeNodeState* s = state.add_nodes();
    s->set_parent(n.parent);
    if (!n.is_root()) *s->mutable_evaluated() = n.evaluated;
    s->set_pending(n.pending);
    s->set_visits(n.visits);
    s->set_value_sum(n.value_sum);
    s->set_best_reward(n.best_reward);
    s->set_reward(n.reward);
    s->set_exhausted(n.exhausted);
    s->set_expansions(n.expansions);
    s->set_dispatch_sequence(n.dispatch_sequence);
  }
  return state;
}

std::string SearchTree::Serialize() const {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);  // map fields in a stable order
    ToState().SerializeToCodedStream(&coded);
  }
  return bytes;
}

std::optional<int> SearchTree::FindCandidate(std::string_view candidate_id) const {
  auto it = index_by_candidate_.find(std::string(candidate_id));
  if (it == index_by_candidate_.end()) return std::nullopt;
  return it->second;
}

bool SearchTree::CanHaveChildren(int node) const {
  const SearchTreeNode& n = nodes_[node];
  return n.is_root() || n.passed();
}

int SearchTree::AllowedChildren(int node) const {
  const double visits = std::max(1, nodes_[node].visits);
  const double allowed =
      options_.widening_coefficient * std::pow(visits, options_.widening_exponent);
  // The epsilon keeps an exact integer (c * 4^0.5 = 2) from rounding up through pow's error.
  return std::max(1, static_cast<int>(std::ceil(allowed - 1e-9)));
}

double SearchTree::EffectiveVisits(int node) const {
  const SearchTreeNode& n = nodes_[node];
  return n.visits + options_.virtual_loss * n.virtual_loss;
}

double SearchTree::UctScore(int node) const {
  const SearchTreeNode& n = nodes_[node];
  const double visits = EffectiveVisits(node);
  if (visits <= 0.0) return 0.0;
  const double mean = n.value_sum / visits;
  const double q = options_.mean_weight * mean + (1.0 - options_.mean_weight) * n.best_reward;
  const double parent_visits = std::max(1.0, EffectiveVisits(n.parent));
  return q + options_.exploration * std::sqrt(std::log(parent_visits) / visits);
}

std::optional<int> SearchTree::SelectFrom(int node) const {
  const SearchTreeNode& n = nodes_[node];
  if (!n.exhausted && static_cast<int>(n.children.size()) < AllowedChildren(node)) return node;
  std::vector<std::pair<double, int>> ranked;
  for (int child : n.children) {
    if (nodes_[child].passed()) ranked.emplace_back(UctScore(child), child);
  }
  // Highest score first; ties to the older (lower index) node, for determinism.
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (const auto& [score, child] : ranked) {
    if (std::optional<int> selected = SelectFrom(child)) return selected;
  }
  // Nothing below can take a child: widen past the limit rather than stall.
  if (!n.exhausted) return node;
  return std::nullopt;
}

std::optional<int> SearchTree::SelectNodeToExpand() const { return SelectFrom(kRoot); }

uint64_t SearchTree::NextExpansionSeed(int node) const {
  const SearchTreeNode& n = nodes_.at(node);
  return DeriveSeed(seed_, n.is_root() ? std::string_view("root") : n.candidate_id(),
                    static_cast<uint64_t>(n.expansions));
}

v1::ProposeRequest SearchTree::BuildProposeRequest(int node, const ProposeContext& context) const {
  const SearchTreeNode& n = nodes_.at(node);
  v1::ProposeRequest request;
  *request.mutable_target() = target_;
  if (!n.is_root()) *request.mutable_parent() = n.evaluated;
  // Every existing child, failed and pending ones included: what broke and what is already
  // being tried is context for the next sibling.
  for (int child : n.children) *request.add_siblings() = nodes_[child].evaluated;
  if (std::optional<int> best = BestNode()) *request.mutable_best() = nodes_[*best].evaluated;
  for (const SearchTreeNode& other : nodes_) {
    if (other.is_root() || other.pending || other.dispatch_sequence < 0) continue;
    // What a proposer learns from: who the candidate is and how it did, not its text.
    const v1::EvaluatedCandidate& e = other.evaluated;
    v1::EvaluatedCandidate* h = request.add_history();
    v1::Candidate* c = h->mutable_candidate();
    c->set_id(e.candidate().id());
    c->set_parent_id(e.candidate().parent_id());
    c->set_proposer(e.candidate().proposer());
    *c->mutable_params() = e.candidate().params();
    h->mutable_compile()->set_status(e.compile().status());
    *h->mutable_compile()->mutable_kernels() = e.compile().kernels();
    *h->mutable_evaluation() = e.evaluation();
    h->mutable_evaluation()->clear_diagnostics();
  }
  *request.mutable_gpu() = context.gpu;
  request.set_n(options_.proposals_per_expansion);
  request.set_seed(NextExpansionSeed(node));
  request.set_proposer(context.proposer);
  request.set_job_id(context.job_id);
  return request;
}

absl::StatusOr<int> SearchTree::AddPendingChild(int parent, v1::Candidate candidate,
                                                int64_t dispatch_sequence) {
  if (parent < 0 || parent >= size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no node ", parent, " in the search tree of target ", target_.id()));
  }
  if (!CanHaveChildren(parent)) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", parent, " of target ", target_.id(),
                     " is pending or failed and cannot have children; expand a passing node"));
  }
  if (candidate.id().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a candidate from proposer '", candidate.proposer(),
        "' has no id; proposers must set Candidate.id = sha256 over source + launch plan"));
  }
  if (index_by_candidate_.contains(candidate.id())) {
    return absl::AlreadyExistsError(absl::StrCat(
        "candidate ", candidate.id(), " is already in the tree of target ", target_.id()));
  }
  const int index = size();
  SearchTreeNode child;
  child.index = index;
  child.parent = parent;
  // The tree's edge is the truth about the parent, whatever the proposer wrote.
  candidate.set_parent_id(nodes_[parent].is_root() ? "" : nodes_[parent].candidate_id());
  *child.evaluated.mutable_candidate() = std::move(candidate);
  child.pending = true;
  child.dispatch_sequence = dispatch_sequence;
  index_by_candidate_.emplace(child.candidate_id(), index);
  nodes_.push_back(std::move(child));
  nodes_[parent].children.push_back(index);
  for (int v = index; v >= 0; v = nodes_[v].parent) ++nodes_[v].virtual_loss;
  return index;
}

absl::StatusOr<Expansion> SearchTree::ExpandOnce(Proposer& proposer, const ProposeContext& context,
                                                 int64_t dispatch_sequence) {
  Expansion expansion;
  // Every barren call brings a node closer to exhaustion, so this loop ends.
  while (std::optional<int> selected = SelectNodeToExpand()) {
    const v1::ProposeRequest request = BuildProposeRequest(*selected, context);
    absl::StatusOr<v1::ProposeResponse> response = proposer.Propose(request);
    ++nodes_[*selected].expansions;
    if (!response.ok()) return response.status();
    AddUsage(response->usage(), &expansion.usage);
    for (const v1::Rejection& r : response->rejections()) expansion.rejections.push_back(r);
    if (!response->refusal().empty()) expansion.refusal = response->refusal();
    for (const v1::Candidate& candidate : response->candidates()) {
      if (candidate.id().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "proposer '", proposer.Name(), "' returned a candidate without an id for target ",
            target_.id(), "; proposers must set Candidate.id = sha256 over source + plan"));
      }
      if (index_by_candidate_.contains(candidate.id())) continue;
      absl::StatusOr<int> child = AddPendingChild(*selected, candidate, dispatch_sequence);
      if (!child.ok()) return child.status();
      expansion.child = *child;
      return expansion;
    }
    SearchTreeNode& barren = nodes_[*selected];
    const int barren_calls = barren.expansions - static_cast<int>(barren.children.size());
    if (!response->refusal().empty() || barren_calls >= options_.barren_expansions_to_exhaust) {
      barren.exhausted = true;
    }
  }
  return expansion;
}

absl::Status SearchTree::Backup(int node, const RunOutcome& outcome) {
  if (node <= kRoot || node >= size() || !nodes_[node].pending) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", node, " of target ", target_.id(),
                     " is not a pending candidate; back up each dispatched node exactly once"));
  }
  SearchTreeNode& n = nodes_[node];
  *n.evaluated.mutable_compile() = outcome.compile;
  // The cubin and PTX stay in the compile cache (by cache_key); the tree is persisted often.
  n.evaluated.mutable_compile()->clear_cubin();
  n.evaluated.mutable_compile()->clear_ptx();
  *n.evaluated.mutable_evaluation() = outcome.evaluation;
  n.evaluated.mutable_evaluation()->set_verdict(EffectiveVerdict(outcome));
  n.pending = false;
  n.reward = RewardForEvaluation(n.evaluated.evaluation(), options_.reference_speedup);
  const double reward = n.reward;
  for (int v = node; v >= 0; v = nodes_[v].parent) {
    SearchTreeNode& a = nodes_[v];
    ++a.visits;
    a.value_sum += reward;
    a.best_reward = std::max(a.best_reward, reward);
    --a.virtual_loss;
  }
  return absl::OkStatus();
}

std::vector<int> SearchTree::PassingNodesBySpeedup() const {
  std::vector<int> passing;
  for (const SearchTreeNode& n : nodes_) {
    if (n.passed()) passing.push_back(n.index);
  }
  std::stable_sort(passing.begin(), passing.end(),
                   [this](int a, int b) { return nodes_[a].speedup() > nodes_[b].speedup(); });
  return passing;
}

std::optional<int> SearchTree::BestNode() const {
  std::optional<int> best;
  for (const SearchTreeNode& n : nodes_) {
    if (n.passed() && (!best || n.speedup() > nodes_[*best].speedup())) best = n.index;
  }
  return best;
}

std::vector<int> SearchTree::PendingNodes() const {
  std::vector<int> pending;
  for (const SearchTreeNode& n : nodes_) {
    if (n.pending) pending.push_back(n.index);
  }
  std::stable_sort(pending.begin(), pending.end(), [this](int a, int b) {
    return nodes_[a].dispatch_sequence < nodes_[b].dispatch_sequence;
  });
  return pending;
}

std::map<std::string, int> SearchTree::VerdictCounts() const {
  std::map<std::string, int> counts;
  for (const SearchTreeNode& n : nodes_) {
    if (!n.is_root() && !n.pending) ++counts[v1::Verdict_Name(n.verdict())];
  }
  return counts;
}

int64_t SearchTree::MaxDispatchSequence() const {
  int64_t max_sequence = -1;
  for (const SearchTreeNode& n : nodes_) max_sequence = std::max(max_sequence, n.dispatch_sequence);
  return max_sequence;
}

std::vector<v1::SearchNode> SearchTree::ToSearchNodes() const {
  std::vector<v1::SearchNode> out;
  for (const SearchTreeNode& n : nodes_) {
    if (n.is_root()) continue;
    v1::SearchNode s;
    s.set_candidate_id(n.candidate_id());
    s.set_parent_id(nodes_[n.parent].is_root() ? "" : nodes_[n.parent].candidate_id());
    s.set_visits(n.visits);
    s.set_mean_reward(n.visits > 0 ? n.value_sum / n.visits : 0.0);
    s.set_best_reward(n.best_reward);
    s.set_verdict(n.pending ? v1::VERDICT_UNSPECIFIED : n.verdict());
    s.set_speedup(n.pending ? 0.0 : n.speedup());
    s.set_virtual_loss(n.virtual_loss);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace kforge
