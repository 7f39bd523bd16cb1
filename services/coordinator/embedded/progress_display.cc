// ProgressDisplay (see progress_display.h).
#include "services/coordinator/embedded/progress_display.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/tensor_signature.h"
#include "services/coordinator/embedded/target_selection.h"

namespace kforge {
namespace {

constexpr double kRedrawInterval_s = 0.1;
constexpr size_t kLabelWidth = 48;

std::string Fit(const std::string& text, size_t width) {
  if (text.size() <= width) return text;
  return text.substr(0, width - 3) + "...";
}

std::string Speedup(double speedup) {
  return speedup > 0 ? absl::StrFormat("%.2fx", speedup) : "-";
}

}  // namespace

double EstimateRemainingSeconds(const ProgressState& state, double now_s) {
  int completed = 0, remaining = 0;
  for (const ProgressState::Row& row : state.rows) {
    completed += row.completed;
    if (!row.stopped) remaining += std::max(0, row.budget - row.completed);
  }
  const double elapsed = now_s - state.start_s;
  if (remaining == 0) return 0;
  const int this_run = completed - state.completed_at_start;
  double eta = -1;
  if (this_run > 0 && elapsed > 0) eta = elapsed / this_run * remaining;
  if (state.time_budget_s > 0) {
    const double left = std::max(0.0, state.time_budget_s - elapsed);
    eta = eta < 0 ? left : std::min(eta, left);
  }
  return eta;
}

std::string FormatDuration(double seconds) {
  if (seconds < 0 || !std::isfinite(seconds)) return "--";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

std::vector<std::string> RenderProgress(const ProgressState& state, double now_s) {
  std::vector<std::string> lines;
  lines.push_back(absl::StrFormat("  %-*s %9s %8s  %-16s %s", kLabelWidth, "target", "iters",
                                  "best", "last", "state"));
  int completed = 0, budget = 0;
  for (const ProgressState::Row& row : state.rows) {
    completed += row.completed;
    budget += row.stopped ? row.completed : std::max(row.budget, row.completed);
    lines.push_back(
        absl::StrFormat("  %-*s %9s %8s  %-16s %s", kLabelWidth, Fit(row.label, kLabelWidth),
                        absl::StrCat(row.completed, "/", row.budget), Speedup(row.best_speedup),
                        Fit(row.last_verdict.empty() ? "-" : row.last_verdict, 16), row.state));
  }
  const double elapsed = now_s - state.start_s;
  std::string footer = absl::StrFormat("  %d/%d evaluations, elapsed %s", completed, budget,
                                       FormatDuration(elapsed));
  if (state.reconfirming) {
    absl::StrAppend(&footer, ", re-timing the fastest candidates in fresh processes");
  } else {
    absl::StrAppend(&footer, ", ETA ", FormatDuration(EstimateRemainingSeconds(state, now_s)));
  }
  lines.push_back(std::move(footer));
  return lines;
}

ProgressDisplay::ProgressDisplay(std::FILE* stream, bool live, std::function<double()> clock)
    : stream_(stream), live_(live), clock_(std::move(clock)) {}

double ProgressDisplay::Now() const {
  if (clock_) return clock_();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void ProgressDisplay::Clear() {
  if (!live_ || lines_drawn_ == 0) return;
  // Up to the block's first line, then erase everything below.
  std::fprintf(stream_, "\x1b[%dF\x1b[J", lines_drawn_);
  lines_drawn_ = 0;
}

void ProgressDisplay::Redraw(bool force) {
  if (!live_ || !searching_) return;
  const double now = Now();
  if (!force && last_draw_s_ >= 0 && now - last_draw_s_ < kRedrawInterval_s) return;
  last_draw_s_ = now;
  Clear();
  for (const std::string& line : RenderProgress(state_, now)) {
    std::fprintf(stream_, "%s\n", line.c_str());
    ++lines_drawn_;
  }
  std::fflush(stream_);
}

void ProgressDisplay::Message(const std::string& line) {
  Clear();
  std::fprintf(stream_, "%s\n", line.c_str());
  std::fflush(stream_);
  Redraw(/*force=*/true);
}

void ProgressDisplay::StartSearch(const std::vector<v1::Target>& targets,
                                  const std::vector<int>& completed, int iterations_per_target,
                                  double time_budget_s) {
  state_ = ProgressState();
  state_.start_s = Now();
  state_.time_budget_s = time_budget_s;
  for (size_t i = 0; i < targets.size(); ++i) {
    ProgressState::Row row;
    row.label = absl::StrCat(TargetOpName(targets[i]), " ", TargetSignature(targets[i]));
    row.budget = iterations_per_target;
    row.completed = i < completed.size() ? completed[i] : 0;
    state_.completed_at_start += row.completed;
    state_.rows.push_back(std::move(row));
  }
  searching_ = true;
  Redraw(/*force=*/true);
}

void ProgressDisplay::OnEvent(const SearchEvent& event) {
  if (event.target_index >= state_.rows.size()) return;
  ProgressState::Row& row = state_.rows[event.target_index];
  const std::string verdict =
      event.latest ? v1::Verdict_Name(event.latest->evaluation().verdict()) : "";
  switch (event.kind) {
    case SearchEvent::Kind::kIteration: {
      row.completed = event.progress.iterations();
      row.best_speedup = event.progress.best_speedup();
      row.last_verdict = verdict;
      if (!live_) {
        int completed = 0;
        for (const ProgressState::Row& r : state_.rows) completed += r.completed;
        std::fprintf(stream_, "search: %s: iteration %d/%d %s%s, best %s (%d done, ETA %s)\n",
                     Fit(row.label, kLabelWidth).c_str(), row.completed, row.budget,
                     verdict.c_str(),
                     event.latest && event.latest->evaluation().verdict() == v1::PASS
                         ? absl::StrFormat(" %.2fx", event.latest->evaluation().speedup()).c_str()
                         : "",
                     Speedup(row.best_speedup).c_str(), completed,
                     FormatDuration(EstimateRemainingSeconds(state_, Now())).c_str());
      }
      break;
    }
    case SearchEvent::Kind::kTargetStopped:
      row.stopped = true;
      row.completed = event.progress.iterations();
      row.state = absl::StrCat("stopped: ", std::string(StopReasonName(event.stop_reason)));
      if (!live_) {
        std::fprintf(stream_, "search: %s: stopped (%s) after %d iterations, best %s\n",
                     Fit(row.label, kLabelWidth).c_str(),
                     std::string(StopReasonName(event.stop_reason)).c_str(), row.completed,
                     Speedup(row.best_speedup).c_str());
      }
      break;
    case SearchEvent::Kind::kReconfirmed: {
      state_.reconfirming = true;
      const bool passed = event.latest && event.latest->evaluation().verdict() == v1::PASS;
      row.state = passed ? absl::StrFormat("runoff: %.2fx", event.latest->evaluation().speedup())
                         : absl::StrCat("runoff candidate failed: ", verdict);
      if (!live_) {
        std::fprintf(
            stream_, "confirm: %s: candidate %s %s in a fresh process%s\n",
            Fit(row.label, kLabelWidth).c_str(),
            event.latest ? event.latest->candidate().id().substr(0, 12).c_str() : "?",
            verdict.c_str(),
            passed ? absl::StrFormat(" at %.2fx", event.latest->evaluation().speedup()).c_str()
                   : "");
      }
      break;
    }
  }
  if (!live_) std::fflush(stream_);
  Redraw(/*force=*/event.kind != SearchEvent::Kind::kIteration);
}

void ProgressDisplay::Finish() {
  if (!searching_) return;
  Redraw(/*force=*/true);
  searching_ = false;
  lines_drawn_ = 0;  // the final block stays on screen
}

}  // namespace kforge
