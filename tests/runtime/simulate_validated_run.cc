// Test fixture "SimulatedValidation": marks kernels as the validated, re-confirmed winners of
// targets of a `kforge optimize --device cpu` run, the way a GPU run leaves its winners
// (kernels/<target id>/ through the real WriteWinner, a real NVRTC cubin, report.json updated)
// — so that export and the runtime can be tested where there is no GPU. Nothing is measured:
// the evaluation's GPU name says it is simulated and its times are made up (speedup 1.5). Only
// tests use it.
//
//   simulate_validated_run RUN_DIR "aten::softmax dim=-1"|ID_PREFIX KERNEL.cu PLAN.json
//       a hand-written kernel (known correct) for the target with that integer constant, or
//       whose id starts so (a chain target the synthesizer refused, for one)
//   simulate_validated_run RUN_DIR --compiled SELECTOR...
//       for each selected target, the first candidate the run proposed and compiled for it
//       (trees/<id>.pb), compiled again here;
//       SELECTOR is "OP in0=D,D,..." (the operator and its first input's sizes) or a target id
//       prefix. Such a kernel is not known to be correct: use it only where every call falls
//       back (CPU tensors), to test which graph nodes the export rewrites.
// Prints the marked target ids, one a line.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/digest.h"
#include "common/tensor_signature.h"
#include "services/coordinator/embedded/optimize_report.h"
#include "services/coordinator/embedded/run_directory.h"
#include "services/coordinator/embedded/target_selection.h"
#include "services/worker/compiler.h"

namespace kforge {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "simulate_validated_run: %s\n", message.c_str());
  return 1;
}

// "aten::softmax dim=-1": the op and one integer constant argument.
bool Matches(const v1::Target& t, const std::string& op, const std::string& arg, int64_t value) {
  if (t.nodes_size() != 1 || t.nodes(0).op() != op) return false;
  for (const v1::Argument& a : t.nodes(0).args()) {
    if (a.name() == arg && a.has_scalar() && a.scalar().has_int_value() &&
        a.scalar().int_value() == value) {
      return true;
    }
  }
  return false;
}

// "aten::batch_norm in0=1,256,56,56", or a target id prefix.
absl::StatusOr<const v1::Target*> Select(const v1::OperatorProfile& profile,
                                         const std::string& selector) {
  std::vector<const v1::Target*> found;
  std::vector<std::string> parts = absl::StrSplit(selector, ' ', absl::SkipEmpty());
  for (const v1::Target& t : profile.targets()) {
    if (parts.size() == 1) {
      if (t.id().rfind(parts[0], 0) == 0) found.push_back(&t);
      continue;
    }
    if (parts.size() != 2 || parts[1].rfind("in0=", 0) != 0 || t.nodes_size() != 1 ||
        t.nodes(0).op() != parts[0] || t.inputs_size() == 0) {
      continue;
    }
    if (absl::StrJoin(t.inputs(0).sizes(), ",") == parts[1].substr(4)) found.push_back(&t);
  }
  if (found.size() != 1) {
    return absl::NotFoundError(absl::StrCat(found.size(), " captured targets match '", selector,
                                            "' (need exactly one)"));
  }
  return found[0];
}

v1::CompileResult CompileForDefaultArch(Compiler& compiler, const v1::Candidate& c) {
  v1::CompileOptions options;
  options.set_arch(DefaultArch());
  return compiler.Compile(c, options);
}

// The first candidate the run proposed for `target` (trees/<id>.pb; a run without a GPU keeps
// them pending), compiled here again with NVRTC as the run compiled it.
absl::StatusOr<v1::EvaluatedCandidate> FirstCompiled(const RunDirectory& dir,
                                                     const v1::Target& target,
                                                     Compiler& compiler) {
  absl::StatusOr<std::optional<v1::SearchTreeState>> tree = dir.ReadTree(target.id());
  if (!tree.ok()) return tree.status();
  if (!tree->has_value()) {
    return absl::NotFoundError(absl::StrCat("target ", target.id(), " was not searched (no tree)"));
  }
  for (const v1::SearchTreeNodeState& node : (*tree)->nodes()) {
    if (!node.has_evaluated() || node.evaluated().candidate().source().empty()) continue;
    v1::EvaluatedCandidate e;
    *e.mutable_candidate() = node.evaluated().candidate();
    *e.mutable_compile() = CompileForDefaultArch(compiler, e.candidate());
    if (e.compile().status() == v1::COMPILE_OK) return e;
  }
  return absl::NotFoundError(absl::StrCat("target ", target.id(), " has no candidate that compiles"));
}

// Marks `winner` as the target's validated, re-confirmed winner.
absl::Status MarkWinner(const RunDirectory& dir, const v1::Target& target,
                        v1::EvaluatedCandidate winner, nlohmann::json& report) {
  const double eager_s = target.eager_time_s() > 0 ? target.eager_time_s() : 1e-5;
  v1::EvaluationResult* e = winner.mutable_evaluation();
  e->set_verdict(v1::PASS);
  e->set_reconfirmed(true);
  e->set_speedup(1.5);
  e->mutable_eager()->set_median_s(eager_s);
  e->mutable_candidate()->set_median_s(eager_s / 1.5);
  e->set_gpu_name("SimulatedValidation (test fixture; nothing was measured)");
  if (absl::Status s = WriteWinner(dir, target, winner); !s.ok()) return s;
  nlohmann::json* entry = nullptr;
  for (nlohmann::json& t : report["targets"]) {
    if (t.value("target_id", "") == target.id()) entry = &t;
  }
  if (entry == nullptr) {  // a target the run passed over (the synthesizer refused it)
    bool skipped = false;
    for (const nlohmann::json& t : report.value("skipped", nlohmann::json::array())) {
      skipped = skipped || t.value("target_id", "") == target.id();
    }
    if (!skipped) return absl::NotFoundError("report.json does not list target " + target.id());
    report["targets"].push_back({{"target_id", target.id()},
                                 {"op", TargetOpName(target)},
                                 {"signature", TargetSignature(target)},
                                 {"share", target.share()}});
    entry = &report["targets"].back();
  }
  nlohmann::json& t = *entry;
  t["kernel_dir"] = "kernels/" + target.id();
  t["speedup"] = 1.5;
  t["reconfirmed"] = true;
  t["best_candidate_id"] = winner.candidate().id();
  t["eager_s"] = eager_s;
  t["best_s"] = eager_s / 1.5;
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  const bool compiled = argc >= 4 && std::string(argv[2]) == "--compiled";
  if (!compiled && argc != 5) {
    return Fail("usage: simulate_validated_run RUN_DIR 'OP ARG=INT'|ID_PREFIX KERNEL.cu PLAN.json\n"
                "       simulate_validated_run RUN_DIR --compiled 'OP in0=D,D,...'|ID_PREFIX...");
  }
  RunDirectory dir(argv[1]);
  absl::StatusOr<v1::OperatorProfile> profile = dir.ReadProfile();
  if (!profile.ok()) return Fail(std::string(profile.status().message()));
  absl::StatusOr<std::string> text = ReadWholeFile(dir.report_path());
  if (!text.ok()) return Fail(std::string(text.status().message()));
  nlohmann::json report = nlohmann::json::parse(*text);

  absl::StatusOr<std::unique_ptr<Compiler>> compiler = Compiler::Create({}, nullptr);
  if (!compiler.ok()) return Fail(std::string(compiler.status().message()));
  std::vector<std::string> marked;
  if (compiled) {
    for (int i = 3; i < argc; ++i) {
      absl::StatusOr<const v1::Target*> target = Select(*profile, argv[i]);
      if (!target.ok()) return Fail(std::string(target.status().message()));
      absl::StatusOr<v1::EvaluatedCandidate> winner = FirstCompiled(dir, **target, **compiler);
      if (!winner.ok()) return Fail(std::string(winner.status().message()));
      if (absl::Status s = MarkWinner(dir, **target, *std::move(winner), report); !s.ok()) {
        return Fail(std::string(s.message()));
      }
      marked.push_back((*target)->id());
    }
  } else {
    absl::StatusOr<std::string> source = ReadWholeFile(argv[3]);
    absl::StatusOr<std::string> plan = ReadWholeFile(argv[4]);
    if (!source.ok() || !plan.ok()) return Fail("cannot read the kernel or its plan");
    const v1::Target* target = nullptr;
    std::vector<std::string> match = absl::StrSplit(argv[2], absl::ByAnyChar(" ="));
    int64_t value = 0;
    if (match.size() == 3 && absl::SimpleAtoi(match[2], &value)) {
      for (const v1::Target& t : profile->targets()) {
        if (Matches(t, match[0], match[1], value)) target = &t;
      }
    } else {
      absl::StatusOr<const v1::Target*> selected = Select(*profile, argv[2]);
      if (!selected.ok()) return Fail(std::string(selected.status().message()));
      target = *selected;
    }
    if (target == nullptr) return Fail(std::string("no target matches ") + argv[2]);

    v1::EvaluatedCandidate winner;
    v1::Candidate* c = winner.mutable_candidate();
    c->set_id(CandidateId(*source, *plan));
    c->set_source(*source);
    c->set_launch_plan_json(*plan);
    c->set_proposer("fixture:simulated");
    *winner.mutable_compile() = CompileForDefaultArch(**compiler, *c);
    if (winner.compile().status() != v1::COMPILE_OK) {
      return Fail("compile failed: " + winner.compile().log());
    }
    if (absl::Status s = MarkWinner(dir, *target, std::move(winner), report); !s.ok()) {
      return Fail(std::string(s.message()));
    }
    marked.push_back(target->id());
  }

  report["status"] = "complete";
  report["message"] = absl::StrCat("SimulatedValidation test fixture: ", marked.size(),
                                   " winner(s) marked as validated");
  if (absl::Status s = WriteFileAtomically(dir.report_path(), report.dump(2)); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  for (const std::string& id : marked) std::printf("%s\n", id.c_str());
  return 0;
}

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) { return kforge::Main(argc, argv); }
