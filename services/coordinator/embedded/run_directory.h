// RunDirectory: the --out directory of `kforge optimize` and what lives in it, so that the
// export step, the web UI and `--resume` all find the same files:
//   run.json            what was run: model/inputs digests, seed, proposer, selected targets
//   profile.json        the capture (OperatorProfile); capture/ the capture's own files
//   trees/<id>.pb       each target's search tree (SearchTreeState), checkpointed on change
//   kernels/<id>/       the winner: kernel.cu, plan.json, candidate.json, target.json, cubin
//   report.json, summary.txt
// Every file is written to a temporary name and renamed, so an interrupted run never leaves a
// torn file behind.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/file_io.h"
#include "kforge/v1/common.pb.h"
#include "kforge/v1/search.pb.h"

namespace kforge {

// run.json: enough to refuse resuming with another model and to continue the same search.
struct RunManifest {
  static constexpr int kFormatVersion = 1;
  std::string model_path;
  std::string model_sha256;
  std::string inputs_path;
  std::string inputs_sha256;
  std::string store_url;
  std::string proposer;
  std::string device;  // the capture's device ("cpu", "cuda:0")
  uint64_t seed = 0;
  int top_k = 0;
  std::vector<std::string> target_ids;  // selected, in selection order
};

class RunDirectory {
 public:
  explicit RunDirectory(std::filesystem::path root) : root_(std::move(root)) {}

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path manifest_path() const { return root_ / "run.json"; }
  std::filesystem::path profile_path() const { return root_ / "profile.json"; }
  std::filesystem::path capture_dir() const { return root_ / "capture"; }
  std::filesystem::path report_path() const { return root_ / "report.json"; }
  std::filesystem::path summary_path() const { return root_ / "summary.txt"; }
  std::filesystem::path tree_path(const std::string& target_id) const;
  std::filesystem::path kernel_dir(const std::string& target_id) const;

  // Creates the directory (and trees/, kernels/); a clear error when it cannot.
  absl::Status Create() const;
  bool HasManifest() const;

  absl::Status WriteManifest(const RunManifest& manifest) const;
  absl::StatusOr<RunManifest> ReadManifest() const;

  absl::Status WriteProfile(const v1::OperatorProfile& profile) const;
  absl::StatusOr<v1::OperatorProfile> ReadProfile() const;

  // trees/<target id>.pb: the tree's deterministic bytes (SearchTree::Serialize).
  absl::Status WriteTree(const std::string& target_id, const std::string& serialized) const;
  // nullopt when the target has no checkpoint yet.
  absl::StatusOr<std::optional<v1::SearchTreeState>> ReadTree(const std::string& target_id) const;

 private:
  std::filesystem::path root_;
};

// sha256 of a file's contents, streamed.
absl::StatusOr<std::string> Sha256OfFile(const std::filesystem::path& path);

}  // namespace kforge
