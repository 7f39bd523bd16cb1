// `kforge propose` and `kforge serve proposer` (see proposer_cli.h).
#include "services/proposer/proposer_cli.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/grpc_server.h"
#include "common/serve_flags.h"
#include "common/store.h"
#include "common/tensor_signature.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "services/proposer/llm/llm_options.h"
#include "services/proposer/llm/llm_proposer.h"
#include "services/proposer/proposal_service.h"
#include "services/proposer/synth/synthesizer.h"
#include "spdlog/spdlog.h"
#include "common/cli.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<v1::Target> ParseTargetFile(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  std::stringstream text;
  text << in.rdbuf();
  v1::Target target;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  auto status = google::protobuf::util::JsonStringToMessage(text.str(), &target, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path.string(), " is not a kforge.v1.Target in protobuf JSON: ", status.ToString(),
        "; pass a capture's targets/<id>/ directory"));
  }
  if (target.nodes_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path.string(), " holds a target without nodes; re-run kforge capture"));
  }
  return target;
}

std::string OneLine(const std::string& json_text) {
  auto parsed = nlohmann::ordered_json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? json_text : parsed.dump();
}

std::string Micros(double seconds) { return absl::StrFormat("%.1f us", seconds * 1e6); }

}  // namespace

absl::StatusOr<v1::Target> LoadTarget(const std::string& dir_or_id,
                                      const std::string& capture_dir) {
  if (dir_or_id.empty()) {
    return absl::InvalidArgumentError("--target is empty; pass a targets/<id>/ dir or an id");
  }
  std::error_code ec;
  const fs::path given(dir_or_id);
  if (fs::is_directory(given, ec)) return ParseTargetFile(given / "target.json");
  if (fs::is_regular_file(given, ec)) return ParseTargetFile(given);
  // An id (or its prefix) under the capture directory.
  const fs::path targets = fs::path(capture_dir) / "targets";
  std::vector<fs::path> matches;
  if (fs::is_directory(targets, ec)) {
    for (const auto& entry : fs::directory_iterator(targets, ec)) {
      if (entry.is_directory() && absl::StartsWith(entry.path().filename().string(), dir_or_id)) {
        matches.push_back(entry.path());
      }
    }
  }
  if (matches.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no target '", dir_or_id, "': not a directory, not a file, and no ", targets.string(),
        "/", dir_or_id, "*; pass a capture's targets/<id>/ dir or --capture DIR"));
  }
  if (matches.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("target id prefix '", dir_or_id, "' matches ",
                                                   matches.size(), " targets; give more of it"));
  }
  return ParseTargetFile(matches[0] / "target.json");
}

int RunPropose(const ProposeArgs& args, std::ostream& out, std::ostream& err) {
  absl::StatusOr<v1::Target> target = LoadTarget(args.target, args.capture_dir);
  if (!target.ok()) {
    err << "kforge propose: " << target.status().message() << "\n";
    return 2;
  }
  if (args.proposer != "synth") {
    err << "kforge propose: only the built-in 'synth' proposer runs here; for LLM proposers "
           "run `kforge serve proposer --llm ...` or a job\n";
    return 2;
  }
  // A CPU capture's target, as the CUDA kernels written for it see it (as kforge optimize does).
  *target = ForCudaKernels(*std::move(target));
  synth::Synthesizer synthesizer;
  v1::ProposeRequest request;
  *request.mutable_target() = *target;
  request.set_n(args.n);
  request.set_seed(args.seed);
  request.set_proposer(args.proposer);
  absl::StatusOr<v1::ProposeResponse> response = synthesizer.Propose(request);
  if (!response.ok()) {
    err << "kforge propose: " << response.status().message() << "\n";
    return 1;
  }
  if (!response->refusal().empty()) {
    err << "kforge propose: no proposals for target " << target->id() << ": "
        << response->refusal() << "\n";
    if (args.json) {
      std::string json;
      (void)google::protobuf::util::MessageToJsonString(*response, &json);
      out << json << "\n";
    }
    return 3;
  }
  if (args.json) {
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    std::string json;
    (void)google::protobuf::util::MessageToJsonString(*response, &json, options);
    out << json;
    return 0;
  }
  const v1::SubgraphNode& node = target->nodes(0);
  const std::string family = synthesizer.registry().FamilyFor(*target);
  out << "target " << (target->id().empty() ? "(no id)" : target->id()) << "  " << node.op()
      << (node.overload().empty() ? "" : "." + node.overload()) << "  family " << family
      << "\n";
  for (int i = 0; i < response->candidates_size(); ++i) {
    const v1::Candidate& c = response->candidates(i);
    std::map<std::string, std::string> params(c.params().begin(), c.params().end());
    absl::StatusOr<synth::ConfigReport> report =
        synthesizer.Explain(*target, request.gpu(), params);
    out << "\n[" << i + 1 << "] " << c.proposer() << "  id " << c.id().substr(0, 16);
    if (report.ok()) {
      out << "  prior " << Micros(report->estimated_s) << " (floor "
          << Micros(report->floor_s) << ")";
    }
    out << "\n    params: ";
    if (report.ok()) {
      out << absl::StrReplaceAll(report->config, {{";", " "}});
    } else {
      for (const auto& [name, value] : params) out << name << "=" << value << " ";
    }
    out << "\n    plan: " << OneLine(c.launch_plan_json()) << "\n";
  }
  return 0;
}

namespace {

struct ServeArgs {
  ServeFlags serve;
  std::vector<std::string> llm_backends;
  std::string llm_base_url, llm_model, llm_api_key_env, llm_api_key_file;
};

void Fail(const std::string& message, int code) {
  std::fprintf(stderr, "kforge serve proposer: %s\n", message.c_str());
  cli::SetExitCode(code);
}

void RunServe(const ServeArgs& args) {
  std::unique_ptr<Store> store;
  if (!args.serve.store_url.empty()) {
    absl::StatusOr<std::unique_ptr<Store>> opened = OpenStore(args.serve.store_url);
    if (!opened.ok()) return Fail(std::string(opened.status().message()), 2);
    store = *std::move(opened);
  }
  std::vector<std::unique_ptr<Proposer>> proposers;
  proposers.push_back(std::make_unique<synth::Synthesizer>());
  for (const std::string& backend : args.llm_backends) {
    LlmOptions options;
    options.backend = backend;
    options.base_url = args.llm_base_url;
    options.model = args.llm_model;
    options.api_key_env = args.llm_api_key_env;
    options.api_key_file = args.llm_api_key_file;
    absl::StatusOr<std::unique_ptr<Proposer>> llm = MakeLlmProposer(options, store.get());
    if (!llm.ok()) return Fail(absl::StrCat("--llm ", backend, ": ", llm.status().message()), 2);
    proposers.push_back(*std::move(llm));
  }

  // The services register their metrics at construction, so the server serves this registry.
  auto registry = std::make_shared<prometheus::Registry>();
  ProposalServiceImpl service(std::move(proposers), registry.get());

  absl::StatusOr<ServerOptions> options = ToServerOptions(args.serve);
  if (!options.ok()) return Fail(std::string(options.status().message()), 2);
  options->registry = registry;
  absl::StatusOr<std::unique_ptr<GrpcServer>> server = GrpcServer::Create(*options, {&service});
  if (!server.ok()) return Fail(std::string(server.status().message()), 3);
  spdlog::info("proposer: serving ProposalService ({}) on port {}{}",
               absl::StrJoin(service.ProposerNames(), ", "), (*server)->port(),
               (*server)->metrics_port() > 0
                   ? absl::StrCat(", /metrics on port ", (*server)->metrics_port())
                   : "");
  ServeUntilSignal(**server);
}

}  // namespace

void RegisterProposerCommands(CLI::App& app) {
  auto propose = std::make_shared<ProposeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "propose", "Print the synthesizer's proposals (family, params, prior, launch plan) for a "
                 "captured target");
  cmd->add_option("--target", propose->target,
                  "a capture's targets/<id>/ directory, its target.json, or a target id")
      ->required();
  cmd->add_option("--capture", propose->capture_dir,
                  "capture output directory where target ids are looked up");
  cmd->add_option("--n", propose->n, "number of proposals")->check(CLI::Range(1, 64));
  cmd->add_option("--seed", propose->seed, "seed: same seed, same proposals");
  cmd->add_flag("--json", propose->json, "print the ProposeResponse as JSON");
  cmd->callback([propose] { cli::SetExitCode(RunPropose(*propose, std::cout, std::cerr)); });

  CLI::App* serve = cli::ServeCommand(app);
  auto args = std::make_shared<ServeArgs>();
  CLI::App* server = serve->add_subcommand(
      "proposer", "Serve ProposalService: the synthesizer, plus LLM backends with --llm");
  AddServeFlags(server, &args->serve, "0.0.0.0:50053",
                "where LLM transcripts go: dir:PATH or redis://HOST:PORT[/DB]");
  server->add_option("--llm", args->llm_backends,
                     "also serve an LLM proposer: openai (any OpenAI-compatible server) or "
                     "anthropic; repeatable");
  server->add_option("--llm-base-url", args->llm_base_url, "LLM endpoint (default: the backend's)");
  server->add_option("--llm-model", args->llm_model, "LLM model name");
  server->add_option("--llm-api-key-env", args->llm_api_key_env,
                     "environment variable holding the API key");
  server->add_option("--llm-api-key-file", args->llm_api_key_file, "file holding the API key");
  server->callback([args] { RunServe(*args); });
}

}  // namespace kforge
