// Capture reports as text and files (see capture_report.h).
#include "services/capture/capture_report.h"

#include <google/protobuf/util/json_util.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/tensor_signature.h"

namespace kforge {
namespace {

std::string Ms(double seconds) { return absl::StrFormat("%.3f", seconds * 1e3); }

std::string Fit(const std::string& s, size_t width) {
  return s.size() <= width ? s : s.substr(0, width - 3) + "...";
}

absl::Status WriteFile(const std::filesystem::path& path, const std::string& data) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(data.data(), static_cast<std::streamsize>(data.size()));
  file.close();
  if (!file) {
    return absl::PermissionDeniedError(absl::StrCat("cannot write ", path.string()));
  }
  return absl::OkStatus();
}

std::string TargetLine(const v1::Target& t) {
  std::string inputs =
      t.has_captured_inputs()
          ? absl::StrFormat("inputs %s (%.1f MiB)", t.captured_inputs().sha256().substr(0, 12),
                            t.captured_inputs().size_bytes() / 1048576.0)
          : "inputs not kept";
  std::vector<std::string> sigs;
  for (const auto& in : t.inputs()) {
    sigs.push_back(absl::StrCat("[", absl::StrJoin(in.sizes(), ","), "]"));
  }
  return absl::StrFormat("  %s  %-28s %6.2f%%  %4d calls  %s  family %s  %s", t.id().substr(0, 12),
                         TargetOpName(t), t.share() * 100, t.calls_per_forward(),
                         absl::StrJoin(sigs, " "), t.family().empty() ? "none" : t.family(),
                         inputs);
}

}  // namespace

absl::StatusOr<std::string> ProfileToJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("cannot print JSON: ", status.ToString()));
  }
  return json;
}

std::string FormatOpTable(const v1::OperatorProfile& profile, int max_rows) {
  std::string out =
      absl::StrFormat("%-28s %-10s %6s %11s %11s %7s  %-10s %s\n", "operator", "overload", "calls",
                      "total ms", "mean ms", "share", "family", "signature");
  int rows = 0;
  double rest_s = 0, rest_share = 0;
  int64_t rest_calls = 0;
  int rest_groups = 0;
  for (const v1::OpGroup& op : profile.ops()) {
    if (max_rows > 0 && rows >= max_rows) {
      rest_s += op.total_s();
      rest_share += op.share();
      rest_calls += op.calls();
      ++rest_groups;
      continue;
    }
    ++rows;
    absl::StrAppendFormat(&out, "%-28s %-10s %6d %11s %11s %6.2f%%  %-10s %s\n", Fit(op.op(), 28),
                          Fit(op.overload(), 10), op.calls(), Ms(op.total_s()), Ms(op.mean_s()),
                          op.share() * 100, Fit(op.family(), 10), Fit(op.signature(), 100));
  }
  if (rest_groups > 0) {
    absl::StrAppendFormat(&out, "%-39s %6d %11s %11s %6.2f%%  (%d more groups)\n", "(rest)",
                          rest_calls, Ms(rest_s), "", rest_share * 100, rest_groups);
  }
  return out;
}

std::string FormatSummary(const CaptureResult& result, int max_rows) {
  const v1::OperatorProfile& p = result.profile;
  std::string out = absl::StrFormat(
      "model %s on %s: plain forward %s ms (median of %d), profiled forward %s ms\n"
      "coverage %.1f%% of the profiled forward is in the op table\n  (%s)\n\n",
      p.model_name(), p.device(), Ms(p.forward_time_s()), p.iterations(),
      Ms(result.profiled_forward_s), p.coverage() * 100, kCoverageDefinition);
  out += FormatOpTable(p, max_rows);
  absl::StrAppendFormat(&out, "\n%d op groups; top %d targets:\n", p.ops_size(), p.targets_size());
  for (const v1::Target& t : p.targets()) out += TargetLine(t) + "\n";
  bool first = true;
  for (int i = 0; i < p.notes_size(); ++i) {
    if (p.notes(i) == kCoverageDefinition) continue;
    if (first) out += "\nnotes:\n";
    first = false;
    absl::StrAppend(&out, "  ", p.notes(i), "\n");
  }
  return out;
}

absl::Status WriteCaptureDir(const std::string& dir, const CaptureResult& result) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "targets", ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create output directory ", dir, ": ", ec.message()));
  }
  auto profile_json = ProfileToJson(result.profile);
  if (!profile_json.ok()) return profile_json.status();
  if (auto s = WriteFile(fs::path(dir) / "profile.json", *profile_json); !s.ok()) return s;
  if (auto s = WriteFile(fs::path(dir) / "graph.json", result.profile.graph_json()); !s.ok()) {
    return s;
  }
  if (auto s = WriteFile(fs::path(dir) / "summary.txt", FormatSummary(result, 0)); !s.ok()) {
    return s;
  }
  for (const v1::Target& t : result.profile.targets()) {
    fs::path target_dir = fs::path(dir) / "targets" / t.id();
    fs::create_directories(target_dir, ec);
    if (ec) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create ", target_dir.string(), ": ", ec.message()));
    }
    auto json = ProfileToJson(t);
    if (!json.ok()) return json.status();
    if (auto s = WriteFile(target_dir / "target.json", *json); !s.ok()) return s;
    auto it = result.target_inputs.find(t.id());
    if (it != result.target_inputs.end()) {
      if (auto s = WriteFile(target_dir / "inputs.pt", it->second); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace kforge
