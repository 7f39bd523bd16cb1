// kforge-launch-overhead: what the size of the kernel parameter costs a launch on this GPU.
// Every kforge kernel takes the whole KfArgs (2,192 bytes: 13 tensors and a shape key) by
// value; Inductor's kernels take a few pointers. On the H200, kforge's streaming kernels timed
// 1-2 µs behind Inductor's beside them while Nsight Compute gave equal kernel durations
// (docs/benchmarks/2026-12-01-h200-engine-registers-and-reuse.md). This times one grid-stride
// copy, compiled three times with the same body, whose parameter is KfArgs, three KfTensors
// (456 bytes) or two pointers and a count (24 bytes), over several sizes, interleaved, each
// launch L2-flushed and bracketed by CUDA events as the worker times (medians). A second table
// times the same launches as the worker times launch-bound targets: CUDA-graph replays of 20
// launches, the L2 flushed before each replay, per launch — where a kernel of a microsecond or
// two is mostly launch, and the parameter block is copied for every launch of the graph.
// A third times the host side of a launch call, what a host-bound forward pays per kernel.
//
//   kforge-launch-overhead [--reps N] [--sizes-mb 0,1,16,64]
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/kforge_device.h"
#include "common/launch_bound.h"
#include "services/worker/compiler.h"
#include "services/worker/evaluator_stats.h"

namespace kforge {
namespace {

constexpr char kSource[] = R"(#include "kforge_device.h"
struct KfThree { KfTensor t[3]; };

__device__ __forceinline__ void kf_copy(const float4* __restrict__ x, float4* __restrict__ y,
                                        long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    y[i] = x[i];
  }
}
extern "C" __global__ void copy_kfargs(KfArgs a) {
  kf_copy((const float4*)a.inputs[0].data, (float4*)a.outputs[0].data, a.inputs[0].numel / 4);
}
extern "C" __global__ void copy_three(KfThree a) {
  kf_copy((const float4*)a.t[0].data, (float4*)a.t[1].data, a.t[0].numel / 4);
}
extern "C" __global__ void copy_raw(const float4* x, float4* y, long long n) {
  kf_copy(x, y, n);
}
)";

constexpr char kPlan[] = R"({"launches": [
  {"entry": "copy_kfargs", "grid": ["1", "1", "1"], "block": [256, 1, 1]},
  {"entry": "copy_three", "grid": ["1", "1", "1"], "block": [256, 1, 1]},
  {"entry": "copy_raw", "grid": ["1", "1", "1"], "block": [256, 1, 1]}]})";

struct KfThree {
  KfTensor t[3];
};

#define KF_CHECK(call)                                                              \
  do {                                                                              \
    CUresult r_ = (call);                                                           \
    if (r_ != CUDA_SUCCESS) {                                                       \
      const char* name_ = nullptr;                                                  \
      cuGetErrorName(r_, &name_);                                                   \
      std::fprintf(stderr, "%s failed: %s\n", #call, name_ ? name_ : "unknown");    \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

int Main(int argc, char** argv) {
  CLI::App app{"kforge-launch-overhead: the cost of the kernel parameter's size per launch"};
  int reps = 200;
  std::vector<double> sizes_mb = {0, 1, 16, 64};
  app.add_option("--reps", reps, "timed launches per kernel and size")
      ->check(CLI::Range(3, 100000));
  app.add_option("--sizes-mb", sizes_mb, "bytes copied, in MiB (0: an empty grid-stride loop)")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);

  if (cuInit(0) != CUDA_SUCCESS) {
    std::fprintf(stderr, "kforge-launch-overhead needs a CUDA GPU and its driver (cuInit "
                         "failed); run it on the GPU machine\n");
    return 2;
  }
  CUdevice dev;
  CUcontext ctx;
  KF_CHECK(cuDeviceGet(&dev, 0));
  KF_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  KF_CHECK(cuCtxSetCurrent(ctx));
  int sms = 0, l2 = 0;
  KF_CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  KF_CHECK(cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev));
  char name[256] = {};
  KF_CHECK(cuDeviceGetName(name, sizeof(name), dev));

  absl::StatusOr<std::unique_ptr<Compiler>> compiler = Compiler::Create({}, nullptr);
  if (!compiler.ok()) {
    std::fprintf(stderr, "no compiler: %s\n", std::string(compiler.status().message()).c_str());
    return 3;
  }
  v1::Candidate candidate;
  candidate.set_source(kSource);
  candidate.set_launch_plan_json(kPlan);
  v1::CompileOptions options;
  options.set_arch(DefaultArch());
  v1::CompileResult compiled = (*compiler)->Compile(candidate, options);
  if (compiled.status() != v1::COMPILE_OK) {
    std::fprintf(stderr, "compile failed: %s\n", compiled.log().c_str());
    return 3;
  }
  CUmodule module;
  KF_CHECK(cuModuleLoadData(&module, compiled.cubin().data()));
  const char* names[3] = {"copy_kfargs", "copy_three", "copy_raw"};
  CUfunction fn[3];
  for (int k = 0; k < 3; ++k) KF_CHECK(cuModuleGetFunction(&fn[k], module, names[k]));

  const double max_mb = *std::max_element(sizes_mb.begin(), sizes_mb.end());
  const size_t max_bytes = std::max<size_t>(16, static_cast<size_t>(max_mb * (1 << 20)));
  CUdeviceptr x, y, flush;
  const size_t flush_bytes = std::max<size_t>(2 * static_cast<size_t>(l2), 8 << 20);
  KF_CHECK(cuMemAlloc(&x, max_bytes));
  KF_CHECK(cuMemAlloc(&y, max_bytes));
  KF_CHECK(cuMemAlloc(&flush, flush_bytes));
  KF_CHECK(cuMemsetD8(x, 1, max_bytes));
  CUstream stream;
  KF_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUevent start, stop;
  KF_CHECK(cuEventCreate(&start, CU_EVENT_DEFAULT));
  KF_CHECK(cuEventCreate(&stop, CU_EVENT_DEFAULT));

  std::printf("kforge-launch-overhead on %s (%d SMs): a grid-stride float4 copy, 256 threads, "
              "grid min(blocks, %d SMs x 8); median of %d L2-flushed launches each, "
              "interleaved, CUDA events\n",
              name, sms, sms, reps);
  unsigned flush_value = 0;
  // One size's three parameter blocks, kept alive while launches and captures read them.
  struct Launch {
    KfArgs args{};
    KfThree three{};
    const void* px = nullptr;
    void* py = nullptr;
    long long n4 = 0;
    unsigned grid = 1;
    void* params[3][3] = {};
  };
  auto prepare = [&](double mb, Launch& l) {
    const long long bytes = static_cast<long long>(mb * (1 << 20)) / 16 * 16;
    l.n4 = bytes / 16;
    l.args.num_inputs = l.args.num_outputs = 1;
    l.args.inputs[0].data = reinterpret_cast<void*>(x);
    l.args.inputs[0].numel = bytes / 4;
    l.args.outputs[0].data = reinterpret_cast<void*>(y);
    l.args.outputs[0].numel = bytes / 4;
    l.three.t[0] = l.args.inputs[0];
    l.three.t[1] = l.args.outputs[0];
    l.px = reinterpret_cast<void*>(x);
    l.py = reinterpret_cast<void*>(y);
    l.params[0][0] = &l.args;
    l.params[1][0] = &l.three;
    l.params[2][0] = &l.px;
    l.params[2][1] = &l.py;
    l.params[2][2] = &l.n4;
    l.grid = static_cast<unsigned>(std::clamp<long long>((l.n4 + 255) / 256, 1, 8LL * sms));
  };
  // Median µs per launch of each kernel, `launch(k)` enqueueing `per_rep` launches of kernel k
  // between the events.
  auto time = [&](const std::function<CUresult(int)>& launch, int per_rep, double (&out)[3]) {
    std::vector<double> us[3];
    for (int rep = 0; rep < reps; ++rep) {
      for (int k = 0; k < 3; ++k) {
        KF_CHECK(cuMemsetD32Async(flush, ++flush_value, flush_bytes / 4, stream));
        KF_CHECK(cuEventRecord(start, stream));
        KF_CHECK(launch(k));
        KF_CHECK(cuEventRecord(stop, stream));
        KF_CHECK(cuEventSynchronize(stop));
        float ms = 0;
        KF_CHECK(cuEventElapsedTime(&ms, start, stop));
        us[k].push_back(ms * 1e3 / per_rep);
      }
    }
    for (int k = 0; k < 3; ++k) out[k] = Median(us[k]);
    return 0;
  };
  auto header = [&]() {
    std::printf("| MiB copied | KfArgs (%zu B) µs | 3 KfTensors (%zu B) µs | "
                "2 pointers + n (24 B) µs | KfArgs − pointers µs |\n"
                "| ---: | ---: | ---: | ---: | ---: |\n",
                sizeof(KfArgs), sizeof(KfThree));
  };

  std::printf("\nOne launch per rep:\n\n");
  header();
  for (double mb : sizes_mb) {
    Launch l;
    prepare(mb, l);
    double us[3];
    if (time([&](int k) {
          return cuLaunchKernel(fn[k], l.grid, 1, 1, 256, 1, 1, 0, stream, l.params[k], nullptr);
        }, 1, us) != 0) {
      return 1;
    }
    std::printf("| %g | %.2f | %.2f | %.2f | %+.2f |\n", mb, us[0], us[1], us[2], us[0] - us[2]);
  }

  std::printf("\nCUDA-graph replays of %d launches, the L2 flushed before each replay (per "
              "launch):\n\n", kGraphLaunches);
  header();
  for (double mb : sizes_mb) {
    Launch l;
    prepare(mb, l);
    CUgraphExec exec[3] = {};
    for (int k = 0; k < 3; ++k) {
      CUgraph graph = nullptr;
      KF_CHECK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
      for (int n = 0; n < kGraphLaunches; ++n) {
        KF_CHECK(cuLaunchKernel(fn[k], l.grid, 1, 1, 256, 1, 1, 0, stream, l.params[k],
                                nullptr));
      }
      KF_CHECK(cuStreamEndCapture(stream, &graph));
      KF_CHECK(cuGraphInstantiate(&exec[k], graph, 0));
      KF_CHECK(cuGraphDestroy(graph));
      KF_CHECK(cuGraphLaunch(exec[k], stream));  // uploads the graph before it is timed
    }
    KF_CHECK(cuStreamSynchronize(stream));
    double us[3];
    const int failed =
        time([&](int k) { return cuGraphLaunch(exec[k], stream); }, kGraphLaunches, us);
    for (CUgraphExec e : exec) cuGraphExecDestroy(e);
    if (failed != 0) return 1;
    std::printf("| %g | %.2f | %.2f | %.2f | %+.2f |\n", mb, us[0], us[1], us[2], us[0] - us[2]);
  }

  // What a host-bound forward pays: the CPU time of the launch call itself. Batches stay well
  // under the driver's launch queue, so the host never waits for the GPU inside one.
  constexpr int kHostBatch = 200;
  std::printf("\nHost time per launch call (the empty grid; %d launches back to back, then a "
              "sync; median of %d batches):\n\n| KfArgs (%zu B) µs | 3 KfTensors (%zu B) µs | "
              "2 pointers + n (24 B) µs | KfArgs − pointers µs |\n| ---: | ---: | ---: | ---: |\n",
              kHostBatch, reps, sizeof(KfArgs), sizeof(KfThree));
  {
    Launch l;
    prepare(0, l);
    std::vector<double> us[3];
    for (int rep = 0; rep < reps; ++rep) {
      for (int k = 0; k < 3; ++k) {
        KF_CHECK(cuStreamSynchronize(stream));
        const auto t0 = std::chrono::steady_clock::now();
        for (int n = 0; n < kHostBatch; ++n) {
          KF_CHECK(cuLaunchKernel(fn[k], l.grid, 1, 1, 256, 1, 1, 0, stream, l.params[k],
                                  nullptr));
        }
        const auto t1 = std::chrono::steady_clock::now();
        us[k].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / kHostBatch);
      }
    }
    KF_CHECK(cuStreamSynchronize(stream));
    const double m[3] = {Median(us[0]), Median(us[1]), Median(us[2])};
    std::printf("| %.2f | %.2f | %.2f | %+.2f |\n", m[0], m[1], m[2], m[0] - m[2]);
  }
  return 0;
}

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) { return kforge::Main(argc, argv); }
