// The `kforge eval` subcommand (see eval_cli.h).
#include "services/worker/eval_cli.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/digest.h"
#include "common/launch_plan.h"
#include "common/store.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "services/worker/compile_policy.h"
#include "services/worker/compiler.h"
#include "services/worker/evaluator.h"
#include "services/worker/evaluator_pipeline.h"
#include "common/cli.h"

namespace kforge {
namespace {

struct EvalArgs {
  std::string target;
  std::string kernel_path;
  std::string plan_path;
  bool json = false;
  std::string store_url;
  std::string arch;
  bool no_timing = false;
  bool sanitizer = false;
  bool fresh = false;
  int random_sets = 3;
  double time_limit_s = 60;
  int gpu = 0;
};

void Fail(const std::string& message, int code = 2) {
  std::fprintf(stderr, "kforge eval: %s\n", message.c_str());
  cli::SetExitCode(code);
}

absl::StatusOr<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(absl::StrCat(
        "cannot read ", path, ": ",
        std::filesystem::exists(path, ec) ? "not a regular file" : "no such file"));
  }
  uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec || size > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s is %d bytes; at most %d are accepted", path,
                        static_cast<int64_t>(size), static_cast<int64_t>(max_bytes)));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (!in.good() && !in.eof()) return absl::DataLossError(absl::StrCat("cannot read ", path));
  return buffer.str();
}

// True when `source` has `name` followed by '(' as a whole identifier (a definition or
// declaration of the entry point; NVRTC has the last word).
bool MentionsFunction(const std::string& source, const std::string& name) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = source.find(name); at != std::string::npos;
       at = source.find(name, at + 1)) {
    if (at > 0 && ident(source[at - 1])) continue;
    size_t next = at + name.size();
    while (next < source.size() && std::isspace(static_cast<unsigned char>(source[next]))) {
      ++next;
    }
    if (next < source.size() && source[next] == '(') return true;
  }
  return false;
}

std::string FormatSeconds(double s) {
  if (s <= 0) return "-";
  if (s < 1e-3) return absl::StrFormat("%.2f us", s * 1e6);
  if (s < 1) return absl::StrFormat("%.3f ms", s * 1e3);
  return absl::StrFormat("%.3f s", s);
}

void PrintTiming(const char* label, const v1::Timing& t) {
  std::printf("  %-9s %s  [95%% CI %s .. %s]  cv %.3f  reps %d  (%s)\n", label,
              FormatSeconds(t.median_s()).c_str(), FormatSeconds(t.ci_low_s()).c_str(),
              FormatSeconds(t.ci_high_s()).c_str(), t.cv(), t.reps(), t.mode().c_str());
}

void PrintResult(const v1::EvaluationResult& r, const LoadedTarget& target) {
  std::printf("target   %s (%s)\n", target.target.id().c_str(), target.where.c_str());
  std::printf("verdict  %s\n", v1::Verdict_Name(r.verdict()).c_str());
  if (!r.gpu_name().empty()) std::printf("gpu      %s\n", r.gpu_name().c_str());
  const v1::Diagnostics& d = r.diagnostics();
  if (!d.message().empty()) std::printf("message  %s\n", d.message().c_str());
  if (!d.input_set().empty()) {
    std::printf("input    %s, output %d, first bad element %lld\n", d.input_set().c_str(),
                d.output_index(), static_cast<long long>(d.first_bad_index()));
  }
  if (d.max_abs_error() > 0 || d.tolerance() > 0) {
    std::printf("error    max abs %.3g, max rel %.3g, normalized allowance %.3g, eager's "
                "normalized error %.3g\n",
                d.max_abs_error(), d.max_rel_error(), d.tolerance(), d.eager_error());
  }
  if (!d.log_excerpt().empty()) std::printf("log\n%s\n", d.log_excerpt().c_str());
  if (r.has_candidate()) {
    std::printf("timing\n");
    PrintTiming("candidate", r.candidate());
    PrintTiming("eager", r.eager());
    std::printf("  speedup   %.3fx   floor %s\n", r.speedup(), FormatSeconds(r.floor_s()).c_str());
  }
  if (r.has_resources()) {
    std::printf("kernel   %s: %d registers, %d B static shared, %d B local (spills %d/%d)\n",
                r.resources().entry_point().c_str(), r.resources().registers(),
                r.resources().static_shared_bytes(), r.resources().local_bytes(),
                r.resources().spill_store_bytes(), r.resources().spill_load_bytes());
  }
}

void RunEval(const EvalArgs& args) {
  absl::StatusOr<LoadedTarget> target = LoadTargetDir(args.target);
  if (!target.ok()) return Fail(std::string(target.status().message()));

  absl::StatusOr<std::string> source = ReadFile(args.kernel_path, kMaxSourceBytes);
  if (!source.ok()) return Fail(std::string(source.status().message()));
  if (size_t bad = FindInvalidUtf8(*source); bad != std::string::npos) {
    return Fail(absl::StrFormat("%s is not valid UTF-8 text (first bad byte at offset %d)",
                                args.kernel_path, static_cast<int64_t>(bad)));
  }
  absl::StatusOr<std::string> plan_json = ReadFile(args.plan_path, kMaxLaunchPlanBytes);
  if (!plan_json.ok()) return Fail(std::string(plan_json.status().message()));
  if (!nlohmann::json::accept(*plan_json)) {
    return Fail(absl::StrCat(args.plan_path,
                             " is not JSON; a launch plan is a JSON object (docs/launch-plan.md)"));
  }
  absl::StatusOr<LaunchPlan> plan = LaunchPlan::Parse(*plan_json);
  if (!plan.ok()) return Fail(absl::StrCat(args.plan_path, ": ", plan.status().message()));
  for (const std::string& entry : plan->EntryPoints()) {
    if (!MentionsFunction(*source, entry)) {
      return Fail(absl::StrFormat(
          "%s names entry point '%s', which %s does not define; declare it as extern \"C\" "
          "__global__ void %s(KfArgs args)",
          args.plan_path, entry, args.kernel_path, entry));
    }
  }

  std::unique_ptr<Store> store;
  if (!args.store_url.empty()) {
    absl::StatusOr<std::unique_ptr<Store>> opened = OpenStore(args.store_url);
    if (!opened.ok()) return Fail(std::string(opened.status().message()));
    store = *std::move(opened);
  }
  absl::StatusOr<std::unique_ptr<Compiler>> compiler = Compiler::Create({}, store.get());
  if (!compiler.ok()) return Fail(std::string(compiler.status().message()), 3);
  EvaluatorOptions evaluator_options;
  evaluator_options.gpus = {args.gpu};
  evaluator_options.default_time_limit_s = args.time_limit_s;
  absl::StatusOr<std::unique_ptr<Evaluator>> evaluator = Evaluator::Create(evaluator_options);
  if (!evaluator.ok()) return Fail(std::string(evaluator.status().message()), 3);
  EvaluationPipeline pipeline(compiler->get(), evaluator->get(), store.get());

  v1::EvaluateRequest request;
  *request.mutable_target() = target->target;
  request.mutable_candidate()->set_source(*source);
  request.mutable_candidate()->set_launch_plan_json(*plan_json);
  request.mutable_candidate()->set_id(CandidateId(*source, *plan_json));
  request.mutable_candidate()->set_proposer("file");
  request.mutable_options()->set_arch(args.arch);
  *request.mutable_policy() = DefaultValidationPolicy();
  request.mutable_policy()->set_random_input_sets(args.random_sets);
  request.mutable_policy()->set_compute_sanitizer(args.sanitizer);
  request.mutable_policy()->set_time_limit_s(args.time_limit_s);
  request.set_timing(!args.no_timing);
  request.set_fresh_process(args.fresh);

  v1::EvaluationResult result = pipeline.Evaluate(request, target->captured_inputs);
  if (args.json) {
    std::string out;
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    options.preserve_proto_field_names = true;
    (void)google::protobuf::util::MessageToJsonString(result, &out, options);
    std::printf("%s\n", out.c_str());
  } else {
    PrintResult(result, *target);
  }
  if (result.verdict() == v1::PASS) {
    cli::SetExitCode(0);
  } else {
    cli::SetExitCode(result.verdict() == v1::NOT_EVALUATED ? 3 : 1);
  }
}

}  // namespace

absl::StatusOr<LoadedTarget> LoadTargetDir(const std::string& dir_or_id) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> tried = {fs::path(dir_or_id),
                                 fs::path("kforge-out") / "targets" / dir_or_id};
  for (const fs::path& dir : tried) {
    if (!fs::is_regular_file(dir / "target.json", ec)) continue;
    LoadedTarget loaded;
    loaded.where = dir.string();
    absl::StatusOr<std::string> json = ReadFile((dir / "target.json").string(), 64 << 20);
    if (!json.ok()) return json.status();
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;
    if (auto s = google::protobuf::util::JsonStringToMessage(*json, &loaded.target, options);
        !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat((dir / "target.json").string(),
                                                     " is not a kforge.v1.Target: ",
                                                     std::string(s.message())));
    }
    absl::StatusOr<std::string> inputs =
        ReadFile((dir / "inputs.pt").string(), size_t{2} << 30);
    if (!inputs.ok()) {
      return absl::NotFoundError(absl::StrCat(
          "target ", dir.string(), " has no readable inputs.pt (", inputs.status().message(),
          "); re-run kforge capture"));
    }
    loaded.captured_inputs = *std::move(inputs);
    return loaded;
  }
  return absl::NotFoundError(absl::StrCat(
      "target '", dir_or_id, "' does not exist: neither ", tried[0].string(), " nor ",
      tried[1].string(), " holds a target.json; pass a capture's targets/<id> directory"));
}

void RegisterEvalCommands(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "Compile a candidate kernel and validate and time it against a captured target "
              "on this machine's GPU");
  cmd->add_option("--target", args->target,
                  "a capture's targets/<id> directory (target.json + inputs.pt) or an id under "
                  "./kforge-out/targets")
      ->required();
  cmd->add_option("--kernel", args->kernel_path, "the kernel's CUDA C++ device code")
      ->required();
  cmd->add_option("--plan", args->plan_path, "its launch plan (JSON, docs/launch-plan.md)")
      ->required();
  cmd->add_flag("--json", args->json, "print the EvaluationResult as JSON");
  cmd->add_option("--store", args->store_url,
                  "compile/evaluation cache: dir:PATH or redis://HOST:PORT[/DB]");
  cmd->add_option("--arch", args->arch, "compile for this arch (default: the local GPU's)");
  cmd->add_flag("--no-timing", args->no_timing, "validate only");
  cmd->add_flag("--sanitizer", args->sanitizer, "run under compute-sanitizer memcheck");
  cmd->add_flag("--fresh", args->fresh, "ignore the evaluation cache (re-confirmation)");
  cmd->add_option("--random-sets", args->random_sets, "random input sets (at least 3)")
      ->check(CLI::Range(3, 100));
  cmd->add_option("--time-limit", args->time_limit_s, "seconds per candidate")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--gpu", args->gpu, "GPU index")->check(CLI::NonNegativeNumber);
  cmd->callback([args] { RunEval(*args); });
}

}  // namespace kforge
