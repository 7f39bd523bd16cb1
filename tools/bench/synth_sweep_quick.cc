// kforge-synth-sweep-quick: the quick pass of kforge-synth-sweep, in a child process so that
// a kernel that takes the CUDA context down costs one restart, not the sweep. For each
// compiled kernel of one target it checks the output of one input set against the float64
// reference (the worker's accuracy rule; outputs poisoned first, guard bytes around them,
// inputs compared with a pristine copy) and times a few L2-flushed launches with CUDA events,
// or, for a launch-bound row (eager under 2 * kLaunchBoundSeconds: its kernels can be under the
// worker's line), L2-flushed replays of CUDA graphs of kGraphLaunches launches, eager alike, as
// the worker times such targets: one launch of a microsecond or two is mostly launch noise.
// Not the worker's full validation: the sweep puts its best kernels through that afterwards.
//
//   kforge-synth-sweep-quick DIR START RESULTS
// DIR holds target.pb (v1::Target), inputs.pt (torch.save of one call's inputs),
// manifest.json ({"jobs": [{"cubin": FILE, "plan": JSON}], "reps": N, "prune_factor": F,
// optional "best_s": the row's best time so far, for pruning; optional "graph": the row's
// timing mode, which the sweep pins once a child reported it}) and the cubins (a batch's cubin
// holds several kernels; each job's plan names its entries). Jobs START.. are run; each
// appends "KFQ {json}" to RESULTS (the eager baseline as job -1 first). Exit 0: all done;
// 2: could not start; 3: the CUDA context was lost after the last reported job. The accuracy
// check is QuickAccuracy (quick_accuracy.h): the worker's rule, cheap when a kernel passes.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cuda_driver.h"
#include "common/kernel_launch.h"
#include "common/kforge_device.h"
#include "common/launch_bound.h"
#include "common/launch_plan.h"
#include "common/tensor_io.h"
#include "nlohmann/json.hpp"
#include "services/worker/abandoned_capture.h"
#include "services/worker/evaluator_guards.h"
#include "services/worker/evaluator_stats.h"
#include "services/worker/l2_flush.h"
#include "services/worker/reference.h"
#include "services/worker/reference_compare.h"
#include "tools/bench/quick_accuracy.h"

namespace kforge {
namespace {

using json = nlohmann::json;

constexpr int64_t kGuardBytes = 4096;
constexpr uint8_t kGuardByte = 0x3C;

std::string CuDescribe(CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  cuGetErrorName(r, &name);
  cuGetErrorString(r, &text);
  return absl::StrCat(name ? name : "CUresult", " (", text ? text : std::to_string(r), ")");
}

std::string ReadFile(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  *ok = static_cast<bool>(in) || in.eof();
  return ss.str();
}

bool ContextHealthy() { return cuCtxSynchronize() == CUDA_SUCCESS; }

KfTensor ToKfTensor(const at::Tensor& t) {
  KfTensor k;
  std::memset(&k, 0, sizeof(k));
  k.data = t.data_ptr();
  k.numel = t.numel();
  k.ndim = static_cast<int>(t.dim());
  k.dtype = static_cast<int>(ToProtoDType(t.scalar_type()));
  for (int d = 0; d < KF_MAX_DIMS; ++d) {
    k.sizes[d] = d < t.dim() ? t.size(d) : 1;
    k.strides[d] = d < t.dim() ? t.stride(d) : 0;
  }
  return k;
}

v1::TensorSignature SignatureOf(const at::Tensor& t) {
  v1::TensorSignature sig;
  for (int64_t s : t.sizes()) sig.add_sizes(s);
  for (int64_t s : t.strides()) sig.add_strides(s);
  sig.set_dtype(ToProtoDType(t.scalar_type()));
  sig.set_device("cuda:0");
  return sig;
}

// An output with guard bytes of a known value on either side.
struct GuardedOutput {
  at::Tensor storage;  // uint8: guard | payload | guard
  at::Tensor view;
  int64_t payload_bytes = 0;

  bool GuardsIntact() const {
    at::Tensor front = storage.narrow(0, 0, kGuardBytes);
    at::Tensor back = storage.narrow(0, kGuardBytes + payload_bytes, kGuardBytes);
    return front.eq(kGuardByte).all().item<bool>() && back.eq(kGuardByte).all().item<bool>();
  }
};

GuardedOutput MakeOutput(const at::Tensor& like) {
  GuardedOutput g;
  g.payload_bytes = like.numel() * static_cast<int64_t>(like.element_size());
  g.storage = at::full({2 * kGuardBytes + g.payload_bytes}, kGuardByte,
                       at::TensorOptions().dtype(at::kByte).device(at::kCUDA));
  g.view = at::from_blob(
      g.storage.data_ptr<uint8_t>() + kGuardBytes, like.sizes(), [](void*) {},
      like.options().device(at::kCUDA));
  return g;
}

// Everything that stays the same across the kernels of one target.
class QuickRunner {
 public:
  absl::Status Start(const std::string& dir);
  // The result line of one job; sets *context_lost when the context is unusable after it.
  json RunJob(int index, bool* context_lost);
  json Eager();

 private:
  struct Timed {
    std::vector<double> seconds;
    bool pruned = false;
    std::string error;
  };
  // Times `launch` (which enqueues on the current stream; "" or an error message): one rep,
  // then `reps_ - 1` more unless the first is over prune_factor_ * best_s_. With graph_, a rep
  // is one replay of a CUDA graph of kGraphLaunches launches, its time per launch.
  Timed Time(const std::function<std::string()>& launch, bool prunable);
  std::string RunEager();

  json manifest_;
  std::string dir_;
  std::optional<ReferenceRunner> runner_;
  v1::Target target_;
  std::vector<at::Tensor> pristine_, inputs_;
  std::vector<at::Tensor> truth_, eager_;
  std::vector<ErrorStats> eager_error_;
  std::vector<bench::QuickAccuracy> accuracy_;  // per output
  std::vector<GuardedOutput> outputs_;
  at::Tensor scratch_;
  std::optional<L2Flush> l2_flush_;
  int sms_ = 0, smem_optin_ = 0;
  int reps_ = 5;
  double prune_factor_ = 2.0;
  double best_s_ = std::numeric_limits<double>::infinity();
  bool graph_ = false;  // time CUDA-graph replays (a launch-bound row)
  Timed eager_timed_;   // eager's timing, in the row's mode
};

absl::Status QuickRunner::Start(const std::string& dir) {
  dir_ = dir;
  bool ok = false;
  std::string text = ReadFile(dir + "/manifest.json", &ok);
  manifest_ = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!ok || manifest_.is_discarded() || !manifest_.contains("jobs")) {
    return absl::InvalidArgumentError(absl::StrCat(dir, "/manifest.json is missing or invalid"));
  }
  reps_ = std::max(1, manifest_.value("reps", 5));
  prune_factor_ = manifest_.value("prune_factor", 2.0);
  // The sweep passes the best time of the row's earlier chunks (carried results included).
  if (manifest_.contains("best_s") && manifest_["best_s"].is_number()) {
    best_s_ = manifest_["best_s"].get<double>();
  }
  if (!target_.ParseFromString(ReadFile(dir + "/target.pb", &ok)) || !ok) {
    return absl::InvalidArgumentError(absl::StrCat(dir, "/target.pb is not a v1.Target"));
  }

  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return absl::FailedPreconditionError("cuInit: " + CuDescribe(r));
  CUdevice device = 0;
  CUcontext context = nullptr;
  if ((r = cuDeviceGet(&device, 0)) != CUDA_SUCCESS ||
      (r = cuDevicePrimaryCtxRetain(&context, device)) != CUDA_SUCCESS ||
      (r = cuCtxSetCurrent(context)) != CUDA_SUCCESS) {
    return absl::FailedPreconditionError("no usable CUDA device 0: " + CuDescribe(r));
  }
  cuDeviceGetAttribute(&sms_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
  cuDeviceGetAttribute(&smem_optin_, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device);
  int l2 = 0;
  cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device);
  c10::cuda::set_device(0);
  c10::cuda::setCurrentCUDAStream(c10::cuda::getStreamFromPool(false, 0));

  absl::StatusOr<ReferenceRunner> runner = ReferenceRunner::Create(target_);
  if (!runner.ok()) return runner.status();
  runner_.emplace(*std::move(runner));
  absl::StatusOr<std::vector<NamedTensor>> parsed = ReadTensors(dir + "/inputs.pt");
  if (!parsed.ok()) return parsed.status();
  std::map<std::string, at::Tensor> by_name;
  for (const NamedTensor& t : *parsed) by_name[t.name] = t.tensor;
  for (int i = 0; i < target_.input_names_size(); ++i) {
    const std::string& name = target_.input_names(i);
    auto given = by_name.find(name);
    if (given == by_name.end()) {
      return absl::InvalidArgumentError(absl::StrCat(dir, "/inputs.pt lacks input ", name));
    }
    // A kernel reads its inputs as the signature's types: another dtype would be read as bytes
    // of the wrong width, a mismatch the kernel did not make.
    const at::ScalarType want = ToScalarType(target_.inputs(i).dtype());
    if (given->second.scalar_type() != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir, "/inputs.pt holds input ", name, " as ", c10::toString(given->second.scalar_type()),
          "; the target's signature says ", c10::toString(want)));
    }
    at::Tensor gpu = given->second.to(at::kCUDA).contiguous();
    pristine_.push_back(gpu);
    inputs_.push_back(gpu.clone());
  }
  absl::StatusOr<std::vector<at::Tensor>> reference =
      runner_->Run(inputs_, ReferenceRunner::Precision::kFloat64);
  absl::StatusOr<std::vector<at::Tensor>> eager =
      runner_->Run(inputs_, ReferenceRunner::Precision::kNative);
  if (!reference.ok()) return reference.status();
  if (!eager.ok()) return eager.status();
  for (size_t j = 0; j < eager->size(); ++j) {
    const at::Tensor& e = (*eager)[j];
    Tolerance tol = DtypeTolerance(e.scalar_type());
    const bool exact = tol.atol == 0 && tol.rtol == 0;
    truth_.push_back(exact ? e : (*reference)[j]);
    eager_.push_back(e.contiguous());
    eager_error_.push_back(exact ? ErrorStats{} : MeasureError(e, truth_.back(), tol));
    outputs_.push_back(MakeOutput(eager_.back()));
    accuracy_.emplace_back(truth_.back(), eager_.back(), tol, eager_error_.back(), 4.0);
  }
  absl::StatusOr<L2Flush> flush = L2Flush::Create(l2);
  if (!flush.ok()) return flush.status();
  l2_flush_ = *std::move(flush);
  scratch_ = at::empty({256}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA));
  // The row's timing mode: the sweep's, or launch-bound when eager's one launch is short.
  // Pinned, eager is timed once, in that mode.
  const bool pinned = manifest_.contains("graph") && manifest_["graph"].is_boolean();
  graph_ = pinned && manifest_["graph"].get<bool>();
  eager_timed_ = Time([&] { return RunEager(); }, false);
  if (!pinned && eager_timed_.error.empty() &&
      Median(eager_timed_.seconds) < 2 * kLaunchBoundSeconds) {
    graph_ = true;
    Timed replays = Time([&] { return RunEager(); }, false);
    if (replays.error.empty()) {
      eager_timed_ = std::move(replays);
    } else {
      graph_ = false;  // eager cannot be captured: the row keeps single launches
    }
  } else if (graph_ && !eager_timed_.error.empty()) {
    graph_ = false;  // pinned to replays, but eager cannot be captured here
    eager_timed_ = Time([&] { return RunEager(); }, false);
  }
  return absl::OkStatus();
}

std::string QuickRunner::RunEager() {
  absl::StatusOr<std::vector<at::Tensor>> r =
      runner_->Run(inputs_, ReferenceRunner::Precision::kNative);
  return r.ok() ? "" : std::string(r.status().message());
}

QuickRunner::Timed QuickRunner::Time(const std::function<std::string()>& launch, bool prunable) {
  Timed t;
  CUstream s = c10::cuda::getCurrentCUDAStream().stream();
  std::optional<at::cuda::CUDAGraph> graph;
  if (graph_) {
    try {
      graph.emplace();
      graph->capture_begin();
      for (int n = 0; n < kGraphLaunches && t.error.empty(); ++n) t.error = launch();
      graph->capture_end();
      if (t.error.empty()) graph->replay();  // the first replay uploads the graph: untimed
    } catch (const c10::Error& e) {
      EndAbandonedCapture(s);
      t.error = absl::StrCat("CUDA-graph capture: ", e.what_without_backtrace());
    }
    if (!t.error.empty()) return t;
  }
  const double per_rep = graph ? kGraphLaunches : 1;
  std::vector<CUevent> events(2 * static_cast<size_t>(reps_), nullptr);
  for (CUevent& e : events) cuEventCreate(&e, CU_EVENT_DEFAULT);
  auto rep = [&](int i) -> bool {
    if (absl::Status flushed = l2_flush_->Enqueue(); !flushed.ok()) {
      t.error = std::string(flushed.message());
      return false;
    }
    cuEventRecord(events[2 * i], s);
    if (graph) {
      graph->replay();
    } else {
      t.error = launch();
    }
    cuEventRecord(events[2 * i + 1], s);
    return t.error.empty();
  };
  auto collect = [&](int from, int to) -> bool {
    CUresult r = cuEventSynchronize(events[2 * (to - 1) + 1]);
    if (r != CUDA_SUCCESS) {
      t.error = "timing: " + CuDescribe(r);
      return false;
    }
    for (int i = from; i < to; ++i) {
      float ms = 0;
      cuEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]);
      t.seconds.push_back(ms * 1e-3 / per_rep);
    }
    return true;
  };
  if (rep(0) && collect(0, 1)) {
    if (prunable && t.seconds[0] > prune_factor_ * best_s_) {
      t.pruned = true;
    } else {
      bool fine = true;
      for (int i = 1; i < reps_ && fine; ++i) fine = rep(i);
      if (fine && reps_ > 1) collect(1, reps_);
    }
  }
  for (CUevent e : events) {
    if (e != nullptr) cuEventDestroy(e);
  }
  return t;
}

json QuickRunner::Eager() {
  const Timed& t = eager_timed_;
  json out = {{"job", -1},
              {"graph", graph_},
              {"verdict", t.error.empty() ? "PASS" : "NOT_EVALUATED"},
              {"message", t.error},
              {"median_s", Median(t.seconds)},
              {"reps", static_cast<int>(t.seconds.size())}};
  for (const ErrorStats& e : eager_error_) {
    out["max_normalized"] = std::max(out.value("max_normalized", 0.0), e.max_normalized);
  }
  return out;
}

json QuickRunner::RunJob(int index, bool* context_lost) {
  json out = {{"job", index}};
  auto fail = [&](const std::string& verdict, const std::string& message) {
    out["verdict"] = verdict;
    out["message"] = message;
    return out;
  };
  const json& job = manifest_["jobs"][index];
  bool ok = false;
  const std::string cubin = ReadFile(dir_ + "/" + job.value("cubin", ""), &ok);
  if (!ok || cubin.empty()) return fail("NOT_EVALUATED", "cannot read the cubin");
  absl::StatusOr<LaunchPlan> plan = LaunchPlan::Parse(job.value("plan", ""));
  if (!plan.ok()) return fail("LAUNCH_ERROR", std::string(plan.status().message()));

  CUmodule module = nullptr;
  CUresult r = cuModuleLoadData(&module, cubin.data());
  if (r != CUDA_SUCCESS) return fail("LAUNCH_ERROR", "cuModuleLoadData: " + CuDescribe(r));
  struct Unload {
    CUmodule m;
    ~Unload() { cuModuleUnload(m); }
  } unload{module};
  absl::StatusOr<const CudaDriver*> driver = CudaDriver::Get();
  if (!driver.ok()) return fail("LAUNCH_ERROR", std::string(driver.status().message()));
  absl::StatusOr<KernelFunctions> functions =
      GetKernelFunctions(**driver, module, plan->EntryPoints());
  if (!functions.ok()) return fail("LAUNCH_ERROR", std::string(functions.status().message()));

  std::vector<v1::TensorSignature> in_sigs, out_sigs;
  for (const at::Tensor& t : inputs_) in_sigs.push_back(SignatureOf(t));
  for (const GuardedOutput& o : outputs_) out_sigs.push_back(SignatureOf(o.view));
  absl::StatusOr<ResolvedPlan> resolved =
      plan->Resolve(BindSymbols(in_sigs, out_sigs, runner_->scalar_args().ints, sms_));
  if (!resolved.ok()) return fail("LAUNCH_ERROR", std::string(resolved.status().message()));
  if (absl::Status ready = PrepareKernelFunctions(**driver, *resolved, *functions, smem_optin_);
      !ready.ok()) {
    return fail("LAUNCH_ERROR", std::string(ready.message()));
  }
  if (resolved->scratch_bytes > scratch_.numel()) {
    scratch_ = at::empty({resolved->scratch_bytes},
                         at::TensorOptions().dtype(at::kByte).device(at::kCUDA));
  }

  KfArgs args;
  std::memset(&args, 0, sizeof(args));
  for (size_t i = 0; i < inputs_.size(); ++i) args.inputs[i] = ToKfTensor(inputs_[i]);
  for (size_t j = 0; j < outputs_.size(); ++j) args.outputs[j] = ToKfTensor(outputs_[j].view);
  args.scratch = ToKfTensor(scratch_);
  args.scratch.dtype = KF_UINT8;
  args.scratch.numel = resolved->scratch_bytes;
  args.scratch.sizes[0] = resolved->scratch_bytes;
  const ScalarArgs& scalars = runner_->scalar_args();
  for (size_t k = 0; k < scalars.ints.size(); ++k) args.int_args[k] = scalars.ints[k];
  for (size_t k = 0; k < scalars.floats.size(); ++k) args.float_args[k] = scalars.floats[k];
  args.num_inputs = static_cast<int>(inputs_.size());
  args.num_outputs = static_cast<int>(outputs_.size());
  args.num_int_args = static_cast<int>(scalars.ints.size());
  args.num_float_args = static_cast<int>(scalars.floats.size());

  CUstream s = c10::cuda::getCurrentCUDAStream().stream();
  auto launch_all = [&]() -> std::string {
    absl::Status launched = LaunchKernels(**driver, *resolved, *functions, s, &args);
    return launched.ok() ? "" : std::string(launched.message());
  };
  auto lost = [&](const std::string& verdict, const std::string& message) {
    *context_lost = !ContextHealthy();
    return fail(verdict, message);
  };

  // Correctness on the one input set: poison, run, guards, inputs, accuracy.
  for (GuardedOutput& o : outputs_) {
    FillBits(o.view, PoisonBits(ToProtoDType(o.view.scalar_type()), Poison::kA));
  }
  if (std::string e = launch_all(); !e.empty()) return lost("LAUNCH_ERROR", e);
  if ((r = cuStreamSynchronize(s)) != CUDA_SUCCESS) {
    return lost(r == CUDA_ERROR_ILLEGAL_ADDRESS ? "OUT_OF_BOUNDS" : "CRASH",
                "the kernel faulted: " + CuDescribe(r));
  }
  for (size_t j = 0; j < outputs_.size(); ++j) {
    if (!outputs_[j].GuardsIntact()) {
      outputs_[j].storage.fill_(kGuardByte);
      return fail("OUT_OF_BOUNDS", absl::StrCat("wrote outside output ", j));
    }
  }
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (FindBitDifference(inputs_[i], pristine_[i]) >= 0) {
      inputs_[i].copy_(pristine_[i]);
      return fail("INPUT_MUTATED", absl::StrCat("changed input ", i));
    }
  }
  double worst = 0;
  for (size_t j = 0; j < outputs_.size(); ++j) {
    double max_normalized = 0;
    bool fast = false;
    AccuracyJudgement judged = accuracy_[j].Judge(outputs_[j].view, &max_normalized, &fast);
    worst = std::max(worst, max_normalized);
    if (!judged.pass) {
      out["max_normalized"] = max_normalized;
      return fail("MISMATCH", absl::StrCat("output ", j, ": ", judged.message));
    }
  }
  out["max_normalized"] = worst;

  Timed t = Time(launch_all, true);
  if (!t.error.empty()) return lost("CRASH", t.error);
  const double median = Median(t.seconds);
  if (!t.pruned) best_s_ = std::min(best_s_, median);
  out["verdict"] = "PASS";
  out["median_s"] = median;
  out["reps"] = static_cast<int>(t.seconds.size());
  out["pruned"] = t.pruned;
  out["graph"] = graph_;
  return out;
}

int Main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr,
                 "usage: kforge-synth-sweep-quick DIR START RESULTS (started by "
                 "kforge-synth-sweep; see the comment at the top of synth_sweep_quick.cc)\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int start = std::atoi(argv[2]);
  FILE* results = std::fopen(argv[3], "a");
  if (results == nullptr) {
    std::fprintf(stderr, "cannot append to %s\n", argv[3]);
    return 2;
  }
  QuickRunner runner;
  try {
    absl::Status s = runner.Start(dir);
    if (!s.ok()) {
      std::fprintf(stderr, "quick pass cannot start: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "quick pass cannot start: %s\n", e.what_without_backtrace());
    return 2;
  }
  auto emit = [&](const json& line) {
    std::fprintf(results, "KFQ %s\n", line.dump().c_str());
    std::fflush(results);
  };
  // Jobs are numbered 0..n-1 in the manifest.
  int n = 0;
  {
    bool ok = false;
    json m = json::parse(ReadFile(dir + "/manifest.json", &ok), nullptr, false);
    n = static_cast<int>(m["jobs"].size());
  }
  if (start == 0) {
    try {
      emit(runner.Eager());
    } catch (const c10::Error& e) {
      emit({{"job", -1}, {"verdict", "NOT_EVALUATED"}, {"message", e.what_without_backtrace()}});
    }
  }
  for (int i = start; i < n; ++i) {
    bool context_lost = false;
    json line;
    try {
      line = runner.RunJob(i, &context_lost);
    } catch (const c10::Error& e) {
      context_lost = !ContextHealthy();
      line = {{"job", i}, {"verdict", "CRASH"}, {"message", e.what_without_backtrace()}};
    }
    emit(line);
    // A lost context cannot be unwound through torch's destructors: leave at once.
    if (context_lost) std::_Exit(3);
  }
  std::fclose(results);
  return 0;
}

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) { return kforge::Main(argc, argv); }
