// RunDirectory: files of an optimize run (see run_directory.h).
#include "services/coordinator/embedded/run_directory.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/digest.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace kforge {

namespace fs = std::filesystem;

absl::StatusOr<std::string> Sha256OfFile(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  Sha256Hasher hasher;
  std::string chunk(1 << 20, '\0');
  while (file) {
    file.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    hasher.Update(std::string_view(chunk.data(), static_cast<size_t>(file.gcount())));
  }
  if (file.bad()) return absl::DataLossError(absl::StrCat("cannot read ", path.string()));
  return hasher.Finish();
}

fs::path RunDirectory::tree_path(const std::string& target_id) const {
  return root_ / "trees" / absl::StrCat(target_id, ".pb");
}

fs::path RunDirectory::kernel_dir(const std::string& target_id) const {
  return root_ / "kernels" / target_id;
}

absl::Status RunDirectory::Create() const {
  std::error_code ec;
  for (const fs::path& dir : {root_, root_ / "trees", root_ / "kernels"}) {
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "cannot create the output directory ", dir.string(), ": ",
          ec ? ec.message() : "a file of that name is in the way", "; choose another --out"));
    }
  }
  return absl::OkStatus();
}

bool RunDirectory::HasManifest() const {
  std::error_code ec;
  return fs::is_regular_file(manifest_path(), ec);
}

absl::Status RunDirectory::WriteManifest(const RunManifest& m) const {
  nlohmann::json json = {
      {"format_version", RunManifest::kFormatVersion},
      {"model", {{"path", m.model_path}, {"sha256", m.model_sha256}}},
      {"inputs", {{"path", m.inputs_path}, {"sha256", m.inputs_sha256}}},
      {"store", m.store_url},
      {"proposer", m.proposer},
      {"device", m.device},
      // A string: JSON numbers lose 64-bit integers in most readers.
      {"seed", std::to_string(m.seed)},
      {"top_k", m.top_k},
      {"target_ids", m.target_ids},
  };
  return WriteFileAtomically(manifest_path(), json.dump(2) + "\n");
}

absl::StatusOr<RunManifest> RunDirectory::ReadManifest() const {
  absl::StatusOr<std::string> text = ReadWholeFile(manifest_path());
  if (!text.ok()) return text.status();
  nlohmann::json json = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(manifest_path().string(), " ", why,
                                                   "; it was not written by this kforge, or "
                                                   "it was edited: use a new --out"));
  };
  if (!json.is_object()) return bad("is not a JSON object");
  if (json.value("format_version", 0) != RunManifest::kFormatVersion) {
    return bad("has an unknown format_version");
  }
  try {
    RunManifest m;
    m.model_path = json.at("model").at("path").get<std::string>();
    m.model_sha256 = json.at("model").at("sha256").get<std::string>();
    m.inputs_path = json.at("inputs").at("path").get<std::string>();
    m.inputs_sha256 = json.at("inputs").at("sha256").get<std::string>();
    m.store_url = json.at("store").get<std::string>();
    m.proposer = json.at("proposer").get<std::string>();
    m.device = json.at("device").get<std::string>();
    m.seed = std::stoull(json.at("seed").get<std::string>());
    m.top_k = json.at("top_k").get<int>();
    m.target_ids = json.at("target_ids").get<std::vector<std::string>>();
    return m;
  } catch (const std::exception& e) {
    return bad(absl::StrCat("is incomplete (", e.what(), ")"));
  }
}

absl::Status RunDirectory::WriteProfile(const v1::OperatorProfile& profile) const {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  if (auto s = google::protobuf::util::MessageToJsonString(profile, &json, options); !s.ok()) {
    return absl::InternalError(absl::StrCat("cannot print the profile as JSON: ", s.ToString()));
  }
  return WriteFileAtomically(profile_path(), json);
}

absl::StatusOr<v1::OperatorProfile> RunDirectory::ReadProfile() const {
  absl::StatusOr<std::string> text = ReadWholeFile(profile_path());
  if (!text.ok()) return text.status();
  v1::OperatorProfile profile;
  if (auto s = google::protobuf::util::JsonStringToMessage(*text, &profile); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        profile_path().string(), " is not a kforge profile (", s.ToString(), "); use a new --out"));
  }
  return profile;
}

absl::Status RunDirectory::WriteTree(const std::string& target_id,
                                     const std::string& serialized) const {
  return WriteFileAtomically(tree_path(target_id), serialized);
}

absl::StatusOr<std::optional<v1::SearchTreeState>> RunDirectory::ReadTree(
    const std::string& target_id) const {
  std::error_code ec;
  if (!fs::exists(tree_path(target_id), ec)) return std::optional<v1::SearchTreeState>();
  absl::StatusOr<std::string> bytes = ReadWholeFile(tree_path(target_id));
  if (!bytes.ok()) return bytes.status();
  v1::SearchTreeState state;
  if (!state.ParseFromString(*bytes)) {
    return absl::DataLossError(absl::StrCat(tree_path(target_id).string(),
                                            " is not a search tree; delete it to restart that "
                                            "target's search"));
  }
  return std::optional<v1::SearchTreeState>(std::move(state));
}

}  // namespace kforge
