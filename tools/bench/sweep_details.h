// What lets kforge-synth-sweep split an exhaustive sweep across GPUs and calls: shards (a
// hashed split of a row's sweep order, so each shard gets the same mix of the prior's heavy
// favourites, which sit at even positions, and light random picks) and the per-config
// results of earlier runs read back from their --details TSVs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kforge::bench {

struct Shard {
  int index = 0;
  int count = 1;
  // Whether the config whose text (Config::ToString) is `config` belongs to this shard: a
  // hash of the text, not of its position in the sweep order, because that order follows
  // the prior, which reads the GPU's bandwidth as measured by each process — two shard runs
  // may order a row differently. A hash also deals the prior's best configs (compiling ~4x
  // slower) evenly over the shards.
  bool Contains(std::string_view config) const;
};

// "i/n" with 0 <= i < n; InvalidArgument naming the flag and the expected form otherwise.
absl::StatusOr<Shard> ParseShard(std::string_view text);

// "<row>.tsv" for the whole row, "<row>.shard-<i>-of-<n>.tsv" for a shard.
std::string DetailsFileName(const std::string& row_id, const Shard& shard);

// One config's line of a details TSV (the columns WriteDetails writes).
struct DetailsLine {
  std::string config;  // Config::ToString()
  std::string compile;
  std::string quick_verdict;
  double quick_us = 0;
  int reps = 0;
  bool pruned = false;
  double max_normalized = 0;
  std::string message;
  // sha256 of the kernel's source and launch plan when it was swept: --resume carries a line
  // only while the config still generates that kernel (empty in files of older sweeps).
  std::string kernel_sha256;
};

// Whether a quick verdict is a result (PASS, MISMATCH, CRASH, COMPILE_ERROR, ...), not a
// config that was left out (SKIPPED, NOT_EVALUATED, empty) and still has to be swept.
bool IsFinalQuickVerdict(std::string_view verdict);

// The finished configs of `row_id` in every details TSV of `dir` (the row's own file and all
// its shards' files), by config string; a missing directory or row gives an empty map. A
// config in several files keeps its first finished line. InvalidArgument naming the file
// when a file is not a details TSV.
absl::StatusOr<std::map<std::string, DetailsLine>> ReadFinishedDetails(const std::string& dir,
                                                                       const std::string& row_id);

// The row's eager time by the quick pass's own method (µs), kept beside its details as
// DIR/<row>.eager-us so that a replay of the sweep (kforge-bench-search --replay) can state
// candidates as speedups over eager, as a real search sees them.
std::string EagerFileName(const std::string& row_id);
absl::Status WriteEagerUs(const std::string& dir, const std::string& row_id, double eager_us);
// NotFound naming the file and what to do when the row has none.
absl::StatusOr<double> ReadEagerUs(const std::string& dir, const std::string& row_id);

}  // namespace kforge::bench
