#include "tools/bench/torch_times.h"

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace kforge::bench {
namespace {

std::map<std::string, double> ModeTimes(const nlohmann::json& row, const char* key) {
  std::map<std::string, double> out;
  if (!row.contains(key) || !row[key].is_object()) return out;
  for (const auto& [mode, s] : row[key].items()) {
    if (s.is_number()) out[mode] = s.get<double>();
  }
  return out;
}

}  // namespace

absl::StatusOr<std::map<std::string, TorchTimes>> ReadTorchTimes(const std::string& path) {
  std::map<std::string, TorchTimes> out;
  if (path.empty()) return out;
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("--torch-times: cannot read ", path,
                                            "; run tools/bench/torch_compile_times.py first"));
  }
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("rows") || !j["rows"].is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--torch-times: ", path, " is not torch_compile_times.py output (no \"rows\" object)"));
  }
  for (const auto& [id, r] : j["rows"].items()) {
    TorchTimes t;
    t.eager_s = r.value("eager_s", 0.0);
    t.compiled_s = ModeTimes(r, "compiled_s");
    t.graph_compiled_s = ModeTimes(r, "graph_compiled_s");
    t.note = r.value("note", "");
    out[id] = std::move(t);
  }
  return out;
}

double FastestMode(const std::map<std::string, double>& times) {
  double best = 0;
  for (const auto& [mode, s] : times) {
    if (s > 0 && (best == 0 || s < best)) best = s;
  }
  return best;
}

std::string VsTorchCompile(const TorchTimes* times, double winner_s,
                           const std::string& winner_mode, double winner_one_set_graph_s) {
  if (times == nullptr || winner_s <= 0) return "—";
  const double graph = FastestMode(times->graph_compiled_s);
  if (winner_mode == "cuda_graph" && graph > 0) {
    if (winner_one_set_graph_s <= 0) return "—";
    return absl::StrFormat("%.2f× (graph replays, one input set)", graph / winner_one_set_graph_s);
  }
  const double one = FastestMode(times->compiled_s);
  return one > 0 ? absl::StrFormat("%.2f×", one / winner_s) : "—";
}

}  // namespace kforge::bench
