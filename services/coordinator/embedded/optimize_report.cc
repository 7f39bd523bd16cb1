// The optimize report (see optimize_report.h).
#include "services/coordinator/embedded/optimize_report.h"

#include <algorithm>
#include <map>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/tensor_signature.h"
#include "google/protobuf/util/json_util.h"

namespace kforge {
namespace {

std::string Time(double seconds) {
  if (seconds <= 0) return "-";
  if (seconds < 1e-3) return absl::StrFormat("%.2f us", seconds * 1e6);
  if (seconds < 1) return absl::StrFormat("%.3f ms", seconds * 1e3);
  return absl::StrFormat("%.3f s", seconds);
}

std::string Fit(const std::string& text, size_t width) {
  return text.size() <= width ? text : text.substr(0, width - 3) + "...";
}

nlohmann::json CompiledToJson(const CompiledCandidate& c) {
  nlohmann::json json = {
      {"candidate_id", c.candidate_id},
      {"proposer", c.proposer},
      {"params", c.params},
      {"compile_status", v1::CompileStatus_Name(c.status)},
      {"cache_hit", c.cache_hit},
      {"registers", c.registers},
      {"spill_bytes", c.spill_bytes},
  };
  if (!c.log_excerpt.empty()) json["log_excerpt"] = c.log_excerpt;
  return json;
}

nlohmann::json RejectedToJson(const RejectedCandidate& c) {
  return {{"candidate_id", c.candidate_id},
          {"proposer", c.proposer},
          {"params", c.params},
          {"verdict", v1::Verdict_Name(c.verdict)},
          {"diagnostics", nlohmann::json::parse(MessageToJsonText(c.diagnostics))}};
}

std::string ParamsText(const std::map<std::string, std::string>& params) {
  std::string text;
  for (const auto& [name, value] : params) {
    absl::StrAppend(&text, text.empty() ? "" : " ", name, "=", value);
  }
  return text;
}

}  // namespace

std::string MessageToJsonText(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

double EstimatedForwardSpeedup(const OptimizeReport& report) {
  double saved = 0;
  for (const TargetReport& t : report.targets) {
    if (t.speedup > 0) saved += t.target.share() * (1.0 - 1.0 / t.speedup);
  }
  saved = std::min(saved, 0.99);  // shares are estimates; never divide by ~0
  return 1.0 / (1.0 - saved);
}

std::vector<RejectedCandidate> RejectedCandidates(const SearchTree& tree) {
  std::vector<RejectedCandidate> rejected;
  for (int i = 0; i < tree.size(); ++i) {
    const SearchTreeNode& n = tree.node(i);
    if (n.is_root() || n.pending || n.verdict() == v1::PASS || n.verdict() == v1::NOT_EVALUATED) {
      continue;
    }
    const v1::Candidate& c = n.evaluated.candidate();
    rejected.push_back({c.id(),
                        c.proposer(),
                        {c.params().begin(), c.params().end()},
                        n.verdict(),
                        n.evaluated.evaluation().diagnostics()});
  }
  return rejected;
}

nlohmann::json ReportToJson(const OptimizeReport& report) {
  nlohmann::json targets = nlohmann::json::array();
  for (const TargetReport& t : report.targets) {
    nlohmann::json json = {
        {"target_id", t.target.id()},
        {"op", TargetOpName(t.target)},
        {"signature", TargetSignature(t.target)},
        {"family", t.target.family()},
        {"share", t.target.share()},
        {"calls_per_forward", t.target.calls_per_forward()},
        {"eager_s", t.eager_s},
        {"best_s", t.best_s},
        {"floor_s", t.floor_s},
        {"speedup", t.speedup},
        {"search_best_speedup", t.search_best_speedup},
        {"iterations", t.iterations},
        {"verdict_counts", t.verdict_counts},
        {"stop_reason", t.stop_reason},
        {"best_candidate_id", t.best_candidate_id},
        {"best_proposer", t.best_proposer},
        {"best_params", t.best_params},
        {"reconfirmed", t.reconfirmed},
        {"kernel_dir", t.kernel_dir},
        {"tree", absl::StrCat("trees/", t.target.id(), ".pb")},
        {"notes", t.notes},
    };
    if (!t.error.empty()) json["error"] = t.error;
    if (!t.compiled.empty()) {
      nlohmann::json compiled = nlohmann::json::array();
      for (const CompiledCandidate& c : t.compiled) compiled.push_back(CompiledToJson(c));
      json["compiled_candidates"] = std::move(compiled);
    }
    nlohmann::json rejected = nlohmann::json::array();
    for (const RejectedCandidate& c : t.rejected) rejected.push_back(RejectedToJson(c));
    json["rejected_candidates"] = std::move(rejected);
    targets.push_back(std::move(json));
  }
  nlohmann::json skipped = nlohmann::json::array();
  for (const SkippedTarget& s : report.skipped) {
    skipped.push_back({{"target_id", s.target.id()},
                       {"op", TargetOpName(s.target)},
                       {"signature", TargetSignature(s.target)},
                       {"share", s.target.share()},
                       {"reason", s.reason}});
  }
  nlohmann::json lanes = nlohmann::json::array();
  for (int64_t n : report.runner.evaluations_per_lane) lanes.push_back(n);
  return {
      {"format_version", 1},
      {"status", report.status},
      {"message", report.message},
      {"model", {{"path", report.model_path}, {"name", report.model_name}}},
      {"inputs", report.inputs_path},
      {"capture_device", report.capture_device},
      {"gpu", report.gpu_name},
      {"proposer", report.proposer},
      {"store", report.store_url},
      {"seed", std::to_string(report.seed)},
      {"iterations_per_target", report.iterations_per_target},
      {"time_budget_s", report.time_budget_s},
      {"resumed", report.resumed},
      {"forward_time_s", report.forward_time_s},
      {"estimated_forward_speedup", EstimatedForwardSpeedup(report)},
      {"search_wall_s", report.search_wall_s},
      {"targets", std::move(targets)},
      {"skipped", std::move(skipped)},
      {"llm_usage",
       {{"input_tokens", report.llm_usage.input_tokens()},
        {"output_tokens", report.llm_usage.output_tokens()},
        {"cost_usd", report.llm_usage.cost_usd()},
        {"calls", report.llm_usage.calls()}}},
      {"compile",
       {{"compiles", report.runner.compiles},
        {"cache_hits", report.runner.compile_cache_hits},
        {"compiled_ok", report.runner.compiled_ok}}},
      {"evaluations_per_gpu", std::move(lanes)},
  };
}

std::string FormatSummaryText(const OptimizeReport& report) {
  std::string out = absl::StrFormat(
      "kforge optimize: %s (%s)\nmodel %s, captured on %s, forward %s; proposer %s, seed %d%s\n",
      report.model_name, report.status, report.model_path, report.capture_device,
      Time(report.forward_time_s), report.proposer, report.seed,
      report.gpu_name.empty() ? "" : absl::StrCat("; GPU ", report.gpu_name));
  if (!report.message.empty()) absl::StrAppend(&out, report.message, "\n");
  absl::StrAppend(&out, "\n");
  absl::StrAppend(&out, absl::StrFormat("%-12s %-40s %6s %10s %10s %10s %8s %6s  %s\n", "target",
                                        "op / signature", "share", "eager", "best", "floor",
                                        "speedup", "iters", "stop"));
  for (const TargetReport& t : report.targets) {
    absl::StrAppend(
        &out, absl::StrFormat(
                  "%-12s %-40s %5.1f%% %10s %10s %10s %8s %6d  %s\n", t.target.id().substr(0, 12),
                  Fit(absl::StrCat(TargetOpName(t.target), " ", TargetSignature(t.target)), 40),
                  t.target.share() * 100, Time(t.eager_s), Time(t.best_s), Time(t.floor_s),
                  t.speedup > 0 ? absl::StrFormat("%.2fx", t.speedup) : "-", t.iterations,
                  t.stop_reason));
    std::string counts;
    for (const auto& [verdict, n] : t.verdict_counts) {
      absl::StrAppend(&counts, counts.empty() ? "" : ", ", verdict, " ", n);
    }
    if (!counts.empty()) absl::StrAppend(&out, "             verdicts: ", counts, "\n");
    if (!t.compiled.empty()) {
      int ok = 0;
      for (const CompiledCandidate& c : t.compiled) ok += c.status == v1::COMPILE_OK;
      absl::StrAppend(&out, absl::StrFormat("             compiled %d candidates, %d cleanly\n",
                                            t.compiled.size(), ok));
    }
    if (!t.kernel_dir.empty()) absl::StrAppend(&out, "             winner: ", t.kernel_dir, "\n");
    if (!t.best_proposer.empty()) {
      const std::string params = ParamsText(t.best_params);
      absl::StrAppend(&out, "             by ", t.best_proposer, params.empty() ? "" : ": ", params,
                      "\n");
    }
    constexpr size_t kRejectedShown = 5;  // the rest in report.json
    for (size_t i = 0; i < std::min(t.rejected.size(), kRejectedShown); ++i) {
      const RejectedCandidate& c = t.rejected[i];
      const std::string params = ParamsText(c.params);
      absl::StrAppend(&out, "             rejected ", v1::Verdict_Name(c.verdict), " by ",
                      c.proposer, params.empty() ? "" : ": ", params, "\n               ",
                      c.diagnostics.message(), "\n");
    }
    if (t.rejected.size() > kRejectedShown) {
      absl::StrAppend(&out, "             (", t.rejected.size() - kRejectedShown,
                      " more rejected in report.json)\n");
    }
    if (!t.error.empty()) absl::StrAppend(&out, "             error: ", t.error, "\n");
    for (const std::string& note : t.notes)
      absl::StrAppend(&out, "             note: ", note, "\n");
  }
  if (!report.skipped.empty()) {
    absl::StrAppend(&out, "\nskipped:\n");
    for (const SkippedTarget& s : report.skipped) {
      absl::StrAppend(
          &out, absl::StrFormat(
                    "  %-12s %-40s %5.1f%%  %s\n", s.target.id().substr(0, 12),
                    Fit(absl::StrCat(TargetOpName(s.target), " ", TargetSignature(s.target)), 40),
                    s.target.share() * 100, s.reason));
    }
  }
  if (report.status == "complete") {
    absl::StrAppend(
        &out, absl::StrFormat("\nestimated end-to-end speedup of the forward pass: %.3fx (from the "
                              "capture's time shares)\n",
                              EstimatedForwardSpeedup(report)));
  }
  if (report.llm_usage.calls() > 0) {
    absl::StrAppend(&out,
                    absl::StrFormat("LLM: %d calls, %d input + %d output tokens, $%.4f\n",
                                    report.llm_usage.calls(), report.llm_usage.input_tokens(),
                                    report.llm_usage.output_tokens(), report.llm_usage.cost_usd()));
  }
  return out;
}

std::string FormatSearchHistory(const SearchTree& tree) {
  // Dispatch order, numbered from 1; a node's parent by that number ("-" for the eager root).
  std::vector<int> order;
  for (int i = 1; i < tree.size(); ++i) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&tree](int a, int b) {
    return tree.node(a).dispatch_sequence < tree.node(b).dispatch_sequence;
  });
  std::vector<int> number(tree.size(), 0);  // by node index
  for (size_t k = 0; k < order.size(); ++k) number[order[k]] = static_cast<int>(k) + 1;

  const v1::Target& target = tree.target();
  std::string counts;
  for (const auto& [verdict, n] : tree.VerdictCounts()) {
    absl::StrAppend(&counts, counts.empty() ? "" : ", ", verdict, " ", n);
  }
  const std::optional<int> best = tree.BestNode();
  std::string out = absl::StrFormat(
      "search of %s %s %s: %d dispatched, %d evaluated%s%s\n", target.id().substr(0, 12),
      TargetOpName(target), TargetSignature(target), tree.DispatchedCount(), tree.CompletedCount(),
      counts.empty() ? "" : absl::StrCat(" (", counts, ")"),
      best ? absl::StrFormat(", best #%d %s (%.2fx eager)", number[*best],
                             Time(tree.node(*best).evaluated.evaluation().candidate().median_s()),
                             tree.node(*best).speedup())
           : "");
  if (order.empty()) return out;
  absl::StrAppend(&out, absl::StrFormat("  %4s %6s %-16s %10s %8s  %s\n", "#", "parent", "verdict",
                                        "time", "speedup", "candidate"));
  // Per parameter and value: candidates evaluated, how many passed, the fastest that did.
  struct ValueStats {
    int evaluated = 0;
    int passed = 0;
    double best_s = 0;
  };
  // A parameter's values in their natural order: numbers by value (16 before 128), then words.
  struct ValueOrder {
    bool operator()(const std::string& a, const std::string& b) const {
      double x = 0, y = 0;
      const bool a_number = absl::SimpleAtod(a, &x), b_number = absl::SimpleAtod(b, &y);
      if (a_number != b_number) return a_number;
      return a_number && x != y ? x < y : a < b;
    }
  };
  std::map<std::string, std::map<std::string, ValueStats, ValueOrder>> by_param;
  for (int i : order) {
    const SearchTreeNode& n = tree.node(i);
    const v1::Candidate& c = n.evaluated.candidate();
    const v1::EvaluationResult& e = n.evaluated.evaluation();
    const std::string params = ParamsText({c.params().begin(), c.params().end()});
    const std::string parent = n.parent == SearchTree::kRoot ? "-" : absl::StrCat(number[n.parent]);
    const bool timed = n.passed() && e.candidate().median_s() > 0;
    std::string line = absl::StrFormat("  %4d %6s %-16s %10s %8s  %s", number[i], parent,
                                       n.pending ? "pending" : v1::Verdict_Name(n.verdict()),
                                       timed ? Time(e.candidate().median_s()) : "-",
                                       timed ? absl::StrFormat("%.2fx", n.speedup()) : "-",
                                       params.empty() ? c.proposer() : params);
    if (!n.pending && !n.passed() && !e.diagnostics().message().empty()) {
      absl::StrAppend(&line, "\n", std::string(52, ' '), Fit(e.diagnostics().message(), 100));
    }
    absl::StrAppend(&out, line, "\n");
    if (n.pending) continue;
    for (const auto& [name, value] : c.params()) {
      ValueStats& v = by_param[name][value];
      ++v.evaluated;
      if (!timed) continue;
      ++v.passed;
      if (v.best_s == 0 || e.candidate().median_s() < v.best_s) v.best_s = e.candidate().median_s();
    }
  }
  std::string table;
  for (const auto& [name, values] : by_param) {
    if (values.size() < 2) continue;  // a parameter the search never varied says nothing
    for (const auto& [value, v] : values) {
      absl::StrAppend(
          &table, absl::StrFormat("  %-32s %9d %6d %10s\n", Fit(absl::StrCat(name, "=", value), 32),
                                  v.evaluated, v.passed, Time(v.best_s)));
    }
  }
  if (!table.empty()) {
    absl::StrAppend(&out,
                    absl::StrFormat("  by parameter:\n  %-32s %9s %6s %10s\n", "value", "evaluated",
                                    "passed", "fastest"),
                    table);
  }
  return out;
}

absl::Status WriteWinner(const RunDirectory& dir, const v1::Target& target,
                         const v1::EvaluatedCandidate& winner) {
  const std::filesystem::path kernel_dir = dir.kernel_dir(target.id());
  std::error_code ec;
  std::filesystem::create_directories(kernel_dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", kernel_dir.string(), ": ", ec.message()));
  }
  if (winner.compile().cubin().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the winner of target ", target.id(), " has no cubin; re-run with --resume"));
  }
  v1::EvaluatedCandidate described = winner;
  described.mutable_compile()->clear_cubin();
  described.mutable_compile()->clear_ptx();
  for (const auto& [name, data] : std::vector<std::pair<std::string, std::string>>{
           {"kernel.cu", winner.candidate().source()},
           {"plan.json", winner.candidate().launch_plan_json()},
           {"candidate.json", MessageToJsonText(described)},
           {"target.json", MessageToJsonText(target)},
           {"cubin", winner.compile().cubin()}}) {
    if (absl::Status s = WriteFileAtomically(kernel_dir / name, data); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace kforge
