// Shards and details TSVs of kforge-synth-sweep (see sweep_details.h).
#include "tools/bench/sweep_details.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_io.h"

namespace kforge::bench {

bool Shard::Contains(std::string_view config) const {
  uint64_t z = 0xCBF29CE484222325ULL;  // FNV-1a: stable across processes, unlike absl::Hash
  for (unsigned char c : config) z = (z ^ c) * 0x100000001B3ULL;
  z += 0x9E3779B97F4A7C15ULL;  // then a splitmix64 finalizer to mix the low bits
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return z % static_cast<uint64_t>(count) == static_cast<uint64_t>(index);
}

absl::StatusOr<Shard> ParseShard(std::string_view text) {
  std::vector<std::string> parts = absl::StrSplit(std::string(text), '/');
  Shard s;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &s.index) ||
      !absl::SimpleAtoi(parts[1], &s.count) || s.count < 1 || s.index < 0 || s.index >= s.count) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shard '", std::string(text),
                     "' is not I/N with 0 <= I < N (e.g. 0/2 and 1/2 for two GPUs)"));
  }
  return s;
}

std::string DetailsFileName(const std::string& row_id, const Shard& shard) {
  if (shard.count == 1) return absl::StrCat(row_id, ".tsv");
  return absl::StrCat(row_id, ".shard-", shard.index, "-of-", shard.count, ".tsv");
}

bool IsFinalQuickVerdict(std::string_view verdict) {
  return !verdict.empty() && verdict != "SKIPPED" && verdict != "NOT_EVALUATED";
}

absl::StatusOr<std::map<std::string, DetailsLine>> ReadFinishedDetails(const std::string& dir,
                                                                       const std::string& row_id) {
  std::map<std::string, DetailsLine> out;
  std::error_code ec;
  if (dir.empty() || !std::filesystem::is_directory(dir, ec)) return out;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == row_id + ".tsv" ||
        (absl::StartsWith(name, row_id + ".shard-") && absl::EndsWith(name, ".tsv"))) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::ifstream in(path);
    std::string line;
    bool header = true;
    while (std::getline(in, line)) {
      if (header) {
        if (!absl::StartsWith(line, "config\tkernel\tcompile\tquick_verdict\tquick_us")) {
          return absl::InvalidArgumentError(
              absl::StrCat(path.string(),
                           " is not a kforge-synth-sweep details TSV (its header is not "
                           "config, kernel, compile, quick_verdict, quick_us, ...); move it "
                           "out of the --details directory"));
        }
        header = false;
        continue;
      }
      std::vector<std::string> f = absl::StrSplit(line, '\t');
      if (f.size() < 11) continue;  // a line cut short by a kill
      DetailsLine d;
      d.config = f[0];
      d.compile = f[2];
      d.quick_verdict = f[3];
      if (!IsFinalQuickVerdict(d.quick_verdict) || out.count(d.config)) continue;
      (void)absl::SimpleAtod(f[4], &d.quick_us);
      (void)absl::SimpleAtoi(f[5], &d.reps);
      d.pruned = f[6] == "1";
      (void)absl::SimpleAtod(f[7], &d.max_normalized);
      d.message = f[10];
      if (f.size() > 11) d.kernel_sha256 = f[11];
      out.emplace(d.config, std::move(d));
    }
  }
  return out;
}

std::string EagerFileName(const std::string& row_id) { return row_id + ".eager-us"; }

absl::Status WriteEagerUs(const std::string& dir, const std::string& row_id, double eager_us) {
  return WriteFileAtomically(std::filesystem::path(dir) / EagerFileName(row_id),
                             absl::StrFormat("%.3f\n", eager_us));
}

absl::StatusOr<double> ReadEagerUs(const std::string& dir, const std::string& row_id) {
  const std::string path = (std::filesystem::path(dir) / EagerFileName(row_id)).string();
  std::ifstream in(path);
  std::string text;
  double us = 0;
  if (!in || !std::getline(in, text) || !absl::SimpleAtod(absl::StripAsciiWhitespace(text), &us) ||
      us <= 0) {
    return absl::NotFoundError(absl::StrCat(
        "no eager time for row ", row_id, " in ", path,
        " (kforge-synth-sweep writes it with the row's details; for details of an older sweep, "
        "write the row's eager µs, measured by the same method, into that file)"));
  }
  return us;
}

}  // namespace kforge::bench
