// The distributed coordinator on a real GPU (label gpu; needs CUDA GPU 0): the cluster of the
// coordinator tests with one worker that evaluates on the GPU (no simulation), a job on the
// test model captured on the GPU. It must complete with validated, re-confirmed kernels timed
// on that GPU.
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/coordinator/cluster.h"

namespace kforge {
namespace {

TEST(CoordinatorGpuTest, JobCompletesOnARealGpuWorker) {
  cluster_test::Cluster cluster;
  cluster.simulated = false;
  cluster.device = "cuda";
  cluster.SetUp(/*start_fast_worker=*/false);
  ASSERT_TRUE(cluster.setup_error.empty()) << cluster.setup_error;
  std::unique_ptr<cluster_test::KforgeProcess> worker = cluster.StartWorker("gpu-0", 0, 2);
  // The worker says what it offers once its evaluator child has probed the GPU.
  ASSERT_TRUE(cluster_test::WaitFor(
      [&] { return absl::StrContains(worker->Log(), "pulling work from"); }, 300))
      << worker->Log();
  ASSERT_EQ(worker->Log().find("compile tasks only"), std::string::npos) << worker->Log();

  std::string why;
  const std::string job_id = cluster.Submit("--top 2 --iterations 6 --seed 1", &why);
  ASSERT_FALSE(job_id.empty()) << why;
  CommandResult watched = cluster.Kforge("watch " + job_id);
  ASSERT_EQ(watched.exit_code, 0) << watched.out << watched.err << "\n"
                                  << cluster.coordinator->Log() << "\n"
                                  << worker->Log();
  absl::StatusOr<v1::Job> job = cluster.Get(job_id);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_DONE);
  EXPECT_NE(job->gpu().name().find("NVIDIA"), std::string::npos) << job->gpu().name();
  int passed = 0;
  for (const v1::TargetProgress& t : job->targets()) {
    EXPECT_EQ(t.iterations(), 6);
    if (t.best_speedup() > 0) {
      ++passed;
      EXPECT_TRUE(t.best().reconfirmed());
      EXPECT_GT(t.best().candidate().median_s(), 0);
      EXPECT_EQ(t.best().candidate().mode().find("simulated"), std::string::npos);
    }
  }
  EXPECT_GT(passed, 0) << watched.out;
}

}  // namespace
}  // namespace kforge
