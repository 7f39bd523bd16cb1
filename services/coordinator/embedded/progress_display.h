// ProgressDisplay: what `kforge optimize` shows while it searches. On a terminal, a block of
// lines (one per target: iterations, best speedup, last verdict, state; then elapsed and ETA)
// redrawn in place; otherwise one plain line per event, for logs and pipes.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kforge/v1/common.pb.h"
#include "services/coordinator/search/search_driver.h"

namespace kforge {

// The state the display renders; a plain value so rendering can be tested.
struct ProgressState {
  struct Row {
    std::string label;        // "aten::softmax f32[64,512] dim=-1"
    int completed = 0;        // evaluations backed up
    int budget = 0;           // iterations_per_target
    double best_speedup = 0;  // 0: nothing passed yet
    std::string last_verdict;
    std::string state = "searching";  // or the stop reason, "confirmed 1.8x", ...
    bool stopped = false;
  };
  std::vector<Row> rows;
  double start_s = 0;
  int completed_at_start = 0;  // evaluations a resumed run already had
  double time_budget_s = 0;    // 0: none
  bool reconfirming = false;
};

// Seconds left: the remaining iterations at this run's pace, capped by the time budget.
// Negative when unknown (nothing completed yet in this run).
double EstimateRemainingSeconds(const ProgressState& state, double now_s);
// "1h02m", "3m05s", "42s", "--" (unknown).
std::string FormatDuration(double seconds);
// The lines of the live block.
std::vector<std::string> RenderProgress(const ProgressState& state, double now_s);

class ProgressDisplay {
 public:
  // `live`: redraw in place (stream is a terminal).
  ProgressDisplay(std::FILE* stream, bool live, std::function<double()> clock = nullptr);

  // A phase line ("capturing ...", "selected ..."), printed above the live block.
  void Message(const std::string& line);
  // `completed`: evaluations each target already has (a resumed run carries them over).
  void StartSearch(const std::vector<v1::Target>& targets, const std::vector<int>& completed,
                   int iterations_per_target, double time_budget_s);
  void OnEvent(const SearchEvent& event);
  // Draws the final block (live) and stops redrawing.
  void Finish();

 private:
  double Now() const;
  void Redraw(bool force);
  void Clear();

  std::FILE* stream_;
  bool live_;
  std::function<double()> clock_;
  ProgressState state_;
  bool searching_ = false;
  int lines_drawn_ = 0;
  double last_draw_s_ = -1;
};

}  // namespace kforge
