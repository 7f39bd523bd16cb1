// SearchDriver: the search loop over a job's targets (see search_driver.h).
#include "services/coordinator/search/search_driver.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "services/coordinator/search/seed_derivation.h"

namespace kforge {

// Where runner callbacks leave their outcomes, keyed by ticket. Shared with the callbacks so
// one that arrives after Run returned (cancelled, or the driver gone) lands harmlessly.
class SearchDriver::Mailbox {
 public:
  void Deliver(int64_t ticket, absl::StatusOr<RunOutcome> outcome) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      outcomes_.insert_or_assign(ticket, std::move(outcome));
    }
    changed_.notify_all();
  }

  void Cancel() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
    }
    changed_.notify_all();
  }

  bool cancelled() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }

  // The outcome of `ticket`, waiting for it; nullopt when cancelled first.
  std::optional<absl::StatusOr<RunOutcome>> Take(int64_t ticket) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return cancelled_ || outcomes_.contains(ticket); });
    if (cancelled_) return std::nullopt;
    auto it = outcomes_.find(ticket);
    absl::StatusOr<RunOutcome> outcome = std::move(it->second);
    outcomes_.erase(it);
    return outcome;
  }

  int64_t NextTicket() {
    std::lock_guard<std::mutex> lock(mu_);
    return next_ticket_++;
  }

 private:
  // std::mutex rather than absl::Mutex: ThreadSanitizer sees it in an uninstrumented absl.
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<int64_t, absl::StatusOr<RunOutcome>> outcomes_;
  bool cancelled_ = false;
  int64_t next_ticket_ = 0;
};

namespace {

void AddUsage(const v1::LlmUsage& from, v1::LlmUsage* to) {
  to->set_input_tokens(to->input_tokens() + from.input_tokens());
  to->set_output_tokens(to->output_tokens() + from.output_tokens());
  to->set_cost_usd(to->cost_usd() + from.cost_usd());
  to->set_calls(to->calls() + from.calls());
}

}  // namespace

SearchDriver::SearchDriver(Proposer& proposer, CandidateRunner& runner, SearchDriverOptions options)
    : proposer_(proposer),
      runner_(runner),
      options_(std::move(options)),
      scheduler_(options_.scheduler),
      mailbox_(std::make_shared<Mailbox>()) {
  options_.max_in_flight = std::max(1, options_.max_in_flight);
}

SearchDriver::~SearchDriver() = default;

uint64_t SearchDriver::TreeSeed(uint64_t run_seed, std::string_view target_id) {
  return DeriveSeed(run_seed, target_id, 0);
}

absl::StatusOr<size_t> SearchDriver::AddTarget(v1::Target target) {
  const uint64_t seed = TreeSeed(options_.seed, target.id());
  return AddTree(SearchTree(std::move(target), seed, options_.search));
}

absl::StatusOr<size_t> SearchDriver::ResumeTarget(const v1::SearchTreeState& state) {
  absl::StatusOr<SearchTree> tree = SearchTree::FromState(state);
  if (!tree.ok()) return tree.status();
  return AddTree(*std::move(tree));
}

absl::StatusOr<size_t> SearchDriver::AddTree(SearchTree tree) {
  if (ran_) {
    return absl::FailedPreconditionError(
        "targets must be added before SearchDriver::Run; start a new driver to add more");
  }
  for (const TargetState& t : targets_) {
    if (t.tree.target().id() == tree.target().id()) {
      return absl::AlreadyExistsError(absl::StrCat(
          "target ", tree.target().id(), " was added to this search twice; add each once"));
    }
  }
  targets_.emplace_back(std::move(tree));
  return targets_.size() - 1;
}

void SearchDriver::Cancel() { mailbox_->Cancel(); }

double SearchDriver::Now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

TargetStatus SearchDriver::StatusOf(size_t target) const {
  const TargetState& t = targets_[target];
  const v1::Target& proto = t.tree.target();
  TargetStatus status;
  status.share = proto.share();
  status.eager_time_s = proto.eager_time_s();
  status.floor_s = proto.floor_s();
  status.iterations = t.tree.DispatchedCount();
  status.in_flight = t.in_flight;
  if (std::optional<int> best = t.tree.BestNode()) {
    status.best_speedup = t.tree.node(*best).speedup();
  }
  status.finished = t.finished != StopReason::kNone;
  return status;
}

StopReason SearchDriver::CurrentStopReason(size_t target, bool time_over) const {
  const TargetState& t = targets_[target];
  if (t.finished != StopReason::kNone) return t.finished;
  const StopReason reason = scheduler_.StopReasonFor(StatusOf(target));
  if (reason != StopReason::kNone) return reason;
  return time_over ? StopReason::kTimeBudget : StopReason::kNone;
}

v1::TargetProgress SearchDriver::ProgressOf(size_t target) const {
  const SearchTree& tree = targets_[target].tree;
  v1::TargetProgress progress;
  *progress.mutable_target() = tree.target();
  progress.set_iterations(tree.CompletedCount());
  for (const auto& [verdict, count] : tree.VerdictCounts()) {
    (*progress.mutable_verdict_counts())[verdict] = count;
  }
  if (std::optional<int> best = tree.BestNode()) {
    const SearchTreeNode& node = tree.node(*best);
    progress.set_best_speedup(node.speedup());
    progress.set_best_candidate_id(node.candidate_id());
    *progress.mutable_best() = node.evaluated.evaluation();
  }
  progress.set_stopped_near_floor(scheduler_.NearFloor(StatusOf(target)));
  return progress;
}

int64_t SearchDriver::Dispatch(size_t target, const v1::Candidate& candidate, bool fresh_process) {
  const int64_t ticket = mailbox_->NextTicket();
  std::shared_ptr<Mailbox> mailbox = mailbox_;
  runner_.Run(targets_[target].tree.target(), candidate, RunOptions{.fresh_process = fresh_process},
              [mailbox, ticket](absl::StatusOr<RunOutcome> outcome) {
                mailbox->Deliver(ticket, std::move(outcome));
              });
  return ticket;
}

void SearchDriver::Dispatch(size_t target, int node) {
  // A runner may complete synchronously inside Run; the outcome then waits in the mailbox.
  ++targets_[target].in_flight;
  const v1::Candidate& candidate = targets_[target].tree.node(node).evaluated.candidate();
  const int64_t ticket = Dispatch(target, candidate, /*fresh_process=*/false);
  fifo_.push_back(InFlight{ticket, target, node});
}

void SearchDriver::Checkpoint(size_t target) {
  if (on_checkpoint_) on_checkpoint_(target, targets_[target].tree);
}

void SearchDriver::AnnounceStops(bool time_over) {
  for (size_t i = 0; i < targets_.size(); ++i) {
    TargetState& t = targets_[i];
    if (t.stop_announced || t.in_flight > 0) continue;
    const StopReason reason = CurrentStopReason(i, time_over);
    if (reason == StopReason::kNone) continue;
    t.stop_announced = true;
    if (on_progress_) {
      SearchEvent event;
      event.kind = SearchEvent::Kind::kTargetStopped;
      event.target_index = i;
      event.progress = ProgressOf(i);
      event.stop_reason = reason;
      on_progress_(event);
    }
  }
}

absl::StatusOr<SearchResult> SearchDriver::Run() {
  if (ran_) {
    return absl::FailedPreconditionError(
        "SearchDriver::Run was called twice; a driver runs once, resume into a new one");
  }
  ran_ = true;
  const double start_s = Now();
  auto time_over = [&] {
    return options_.time_budget_s > 0.0 && Now() - start_s >= options_.time_budget_s;
  };

  // Resume: re-run what was in flight when the previous run stopped, in its dispatch order.
  int64_t next_sequence = 0;
  std::vector<std::tuple<int64_t, size_t, int>> pending;
  for (size_t i = 0; i < targets_.size(); ++i) {
    next_sequence = std::max(next_sequence, targets_[i].tree.MaxDispatchSequence() + 1);
    for (int node : targets_[i].tree.PendingNodes()) {
      pending.emplace_back(targets_[i].tree.node(node).dispatch_sequence, i, node);
    }
  }
  std::sort(pending.begin(), pending.end());
  for (const auto& [sequence, target, node] : pending) Dispatch(target, node);

  while (true) {
    if (mailbox_->cancelled()) return absl::CancelledError("search cancelled");
    const bool out_of_time = time_over();
    while (!out_of_time && static_cast<int>(fifo_.size()) < options_.max_in_flight) {
      std::vector<TargetStatus> statuses;
      for (size_t i = 0; i < targets_.size(); ++i) statuses.push_back(StatusOf(i));
      const std::optional<size_t> pick = scheduler_.Pick(statuses);
      if (!pick) break;
      TargetState& t = targets_[*pick];
      absl::StatusOr<Expansion> expansion =
          t.tree.ExpandOnce(proposer_, options_.propose, next_sequence);
      if (!expansion.ok()) {
        t.finished = StopReason::kProposerError;
        t.error = std::string(expansion.status().message());
        Checkpoint(*pick);  // the failed call still counts toward the node's next seed
        continue;
      }
      AddUsage(expansion->usage, &llm_usage_);
      if (!expansion->child) {
        // Nothing expandable is left; a proposer that refused the target outright never
        // produced a single node.
        const bool refused = t.tree.DispatchedCount() == 0 && !expansion->refusal.empty();
        t.finished = refused ? StopReason::kRefused : StopReason::kExhausted;
        t.error = expansion->refusal;
        Checkpoint(*pick);  // exhaustion marks are state too
        continue;
      }
      ++next_sequence;
      Dispatch(*pick, *expansion->child);
      Checkpoint(*pick);
    }
    AnnounceStops(out_of_time);
    if (fifo_.empty()) break;

    const InFlight front = fifo_.front();
    std::optional<absl::StatusOr<RunOutcome>> outcome = mailbox_->Take(front.ticket);
    if (!outcome) return absl::CancelledError("search cancelled");
    fifo_.pop_front();
    TargetState& t = targets_[front.target];
    --t.in_flight;
    if (!outcome->ok()) {
      mailbox_->Cancel();  // nothing else in flight is backed up after a runner failure
      return absl::Status(outcome->status().code(),
                          absl::StrCat("candidate runner failed on target ", t.tree.target().id(),
                                       ": ", outcome->status().message()));
    }
    if (absl::Status backed_up = t.tree.Backup(front.node, **outcome); !backed_up.ok()) {
      return backed_up;
    }
    Checkpoint(front.target);
    if (on_progress_) {
      SearchEvent event;
      event.kind = SearchEvent::Kind::kIteration;
      event.target_index = front.target;
      event.progress = ProgressOf(front.target);
      event.latest = &t.tree.node(front.node).evaluated;
      on_progress_(event);
    }
  }

  SearchResult result;
  result.llm_usage = llm_usage_;
  const bool out_of_time = time_over();
  for (size_t i = 0; i < targets_.size(); ++i) {
    TargetSearchResult r;
    r.progress = ProgressOf(i);
    r.search_best_speedup = r.progress.best_speedup();
    r.stop_reason = CurrentStopReason(i, out_of_time);
    // The loop also ends when the budget is spent while a target still had room.
    if (r.stop_reason == StopReason::kNone) r.stop_reason = StopReason::kTimeBudget;
    r.error = targets_[i].error;
    result.targets.push_back(std::move(r));
  }
  if (absl::Status reconfirmed = Reconfirm(result.targets); !reconfirmed.ok()) {
    return reconfirmed;
  }
  return result;
}

absl::Status SearchDriver::Reconfirm(std::vector<TargetSearchResult>& results) {
  if (options_.max_reconfirmations <= 0) {
    for (size_t i = 0; i < targets_.size(); ++i) {
      if (std::optional<int> best = targets_[i].tree.BestNode()) {
        results[i].best = targets_[i].tree.node(*best).evaluated;
      }
    }
    return absl::OkStatus();
  }
  // Round r re-runs each unsettled target's r-th fastest candidate; a round dispatches at
  // most max_in_flight at a time and takes results in dispatch order. A target is settled
  // once `runoff` candidates passed in fresh processes, or one has and the next is outside
  // the runoff margin (or its runs are spent); the fastest of those that passed, by its fresh
  // timing, is the winner.
  const int wanted = std::clamp(options_.runoff, 1, options_.max_reconfirmations);
  std::vector<std::vector<int>> ranked(targets_.size());
  std::vector<std::vector<v1::EvaluatedCandidate>> passed(targets_.size());
  for (size_t i = 0; i < targets_.size(); ++i) {
    ranked[i] = targets_[i].tree.PassingNodesBySpeedup();
    // Until one passes here, nothing is reported as the winner.
    results[i].progress.set_best_speedup(0.0);
    results[i].progress.clear_best_candidate_id();
    results[i].progress.clear_best();
  }
  for (int round = 0; round < options_.max_reconfirmations; ++round) {
    std::vector<size_t> batch;
    for (size_t i = 0; i < targets_.size(); ++i) {
      if (round >= static_cast<int>(ranked[i].size())) continue;
      const SearchTree& tree = targets_[i].tree;
      const bool in_margin = tree.node(ranked[i][round]).speedup() >=
                             (1.0 - options_.runoff_margin) * tree.node(ranked[i][0]).speedup();
      if (passed[i].empty() || (static_cast<int>(passed[i].size()) < wanted && in_margin)) {
        batch.push_back(i);
      }
    }
    for (size_t begin = 0; begin < batch.size();
         begin += static_cast<size_t>(options_.max_in_flight)) {
      const size_t end = std::min(batch.size(), begin + options_.max_in_flight);
      std::vector<int64_t> tickets;
      for (size_t k = begin; k < end; ++k) {
        const size_t i = batch[k];
        tickets.push_back(
            Dispatch(i, targets_[i].tree.node(ranked[i][round]).evaluated.candidate(), true));
      }
      for (size_t k = begin; k < end; ++k) {
        const size_t i = batch[k];
        std::optional<absl::StatusOr<RunOutcome>> outcome = mailbox_->Take(tickets[k - begin]);
        if (!outcome) return absl::CancelledError("search cancelled during re-confirmation");
        if (!outcome->ok()) {
          mailbox_->Cancel();
          return absl::Status(
              outcome->status().code(),
              absl::StrCat("candidate runner failed re-confirming target ",
                           targets_[i].tree.target().id(), ": ", outcome->status().message()));
        }
        const SearchTreeNode& node = targets_[i].tree.node(ranked[i][round]);
        v1::EvaluatedCandidate confirmed;
        *confirmed.mutable_candidate() = node.evaluated.candidate();
        *confirmed.mutable_compile() = (*outcome)->compile;
        *confirmed.mutable_evaluation() = (*outcome)->evaluation;
        confirmed.mutable_evaluation()->set_reconfirmed(true);
        confirmed.mutable_evaluation()->set_verdict(EffectiveVerdict(**outcome));
        if (on_progress_) {
          SearchEvent event;
          event.kind = SearchEvent::Kind::kReconfirmed;
          event.target_index = i;
          event.progress = results[i].progress;
          event.stop_reason = results[i].stop_reason;
          event.latest = &confirmed;
          on_progress_(event);
        }
        if (confirmed.evaluation().verdict() != v1::PASS) {
          results[i].notes.push_back(
              absl::StrCat("candidate ", node.candidate_id(), " passed in the search at ",
                           node.speedup(), "x but failed re-confirmation in a fresh process: ",
                           v1::Verdict_Name(confirmed.evaluation().verdict()), " ",
                           confirmed.evaluation().diagnostics().message()));
          continue;
        }
        passed[i].push_back(std::move(confirmed));
      }
    }
  }
  for (size_t i = 0; i < targets_.size(); ++i) {
    if (passed[i].empty()) continue;
    // The fastest in its fresh run; a tie goes to the one the search ranked higher.
    size_t winner = 0;
    for (size_t k = 1; k < passed[i].size(); ++k) {
      if (passed[i][k].evaluation().speedup() > passed[i][winner].evaluation().speedup()) {
        winner = k;
      }
    }
    if (passed[i].size() > 1) {
      std::vector<std::string> runs;
      for (const v1::EvaluatedCandidate& c : passed[i]) {
        runs.push_back(absl::StrFormat("%s %.3fx", c.candidate().id().substr(0, 12),
                                       c.evaluation().speedup()));
      }
      results[i].notes.push_back(absl::StrCat(
          "runoff in fresh processes of the search's fastest: ", absl::StrJoin(runs, ", "),
          "; ", passed[i][winner].candidate().id().substr(0, 12), " won"));
    }
    v1::EvaluatedCandidate& best = passed[i][winner];
    results[i].progress.set_best_speedup(best.evaluation().speedup());
    results[i].progress.set_best_candidate_id(best.candidate().id());
    *results[i].progress.mutable_best() = best.evaluation();
    results[i].best = std::move(best);
  }
  return absl::OkStatus();
}

}  // namespace kforge
