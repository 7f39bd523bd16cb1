// `kforge report` (see report_cli.h).
#include "services/coordinator/report_cli.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/blob_store.h"
#include "common/cli.h"
#include "common/status.h"
#include "common/store.h"
#include "common/tensor_signature.h"
#include "common/torch_rows.h"
#include "services/coordinator/embedded/optimize_report.h"
#include "services/coordinator/embedded/run_directory.h"
#include "services/coordinator/embedded/target_selection.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

constexpr int kExitFailed = 1;
constexpr int kExitBadInput = 2;

struct ReportFlags {
  std::string run_dir;
  bool json = false;
  std::string torch_rows;
  std::string torch_inputs;
  bool search = false;
  std::string target_prefix;
};

void Fail(const absl::Status& status) {
  std::string line = absl::StrReplaceAll(status.message(), {{"\n", " "}});
  std::fprintf(stderr, "kforge report: error: %s\n", line.c_str());
  cli::SetExitCode(absl::IsInvalidArgument(status) || absl::IsNotFound(status) ? kExitBadInput
                                                                               : kExitFailed);
}

// The selected targets of the run (run.json's order) as rows; targets without a row (more than
// one node) are reported on stderr and left out.
absl::Status WriteTorchRows(const ReportFlags& flags, const RunDirectory& dir) {
  KF_ASSIGN_OR_RETURN(RunManifest manifest, dir.ReadManifest());
  absl::StatusOr<v1::OperatorProfile> profile = dir.ReadProfile();
  if (!profile.ok()) {
    return absl::Status(profile.status().code(),
                        absl::StrCat(profile.status().message(),
                                     " (the run has no capture yet: run kforge optimize first)"));
  }
  std::map<std::string, const v1::Target*> by_id;
  for (const v1::Target& t : profile->targets()) by_id[t.id()] = &t;

  std::unique_ptr<Store> store;
  if (!flags.torch_inputs.empty()) {
    std::error_code ec;
    fs::create_directories(flags.torch_inputs, ec);
    if (ec || !fs::is_directory(flags.torch_inputs)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--torch-inputs ", flags.torch_inputs, ": cannot create the directory (",
                       ec ? ec.message() : "a file of that name is in the way", ")"));
    }
    absl::StatusOr<std::unique_ptr<Store>> opened = OpenStore(manifest.store_url);
    if (!opened.ok()) {
      return absl::Status(opened.status().code(),
                          absl::StrCat("cannot open the run's store ", manifest.store_url, ": ",
                                       opened.status().message()));
    }
    store = *std::move(opened);
  }

  nlohmann::json rows = nlohmann::json::array();
  for (const std::string& id : manifest.target_ids) {
    auto found = by_id.find(id);
    if (found == by_id.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir.manifest_path().string(), " selects target ", id, ", which ",
                       dir.profile_path().string(), " lacks; the run directory is damaged"));
    }
    const v1::Target& target = *found->second;
    absl::StatusOr<nlohmann::json> row =
        TorchRow(target, id, absl::StrCat(TargetOpName(target), " ", TargetSignature(target)),
                 FillsByArgumentName(target));
    if (absl::IsUnimplemented(row.status())) {
      std::fprintf(stderr, "kforge report: note: no torch row for %s\n",
                   std::string(row.status().message()).c_str());
      continue;
    }
    if (!row.ok()) return row.status();
    if (store != nullptr) {
      absl::StatusOr<std::string> bytes = GetBlob(*store, target.captured_inputs());
      if (!bytes.ok()) {
        return absl::Status(
            bytes.status().code(),
            absl::StrCat("the captured inputs of target ", id, " (blob ",
                         target.captured_inputs().sha256(), ") are not readable from store ",
                         manifest.store_url, ": ", bytes.status().message(),
                         "; drop --torch-inputs to time on random inputs"));
      }
      const fs::path file = fs::absolute(fs::path(flags.torch_inputs) / absl::StrCat(id, ".pt"));
      KF_RETURN_IF_ERROR(WriteFileAtomically(file, *bytes));
      // A dict keyed by input name (what capture stores); the row's inputs follow input_names.
      (*row)["inputs_file"] = file.string();
      (*row)["input_names"] =
          std::vector<std::string>(target.input_names().begin(), target.input_names().end());
    }
    rows.push_back(*std::move(row));
  }
  KF_RETURN_IF_ERROR(WriteFileAtomically(flags.torch_rows, rows.dump(2) + "\n"));
  std::printf(
      "wrote %zu torch rows (of %zu selected targets) to %s%s\n", rows.size(),
      manifest.target_ids.size(), flags.torch_rows.c_str(),
      store != nullptr ? absl::StrCat(", captured inputs in ", flags.torch_inputs).c_str() : "");
  return absl::OkStatus();
}

// Each selected target's search history (FormatSearchHistory), run.json's order; --target
// keeps the targets whose id starts with it.
absl::Status PrintSearchHistories(const ReportFlags& flags, const RunDirectory& dir) {
  KF_ASSIGN_OR_RETURN(RunManifest manifest, dir.ReadManifest());
  int printed = 0;
  for (const std::string& id : manifest.target_ids) {
    if (id.rfind(flags.target_prefix, 0) != 0) continue;
    KF_ASSIGN_OR_RETURN(std::optional<v1::SearchTreeState> state, dir.ReadTree(id));
    if (!state) {
      std::printf("%s: not searched yet (no trees/%s.pb)\n\n", id.substr(0, 12).c_str(),
                  id.c_str());
      ++printed;
      continue;
    }
    absl::StatusOr<SearchTree> tree = SearchTree::FromState(*state);
    if (!tree.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir.tree_path(id).string(), " is not a readable search tree: ", tree.status().message()));
    }
    std::printf("%s\n", FormatSearchHistory(*tree).c_str());
    ++printed;
  }
  if (printed == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--target ", flags.target_prefix, ": no selected target of ",
                     dir.manifest_path().string(), " has an id that starts so"));
  }
  return absl::OkStatus();
}

absl::Status RunReport(const ReportFlags& flags) {
  const RunDirectory dir(flags.run_dir);
  if (!dir.HasManifest()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flags.run_dir,
                     " is not a kforge optimize run (no run.json); pass the --out "
                     "directory of kforge optimize"));
  }
  if (flags.search && !flags.torch_rows.empty()) {
    return absl::InvalidArgumentError("--search and --torch-rows are two reports: pass one");
  }
  if (!flags.target_prefix.empty() && !flags.search) {
    return absl::InvalidArgumentError(
        "--target selects whose search --search prints: add --search");
  }
  if (flags.search) return PrintSearchHistories(flags, dir);
  if (!flags.torch_rows.empty()) return WriteTorchRows(flags, dir);
  if (!flags.torch_inputs.empty()) {
    return absl::InvalidArgumentError("--torch-inputs needs --torch-rows FILE");
  }
  const fs::path path = flags.json ? dir.report_path() : dir.summary_path();
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat(path.string(),
                                            " is missing: the run stopped before its report; "
                                            "run kforge optimize --resume on it"));
  }
  std::fwrite(text->data(), 1, text->size(), stdout);
  return absl::OkStatus();
}

}  // namespace

void RegisterReportCommands(CLI::App& app) {
  auto flags = std::make_shared<ReportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Print an optimize run's summary (or report.json, or what each search tried), or write "
      "its targets as rows for tools/bench/torch_compile_times.py. Exit codes: 0 done, 1 "
      "failed, 2 bad input.");
  cmd->add_option("run", flags->run_dir, "the --out directory of kforge optimize")->required();
  cmd->add_flag("--json", flags->json, "print report.json instead of summary.txt");
  cmd->add_option("--torch-rows", flags->torch_rows,
                  "write the selected single-op targets as torch_compile_times.py rows (JSON) "
                  "to this file instead of printing");
  cmd->add_option("--torch-inputs", flags->torch_inputs,
                  "with --torch-rows: write each target's captured inputs (torch.save, a dict "
                  "by input name) into this directory and point its row at them; without it "
                  "the rows are timed on random inputs");
  cmd->add_flag(
      "--search", flags->search,
      "print what each target's search tried: every candidate in dispatch order "
      "(parent, verdict, time, parameters) and, per parameter, the fastest of each value");
  cmd->add_option("--target", flags->target_prefix,
                  "with --search: only the targets whose id starts with this");
  cmd->callback([flags] {
    if (absl::Status s = RunReport(*flags); !s.ok()) return Fail(s);
    cli::SetExitCode(0);
  });
}

}  // namespace kforge
