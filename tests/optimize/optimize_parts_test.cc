// The parts of `kforge optimize` around the search: target selection, the run directory
// (manifest, tree checkpoints), the report and the progress display.
#include <cstdio>
#include <filesystem>
#include <string>

#include "common/tensor_signature.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/coordinator/embedded/optimize_report.h"
#include "services/coordinator/embedded/progress_display.h"
#include "services/coordinator/embedded/run_directory.h"
#include "services/coordinator/embedded/target_selection.h"
#include "services/coordinator/search/candidate_runner.h"
#include "services/coordinator/search/search_tree.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

v1::Target MakeTarget(const std::string& id, const std::string& op, double share,
                      bool inputs = true) {
  v1::Target t;
  t.set_id(id);
  v1::SubgraphNode* node = t.add_nodes();
  node->set_op(op);
  v1::Argument* self = node->add_args();
  self->set_name("self");
  self->set_tensor("in0");
  v1::Argument* dim = node->add_args();
  dim->set_name("dim");
  dim->mutable_scalar()->set_int_value(-1);
  v1::TensorSignature* in = t.add_inputs();
  in->add_sizes(64);
  in->add_sizes(512);
  in->set_dtype(v1::FLOAT32);
  t.set_share(share);
  t.set_eager_time_s(1e-5);
  if (inputs) t.mutable_captured_inputs()->set_sha256(id + "-inputs");
  return t;
}

TEST(TargetSelectionTest, TakesTheHottestSearchableTargetsAndSaysWhyOthersWereSkipped) {
  v1::OperatorProfile profile;
  *profile.add_targets() = MakeTarget("conv", "aten::convolution", 0.50);
  *profile.add_targets() = MakeTarget("relu", "aten::relu", 0.05);
  *profile.add_targets() = MakeTarget("softmax", "aten::softmax", 0.30);
  *profile.add_targets() = MakeTarget("big", "aten::layer_norm", 0.10, /*inputs=*/false);
  *profile.add_targets() = MakeTarget("tiny", "aten::relu", 0.01);
  *profile.add_targets() = MakeTarget("conv2", "aten::convolution", 0.001);
  TargetRefusal refusal = [](const v1::Target& t) -> std::string {
    return t.nodes(0).op() == "aten::convolution" ? "no family" : "";
  };
  TargetSelection selection = SelectTargets(profile, 2, refusal);
  ASSERT_EQ(selection.selected.size(), 2u);
  EXPECT_EQ(selection.selected[0].id(), "softmax");
  EXPECT_EQ(selection.selected[1].id(), "relu");
  ASSERT_EQ(selection.skipped.size(), 2u);  // lower-ranked ones are not listed
  EXPECT_EQ(selection.skipped[0].target.id(), "conv");
  EXPECT_EQ(selection.skipped[0].reason, "no family");
  EXPECT_EQ(selection.skipped[1].target.id(), "big");
  EXPECT_NE(selection.skipped[1].reason.find("captured inputs"), std::string::npos);

  // An LLM proposer refuses nothing.
  TargetSelection any = SelectTargets(profile, 2, nullptr);
  ASSERT_EQ(any.selected.size(), 2u);
  EXPECT_EQ(any.selected[0].id(), "conv");
  EXPECT_EQ(any.selected[1].id(), "softmax");
}

// In a GPU capture, an op on CPU tensors (a traced `x.shape[-1] // 2`, an `.item()`) is host
// work: skipped for any proposer, saying so, not as an op no family covers.
TEST(TargetSelectionTest, AnOpOnCpuTensorsInAGpuCaptureIsHostWork) {
  v1::OperatorProfile profile;
  *profile.add_targets() = MakeTarget("item", "aten::item", 0.07);
  profile.mutable_targets(0)->mutable_inputs(0)->set_device("cpu");
  *profile.add_targets() = MakeTarget("softmax", "aten::softmax", 0.05);
  profile.mutable_targets(1)->mutable_inputs(0)->set_device("cuda:0");
  for (const TargetRefusal& refusal :
       {TargetRefusal(nullptr), TargetRefusal([](const v1::Target&) { return std::string(); })}) {
    TargetSelection selection = SelectTargets(profile, 1, refusal);
    ASSERT_EQ(selection.selected.size(), 1u);
    EXPECT_EQ(selection.selected[0].id(), "softmax");
    ASSERT_EQ(selection.skipped.size(), 1u);
    EXPECT_NE(selection.skipped[0].reason.find("it runs on the CPU"), std::string::npos);
  }
}

// With floors (a capture on a GPU) targets rank by what searching them can gain: share x the
// part of eager's time above the floor. A hot op eager already runs at its floor (ResNet-50
// b32's in-place residual add: 3.8% of the forward, eager 74 us, floor 73) ranks below a
// cooler one eager runs far from it (its 7x7 batch norm: 3.3%, eager 41 us, floor 6).
TEST(TargetSelectionTest, RanksByExpectedGainWhenFloorsAreKnown) {
  v1::OperatorProfile profile;
  v1::Target add = MakeTarget("add_", "aten::add_", 0.038);
  add.set_eager_time_s(74e-6);
  add.set_floor_s(73e-6);
  v1::Target bn = MakeTarget("bn", "aten::batch_norm", 0.033);
  bn.set_eager_time_s(41e-6);
  bn.set_floor_s(6e-6);
  v1::Target unknown = MakeTarget("unknown", "aten::relu", 0.01);  // no floor: its share
  *profile.add_targets() = add;
  *profile.add_targets() = bn;
  *profile.add_targets() = unknown;
  EXPECT_NEAR(ExpectedGain(add), 0.038 * (1 - 73.0 / 74), 1e-12);
  EXPECT_DOUBLE_EQ(ExpectedGain(unknown), 0.01);
  TargetSelection selection = SelectTargets(profile, 2, nullptr);
  ASSERT_EQ(selection.selected.size(), 2u);
  EXPECT_EQ(selection.selected[0].id(), "bn");
  EXPECT_EQ(selection.selected[1].id(), "unknown");
}

TEST(TargetSelectionTest, SignatureShowsDtypesShapesAndScalars) {
  v1::Target t = MakeTarget("x", "aten::softmax", 0.1);
  EXPECT_EQ(TargetOpName(t), "aten::softmax");
  EXPECT_EQ(TargetSignature(t), "f32[64,512] dim=-1");
}

TEST(RunDirectoryTest, ManifestRoundTripsAndTreesAreCheckpointed) {
  TempDir tmp;
  RunDirectory dir(tmp / "run");
  ASSERT_TRUE(dir.Create().ok());
  EXPECT_FALSE(dir.HasManifest());
  RunManifest m;
  m.model_path = "/m.pt";
  m.model_sha256 = "aa";
  m.inputs_path = "/i.pt";
  m.inputs_sha256 = "bb";
  m.store_url = "dir:/s";
  m.proposer = "synth";
  m.device = "cpu";
  m.seed = 18446744073709551615ULL;  // survives JSON
  m.top_k = 3;
  m.target_ids = {"t1", "t2"};
  ASSERT_TRUE(dir.WriteManifest(m).ok());
  EXPECT_TRUE(dir.HasManifest());
  absl::StatusOr<RunManifest> read = dir.ReadManifest();
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->seed, m.seed);
  EXPECT_EQ(read->target_ids, m.target_ids);
  EXPECT_EQ(read->store_url, "dir:/s");

  absl::StatusOr<std::optional<v1::SearchTreeState>> none = dir.ReadTree("t1");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  SearchTree tree(MakeTarget("t1", "aten::softmax", 0.2), 7);
  v1::Candidate c;
  c.set_id("cand");
  ASSERT_TRUE(tree.AddPendingChild(SearchTree::kRoot, c, 0).ok());
  ASSERT_TRUE(dir.WriteTree("t1", tree.Serialize()).ok());
  absl::StatusOr<std::optional<v1::SearchTreeState>> state = dir.ReadTree("t1");
  ASSERT_TRUE(state.ok() && state->has_value());
  absl::StatusOr<SearchTree> back = SearchTree::FromState(**state);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->PendingNodes().size(), 1u);
  EXPECT_EQ(back->seed(), 7u);

  std::FILE* f = std::fopen(dir.tree_path("t2").c_str(), "w");
  std::fputs("not a tree", f);
  std::fclose(f);
  EXPECT_EQ(dir.ReadTree("t2").status().code(), absl::StatusCode::kDataLoss);
  // No temporary file is left behind by the atomic writes.
  for (const auto& entry : std::filesystem::directory_iterator(tmp / "run" / "trees")) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos);
  }
}

TEST(RunDirectoryTest, ManifestFromElsewhereIsRefusedClearly) {
  TempDir tmp;
  RunDirectory dir(tmp.path());
  std::FILE* f = std::fopen(dir.manifest_path().c_str(), "w");
  std::fputs("{\"format_version\": 99}", f);
  std::fclose(f);
  absl::StatusOr<RunManifest> read = dir.ReadManifest();
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("format_version"), std::string::npos);
}

TEST(OptimizeReportTest, EndToEndEstimateCountsWinnersByShare) {
  OptimizeReport report;
  TargetReport a;
  a.target = MakeTarget("a", "aten::softmax", 0.5);
  a.speedup = 2.0;
  a.best_proposer = "synth:rowwise";
  a.best_params = {{"row_threads", "64"}, {"vec", "4"}};
  TargetReport b;
  b.target = MakeTarget("b", "aten::relu", 0.2);  // no winner
  report.targets = {a, b};
  EXPECT_NEAR(EstimatedForwardSpeedup(report), 1.0 / (1.0 - 0.25), 1e-12);
  report.status = "complete";
  nlohmann::json json = ReportToJson(report);
  ASSERT_EQ(json["targets"].size(), 2u);
  EXPECT_EQ(json["targets"][0]["op"], "aten::softmax");
  EXPECT_EQ(json["targets"][0]["signature"], "f32[64,512] dim=-1");
  EXPECT_EQ(json["targets"][0]["tree"], "trees/a.pb");
  EXPECT_EQ(json["targets"][0]["best_proposer"], "synth:rowwise");
  EXPECT_EQ(json["targets"][0]["best_params"]["vec"], "4");
  const std::string text = FormatSummaryText(report);
  EXPECT_NE(text.find("2.00x"), std::string::npos);
  EXPECT_NE(text.find("by synth:rowwise: row_threads=64 vec=4"), std::string::npos) << text;
  EXPECT_NE(text.find("estimated end-to-end speedup"), std::string::npos);
}

TEST(OptimizeReportTest, RejectedCandidatesKeepTheirConfigAndWhyTheyFailed) {
  SearchTree tree(MakeTarget("t", "aten::softmax", 0.3), 1);
  auto add = [&](const std::string& id, v1::Verdict verdict, const std::string& message) {
    v1::Candidate c;
    c.set_id(id);
    c.set_proposer("synth:rowwise");
    (*c.mutable_params())["vec"] = id;
    absl::StatusOr<int> node = tree.AddPendingChild(SearchTree::kRoot, c, 0);
    ASSERT_TRUE(node.ok()) << node.status();
    RunOutcome outcome;
    outcome.compile.set_status(v1::COMPILE_OK);
    outcome.evaluation.set_verdict(verdict);
    outcome.evaluation.mutable_diagnostics()->set_message(message);
    if (verdict == v1::PASS) outcome.evaluation.set_speedup(2.0);
    ASSERT_TRUE(tree.Backup(*node, outcome).ok());
  };
  add("1", v1::PASS, "");
  add("2", v1::MISMATCH, "output 0: max error 0.5 over the tolerance 0.01 (captured)");
  add("3", v1::NOT_EVALUATED, "no GPU");
  add("4", v1::CRASH, "illegal address");
  v1::Candidate pending;
  pending.set_id("5");
  ASSERT_TRUE(tree.AddPendingChild(SearchTree::kRoot, pending, 0).ok());

  TargetReport t;
  t.target = tree.target();
  t.rejected = RejectedCandidates(tree);
  ASSERT_EQ(t.rejected.size(), 2u);  // not the pass, the unevaluated or the pending one
  EXPECT_EQ(t.rejected[0].candidate_id, "2");
  EXPECT_EQ(t.rejected[0].verdict, v1::MISMATCH);
  EXPECT_EQ(t.rejected[1].verdict, v1::CRASH);

  OptimizeReport report;
  report.targets = {t};
  nlohmann::json json = ReportToJson(report)["targets"][0]["rejected_candidates"];
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(json[0]["verdict"], "MISMATCH");
  EXPECT_EQ(json[0]["params"]["vec"], "2");
  EXPECT_EQ(json[0]["diagnostics"]["message"],
            "output 0: max error 0.5 over the tolerance 0.01 (captured)");
  const std::string text = FormatSummaryText(report);
  EXPECT_NE(text.find("rejected MISMATCH by synth:rowwise: vec=2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("max error 0.5 over the tolerance 0.01"), std::string::npos) << text;
  EXPECT_NE(text.find("rejected CRASH by synth:rowwise: vec=4"), std::string::npos) << text;
}

TEST(OptimizeReportTest, SearchHistoryListsCandidatesInDispatchOrderAndTheFastestPerValue) {
  SearchTree tree(MakeTarget("abcdef0123456789", "aten::softmax", 0.3), 1);
  // (id, parent node, dispatch sequence, split_mode, verdict, median µs)
  auto add = [&](const std::string& id, int parent, int64_t sequence, const std::string& mode,
                 v1::Verdict verdict, double us) {
    v1::Candidate c;
    c.set_id(id);
    c.set_proposer("synth:rowwise");
    (*c.mutable_params())["split_mode"] = mode;
    (*c.mutable_params())["vec"] = "4";  // never varied: no row in the parameter table
    (*c.mutable_params())["row_threads"] = id.size() == 1 ? "128" : "16";
    absl::StatusOr<int> node = tree.AddPendingChild(parent, c, sequence);
    EXPECT_TRUE(node.ok()) << node.status();
    if (verdict == v1::VERDICT_UNSPECIFIED) return *node;  // left pending
    RunOutcome outcome;
    outcome.compile.set_status(v1::COMPILE_OK);
    outcome.evaluation.set_verdict(verdict);
    if (verdict == v1::PASS) {
      outcome.evaluation.mutable_candidate()->set_median_s(us * 1e-6);
      outcome.evaluation.set_speedup(100.0 / us);
    } else {
      outcome.evaluation.mutable_diagnostics()->set_message("blocks waited past the limit");
    }
    EXPECT_TRUE(tree.Backup(*node, outcome).ok());
    return *node;
  };
  // Added in one order, dispatched in another: the history follows the dispatch sequence.
  const int stream = add("s", SearchTree::kRoot, 1, "stream", v1::PASS, 50);
  add("o", SearchTree::kRoot, 0, "ordered", v1::PASS, 40);
  add("s2", stream, 2, "stream", v1::PASS, 45);
  add("o2", SearchTree::kRoot, 3, "ordered", v1::TIMEOUT, 0);
  add("p", stream, 4, "ordered", v1::VERDICT_UNSPECIFIED, 0);

  const std::string text = FormatSearchHistory(tree);
  EXPECT_NE(text.find("search of abcdef012345 aten::softmax"), std::string::npos) << text;
  EXPECT_NE(text.find("5 dispatched, 4 evaluated (PASS 3, TIMEOUT 1), best #1 40.00 us (2.50x "
                      "eager)"),
            std::string::npos)
      << text;
  auto line_of = [&](const std::string& needle) {
    const size_t at = text.find(needle);
    return at == std::string::npos ? std::string::npos : text.rfind('\n', at);
  };
  // #1 ordered (sequence 0), #2 stream, #3 its child, #4 the timeout with its message, #5
  // pending under #2.
  const size_t first = line_of("split_mode=ordered vec=4");
  const size_t third = line_of("45.00 us");
  ASSERT_NE(first, std::string::npos) << text;
  ASSERT_NE(third, std::string::npos) << text;
  EXPECT_LT(first, line_of("50.00 us")) << text;
  EXPECT_LT(line_of("50.00 us"), third) << text;
  EXPECT_NE(text.find("     3      2 PASS"), std::string::npos) << text;
  EXPECT_NE(text.find("     4      - TIMEOUT"), std::string::npos) << text;
  EXPECT_NE(text.find("blocks waited past the limit"), std::string::npos) << text;
  EXPECT_NE(text.find("     5      2 pending"), std::string::npos) << text;
  // Per value: evaluated (the pending one not counted), passed, fastest.
  EXPECT_NE(text.find("by parameter:"), std::string::npos) << text;
  EXPECT_NE(text.find("split_mode=ordered                       2      1   40.00 us"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("split_mode=stream                        2      2   45.00 us"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("vec=4   "), std::string::npos) << text;
  // Numbers in order of value: 16 before 128.
  EXPECT_NE(text.find("row_threads=16                           2      1   45.00 us\n"
                      "  row_threads=128                          2      2   40.00 us\n"),
            std::string::npos)
      << text;
}

TEST(OptimizeReportTest, WinnerDirectoryHoldsWhatExportNeeds) {
  TempDir tmp;
  RunDirectory dir(tmp.path());
  ASSERT_TRUE(dir.Create().ok());
  v1::Target target = MakeTarget("t", "aten::softmax", 0.3);
  v1::EvaluatedCandidate winner;
  winner.mutable_candidate()->set_id("w");
  winner.mutable_candidate()->set_source("// kernel");
  winner.mutable_candidate()->set_launch_plan_json("{\"launches\": []}");
  EXPECT_EQ(WriteWinner(dir, target, winner).code(), absl::StatusCode::kFailedPrecondition);
  winner.mutable_compile()->set_cubin(
      std::string("\x7f"
                  "ELF\0bin",
                  8));
  winner.mutable_evaluation()->set_verdict(v1::PASS);
  ASSERT_TRUE(WriteWinner(dir, target, winner).ok());
  const auto kdir = dir.kernel_dir("t");
  EXPECT_EQ(*ReadWholeFile(kdir / "kernel.cu"), "// kernel");
  EXPECT_EQ(*ReadWholeFile(kdir / "plan.json"), "{\"launches\": []}");
  EXPECT_EQ(ReadWholeFile(kdir / "cubin")->size(), 8u);
  nlohmann::json candidate = nlohmann::json::parse(*ReadWholeFile(kdir / "candidate.json"));
  EXPECT_EQ(candidate["evaluation"]["verdict"], "PASS");
  EXPECT_FALSE(candidate["compile"].contains("cubin"));  // the cubin is its own file
  nlohmann::json target_json = nlohmann::json::parse(*ReadWholeFile(kdir / "target.json"));
  EXPECT_EQ(target_json["id"], "t");
}

TEST(ProgressDisplayTest, EtaFollowsThisRunsPaceAndTheTimeBudget) {
  ProgressState state;
  state.start_s = 100;
  state.rows.resize(2);
  state.rows[0].budget = 10;
  state.rows[1].budget = 10;
  EXPECT_LT(EstimateRemainingSeconds(state, 110), 0);  // nothing done yet: unknown
  state.rows[0].completed = 5;                         // 5 in 10 s: 2 s each, 15 left
  EXPECT_DOUBLE_EQ(EstimateRemainingSeconds(state, 110), 30);
  state.rows[1].stopped = true;  // a stopped target needs no more time
  EXPECT_DOUBLE_EQ(EstimateRemainingSeconds(state, 110), 10);
  state.time_budget_s = 15;  // 5 s of budget left
  EXPECT_DOUBLE_EQ(EstimateRemainingSeconds(state, 110), 5);
  state.completed_at_start = 5;  // a resumed run's work says nothing of this run's pace
  state.time_budget_s = 0;
  EXPECT_LT(EstimateRemainingSeconds(state, 110), 0);
  EXPECT_EQ(FormatDuration(-1), "--");
  EXPECT_EQ(FormatDuration(42), "42s");
  EXPECT_EQ(FormatDuration(185), "3m05s");
  EXPECT_EQ(FormatDuration(3720), "1h02m");
}

std::string Captured(bool live, const std::function<void(ProgressDisplay&)>& drive) {
  char* buffer = nullptr;
  size_t size = 0;
  std::FILE* stream = open_memstream(&buffer, &size);
  double now = 0;
  {
    ProgressDisplay display(stream, live, [&now] { return now += 1; });
    drive(display);
  }
  std::fclose(stream);
  std::string out(buffer, size);
  std::free(buffer);
  return out;
}

TEST(ProgressDisplayTest, PlainLinesWhenNotATerminalAndRedrawsInPlaceOnOne) {
  const v1::Target target = MakeTarget("t", "aten::softmax", 0.3);
  v1::EvaluatedCandidate latest;
  latest.mutable_candidate()->set_id("cand123");
  latest.mutable_evaluation()->set_verdict(v1::PASS);
  latest.mutable_evaluation()->set_speedup(1.75);
  auto drive = [&](ProgressDisplay& display) {
    display.Message("capturing m.pt on cpu ...");
    display.StartSearch({target}, {0}, 8, 0);
    SearchEvent event;
    event.kind = SearchEvent::Kind::kIteration;
    event.progress.set_iterations(1);
    event.progress.set_best_speedup(1.75);
    event.latest = &latest;
    display.OnEvent(event);
    event.kind = SearchEvent::Kind::kTargetStopped;
    event.stop_reason = StopReason::kIterationBudget;
    display.OnEvent(event);
    display.Finish();
  };
  const std::string plain = Captured(false, drive);
  EXPECT_EQ(plain.find("\x1b["), std::string::npos);
  EXPECT_NE(plain.find("capturing m.pt on cpu ...\n"), std::string::npos);
  EXPECT_NE(plain.find("aten::softmax f32[64,512] dim=-1: iteration 1/8 PASS 1.75x, best 1.75x"),
            std::string::npos)
      << plain;
  EXPECT_NE(plain.find("stopped (iteration_budget) after 1 iterations"), std::string::npos)
      << plain;
  const std::string live = Captured(true, drive);
  EXPECT_NE(live.find("\x1b["), std::string::npos);  // moved the cursor up to redraw
  EXPECT_NE(live.find("1/8"), std::string::npos);
  EXPECT_NE(live.find("ETA"), std::string::npos);
}

}  // namespace
}  // namespace kforge
