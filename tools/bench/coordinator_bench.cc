// kforge-coordinator-bench: what the distributed coordinator costs. Runs the real coordinator
// core in one process — JobManager (target selection, SearchDriver, tree checkpoints and job
// records in a local-directory store, events), TaskPool (lease table, long-poll, lapses) and
// PoolCandidateRunner — against 1, 4, 16 and 64 simulated workers (threads that lease, "run"
// and complete tasks), and prints a table:
//   workers | evaluations | wall s | evaluations/s | ideal/s | busy % | coordinator CPU ms/it
// "ideal" is workers / evaluation time; "busy" is how close the pool came to it. The CPU
// time per iteration is the process's CPU time over the run (the simulated workers only sleep)
// divided by the evaluations: the coordinator's overhead per iteration.
//
// The proposer and the evaluations are stand-ins (a parameter grid and the test-only
// SimulatedEvaluator): this measures the coordinator, not kernels.
//   kforge-coordinator-bench [--eval-ms 20] [--jobs 4] [--targets 8] [--iterations 40]
//                            [--workers N: only that row] [--store URL: default a temporary
//                            local directory; a redis:// URL measures what a cluster pays]
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/blob_store.h"
#include "common/digest.h"
#include "common/store.h"
#include "services/coordinator/pool/simulated_pool_workers.h"
#include "services/coordinator/pool/task_pool.h"
#include "services/coordinator/service/job_manager.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

// A stand-in proposer: kernels are points of a 4-axis grid; roots are spread over it and
// children are one-step neighbours of their parent. Deterministic in the request's seed.
class GridProposer : public Proposer {
 public:
  absl::StatusOr<v1::ProposeResponse> Propose(const v1::ProposeRequest& request) override {
    std::vector<int> base = {0, 0, 0, 0};
    if (request.has_parent()) {
      for (int a = 0; a < 4; ++a) {
        base[a] = std::stoi(request.parent().candidate().params().at(absl::StrCat("p", a)));
      }
    }
    v1::ProposeResponse response;
    uint64_t state = request.seed();
    for (int i = 0; response.candidates_size() < request.n() && i < 64; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      std::vector<int> p = base;
      if (request.has_parent()) {
        p[(state >> 33) % 4] += ((state >> 40) & 1) ? 1 : -1;
      } else {
        for (int a = 0; a < 4; ++a) p[a] = static_cast<int>((state >> (8 * a + 20)) % 8);
      }
      bool valid = true;
      for (int v : p) valid = valid && v >= 0 && v < 8;
      if (!valid) continue;
      v1::Candidate c;
      std::string params;
      for (int a = 0; a < 4; ++a) {
        (*c.mutable_params())[absl::StrCat("p", a)] = std::to_string(p[a]);
        absl::StrAppend(&params, p[a]);
      }
      c.set_source(absl::StrCat("// grid kernel ", params, " of ", request.target().id()));
      c.set_launch_plan_json("{}");
      c.set_id(CandidateId(c.source(), c.launch_plan_json()));
      c.set_proposer("bench-grid");
      *response.add_candidates() = std::move(c);
    }
    return response;
  }
  std::string Name() const override { return "synth"; }
};

v1::OperatorProfile SyntheticProfile(int targets, const std::string& salt) {
  v1::OperatorProfile profile;
  profile.set_model_name("bench");
  profile.set_device("cuda:0");
  for (int i = 0; i < targets; ++i) {
    v1::Target* t = profile.add_targets();
    t->set_id(Sha256Hex(absl::StrCat("bench-target-", salt, "-", i)));
    v1::SubgraphNode* node = t->add_nodes();
    node->set_op("aten::softmax");
    v1::TensorSignature* input = t->add_inputs();
    input->add_sizes(256);
    input->add_sizes(512 * (i + 1));
    input->set_dtype(v1::FLOAT32);
    input->set_device("cuda:0");
    t->set_eager_time_s(1e-4 * (i + 1));
    t->set_share(1.0 / (i + 2));
    t->mutable_captured_inputs()->set_sha256(Sha256Hex(absl::StrCat("inputs-", i)));
  }
  return profile;
}

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

struct Row {
  int workers = 0;
  int64_t evaluations = 0;
  double wall_s = 0;
  double cpu_s = 0;
};

// Every key a run leaves, so the next row starts from an empty store (task results persist:
// left in place they would answer the next row's tasks without a worker).
void Clear(Store& store) {
  for (const char* prefix : {"task/", "job/", "tree/", "capture/", "blob/", "chunk/"}) {
    absl::StatusOr<std::vector<std::string>> keys = store.List(prefix);
    if (!keys.ok()) continue;
    for (const std::string& key : *keys) (void)store.Delete(key);
  }
}

Row RunOnce(const std::string& store_url, int workers, double eval_s, int jobs, int targets,
            int iterations) {
  const fs::path dir = fs::temp_directory_path() /
                       absl::StrCat("kforge-coordinator-bench-", ::getpid(), "-", workers);
  fs::remove_all(dir);
  absl::StatusOr<std::unique_ptr<Store>> opened =
      OpenStore(store_url.empty() ? absl::StrCat("dir:", dir.string()) : store_url);
  if (!opened.ok()) {
    std::fprintf(stderr, "bench: %s\n", std::string(opened.status().message()).c_str());
    std::exit(2);
  }
  std::unique_ptr<Store> store = *std::move(opened);
  Clear(*store);
  const v1::Digest model = *PutBlob(*store, "bench model");
  const v1::Digest inputs = *PutBlob(*store, "bench inputs");

  TaskPoolOptions pool_options;
  pool_options.lapse_interval_s = 0.1;
  TaskPool pool(pool_options, store.get());
  GridProposer proposer;
  JobManagerOptions options;
  options.max_in_flight = std::max(4, 2 * workers / jobs + 2);
  options.max_in_flight_per_target = std::max(2, options.max_in_flight / targets + 1);
  options.monitor_interval_s = 0.2;
  int captures = 0;
  JobManager manager(
      *store, pool, proposer,
      [&](const v1::CaptureRequest&) -> absl::StatusOr<v1::OperatorProfile> {
        return SyntheticProfile(targets, std::to_string(captures++));
      },
      options, nullptr);
  if (absl::Status s = manager.Start(); !s.ok()) {
    std::fprintf(stderr, "bench: %s\n", std::string(s.message()).c_str());
    std::exit(1);
  }

  auto workers_pool = std::make_unique<SimulatedPoolWorkers>(pool, workers, "sm_90", eval_s,
                                                             "bench-worker-", 0.2);

  const double cpu_start = CpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> ids;
  for (int j = 0; j < jobs; ++j) {
    v1::JobSpec spec;
    *spec.mutable_model() = model;
    *spec.mutable_inputs() = inputs;
    spec.set_top_k(targets);
    spec.mutable_budget()->set_iterations_per_target(iterations);
    spec.set_seed(static_cast<uint64_t>(j));
    ids.push_back(*manager.Submit(spec));
  }
  for (const std::string& id : ids) {
    while (true) {
      v1::Job job = *manager.Get(id);
      if (job.state() == v1::JOB_DONE || job.state() == v1::JOB_FAILED) {
        if (job.state() == v1::JOB_FAILED) {
          std::fprintf(stderr, "bench: job %s failed: %s\n", id.c_str(), job.error().c_str());
        }
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  Row row;
  row.workers = workers;
  row.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  row.cpu_s = CpuSeconds() - cpu_start;
  row.evaluations = workers_pool->evaluations();
  workers_pool.reset();
  manager.Shutdown();
  pool.Shutdown();
  Clear(*store);
  fs::remove_all(dir);
  return row;
}

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) {
  double eval_ms = 20;
  int jobs = 4, targets = 8, iterations = 40, only_workers = 0;
  std::string store_url;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const double value = std::atof(argv[i + 1]);
    if (flag == "--store") {
      store_url = argv[i + 1];
    } else if (flag == "--eval-ms") {
      eval_ms = value;
    } else if (flag == "--jobs") {
      jobs = static_cast<int>(value);
    } else if (flag == "--targets") {
      targets = static_cast<int>(value);
    } else if (flag == "--iterations") {
      iterations = static_cast<int>(value);
    } else if (flag == "--workers") {
      only_workers = static_cast<int>(value);
    } else {
      std::fprintf(stderr,
                   "usage: kforge-coordinator-bench [--eval-ms 20] [--jobs 4] [--targets 8] "
                   "[--iterations 40] [--workers N (one row)] [--store URL]\n");
      return 2;
    }
  }
  std::printf(
      "coordinator: %d jobs x %d targets x %d iterations, simulated evaluation %.0f ms, store "
      "%s\n\n",
      jobs, targets, iterations, eval_ms,
      store_url.empty() ? "local directory" : store_url.c_str());
  std::printf(
      "| workers | evaluations | wall s | evaluations/s | ideal/s | busy %% | coordinator "
      "CPU ms/iteration |\n|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int workers : {1, 4, 16, 64}) {
    if (only_workers > 0 && workers != only_workers) continue;
    kforge::Row row =
        kforge::RunOnce(store_url, workers, eval_ms / 1000, jobs, targets, iterations);
    const double rate = static_cast<double>(row.evaluations) / row.wall_s;
    const double ideal = eval_ms > 0 ? workers / (eval_ms / 1000) : 0;
    std::printf("| %d | %lld | %.2f | %.1f | %.1f | %.0f | %.3f |\n", row.workers,
                static_cast<long long>(row.evaluations), row.wall_s, rate, ideal,
                ideal > 0 ? 100 * rate / ideal : 0.0,
                row.evaluations > 0 ? 1e3 * row.cpu_s / static_cast<double>(row.evaluations) : 0);
    std::fflush(stdout);
  }
  return 0;
}
