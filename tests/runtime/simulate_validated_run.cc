// Test fixture "SimulatedValidation": marks a hand-written kernel as the validated,
// re-confirmed winner of one target of a `kforge optimize --device cpu` run, the way a GPU run
// leaves its winners (kernels/<target id>/ through the real WriteWinner, a real NVRTC cubin,
// report.json updated) — so that export and the runtime can be tested where there is no GPU.
// Nothing is measured: the evaluation's GPU name says it is simulated and its times are made
// up (speedup 1.5). Only tests use it.
//
//   simulate_validated_run RUN_DIR "aten::softmax dim=-1" KERNEL.cu PLAN.json
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/digest.h"
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

int Main(int argc, char** argv) {
  if (argc != 5) return Fail("usage: simulate_validated_run RUN_DIR 'OP ARG=INT' KERNEL.cu PLAN.json");
  RunDirectory dir(argv[1]);
  std::vector<std::string> match = absl::StrSplit(argv[2], absl::ByAnyChar(" ="));
  int64_t value = 0;
  if (match.size() != 3 || !absl::SimpleAtoi(match[2], &value)) return Fail("bad target match");
  absl::StatusOr<std::string> source = ReadWholeFile(argv[3]);
  absl::StatusOr<std::string> plan = ReadWholeFile(argv[4]);
  if (!source.ok() || !plan.ok()) return Fail("cannot read the kernel or its plan");
  absl::StatusOr<v1::OperatorProfile> profile = dir.ReadProfile();
  if (!profile.ok()) return Fail(std::string(profile.status().message()));
  const v1::Target* target = nullptr;
  for (const v1::Target& t : profile->targets()) {
    if (Matches(t, match[0], match[1], value)) target = &t;
  }
  if (target == nullptr) return Fail(std::string("no target matches ") + argv[2]);

  absl::StatusOr<std::unique_ptr<Compiler>> compiler = Compiler::Create({}, nullptr);
  if (!compiler.ok()) return Fail(std::string(compiler.status().message()));
  v1::EvaluatedCandidate winner;
  v1::Candidate* c = winner.mutable_candidate();
  c->set_id(CandidateId(*source, *plan));
  c->set_source(*source);
  c->set_launch_plan_json(*plan);
  c->set_proposer("fixture:simulated");
  v1::CompileOptions options;
  options.set_arch(DefaultArch());
  *winner.mutable_compile() = (*compiler)->Compile(*c, options);
  if (winner.compile().status() != v1::COMPILE_OK) return Fail("compile failed: " + winner.compile().log());
  const double eager_s = target->eager_time_s() > 0 ? target->eager_time_s() : 1e-5;
  v1::EvaluationResult* e = winner.mutable_evaluation();
  e->set_verdict(v1::PASS);
  e->set_reconfirmed(true);
  e->set_speedup(1.5);
  e->mutable_eager()->set_median_s(eager_s);
  e->mutable_candidate()->set_median_s(eager_s / 1.5);
  e->set_gpu_name("SimulatedValidation (test fixture; nothing was measured)");
  if (absl::Status s = WriteWinner(dir, *target, winner); !s.ok()) return Fail(std::string(s.message()));

  absl::StatusOr<std::string> text = ReadWholeFile(dir.report_path());
  if (!text.ok()) return Fail(std::string(text.status().message()));
  nlohmann::json report = nlohmann::json::parse(*text);
  report["status"] = "complete";
  report["message"] = "SimulatedValidation test fixture: one winner marked as validated";
  bool found = false;
  for (nlohmann::json& t : report["targets"]) {
    if (t.value("target_id", "") != target->id()) continue;
    found = true;
    t["kernel_dir"] = "kernels/" + target->id();
    t["speedup"] = 1.5;
    t["reconfirmed"] = true;
    t["best_candidate_id"] = c->id();
    t["eager_s"] = eager_s;
    t["best_s"] = eager_s / 1.5;
  }
  if (!found) return Fail("report.json does not list target " + target->id());
  if (absl::Status s = WriteFileAtomically(dir.report_path(), report.dump(2)); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  std::printf("%s\n", target->id().c_str());
  return 0;
}

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) { return kforge::Main(argc, argv); }
