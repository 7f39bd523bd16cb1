// PoolingFamily: adaptive_avg_pool2d, avg_pool2d and max_pool2d over contiguous (N, C, H, W)
// or (C, H, W) tensors. Global pooling (adaptive to 1x1) is a mean over rows of H*W, done by
// the row engine; everything else is one thread per output element with the window loop.
// Window sizes, strides and padding are the op's semantics and are compiled in; H, W and the
// output size are read from the ABI at run time.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "services/proposer/synth/family.h"
#include "services/proposer/synth/kernel_source.h"
#include "services/proposer/synth/row_kernel.h"
#include "services/proposer/synth/target_args.h"

namespace kforge::synth {
namespace {

enum class PoolKind { kAdaptiveAvg = 0, kAvg = 1, kMax = 2 };

struct PoolProblem {
  PoolKind kind = PoolKind::kAvg;
  v1::DType dtype = v1::FLOAT32;
  int kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  bool count_include_pad = true;
  int64_t divisor = 0;  // 0: none
  int64_t out_numel = 1, in_numel = 1;
  double window = 1;  // mean window size, for the prior
  KfArgs captured_call = {};  // the captured call (CapturedCallArgs): its entry's constants
};

constexpr char kEngine[] = R"(
template <typename I>
__device__ __forceinline__ float kf_pool(const TI* plane, I h_in, I w_in, I oh, I ow, I h_out,
                                         I w_out) {
#if KF_KIND == 0
  const I hs = (oh * h_in) / h_out, he = ((oh + 1) * h_in + h_out - 1) / h_out;
  const I ws = (ow * w_in) / w_out, we = ((ow + 1) * w_in + w_out - 1) / w_out;
  float sum = 0.f;
  for (I h = hs; h < he; ++h) {
    for (I w = ws; w < we; ++w) sum += kf_to_float(plane[h * w_in + w]);
  }
  return sum / (float)((he - hs) * (we - ws));
#elif KF_KIND == 1
  I hs = oh * KF_SH - KF_PH, ws = ow * KF_SW - KF_PW;
  I he = min(hs + (I)KF_KH, h_in + (I)KF_PH), we = min(ws + (I)KF_KW, w_in + (I)KF_PW);
  const I pool = (he - hs) * (we - ws);
  hs = max(hs, (I)0);
  ws = max(ws, (I)0);
  he = min(he, h_in);
  we = min(we, w_in);
  if (hs >= he || ws >= we) return 0.f;
  float sum = 0.f;
  for (I h = hs; h < he; ++h) {
    for (I w = ws; w < we; ++w) sum += kf_to_float(plane[h * w_in + w]);
  }
#if KF_DIVISOR > 0
  return sum / (float)KF_DIVISOR;
#elif KF_COUNT_PAD
  return sum / (float)pool;
#else
  return sum / (float)((he - hs) * (we - ws));
#endif
#else
  I hs = oh * KF_SH - KF_PH, ws = ow * KF_SW - KF_PW;
  const I he = min(hs + (I)((KF_KH - 1) * KF_DH + 1), h_in);
  const I we = min(ws + (I)((KF_KW - 1) * KF_DW + 1), w_in);
  while (hs < 0) hs += KF_DH;
  while (ws < 0) ws += KF_DW;
  float m = __int_as_float(0xff800000);
  for (I h = hs; h < he; h += KF_DH) {
    for (I w = ws; w < we; w += KF_DW) {
      const float v = kf_to_float(plane[h * w_in + w]);
      if (v > m || v != v) m = v;
    }
  }
  return m;
#endif
}

template <typename I>
__device__ __forceinline__ void kf_run(const KfArgs& args) {
  const KfTensor& x = args.inputs[0];
  const KfTensor& out = args.outputs[0];
  const I h_in = (I)x.sizes[x.ndim - 2], w_in = (I)x.sizes[x.ndim - 1];
  const I h_out = (I)out.sizes[out.ndim - 2], w_out = (I)out.sizes[out.ndim - 1];
  const I n = (I)out.numel;
  const TI* xin = reinterpret_cast<const TI*>(x.data);
  TO* y = reinterpret_cast<TO*>(out.data);
  const I step = (I)gridDim.x * KF_THREADS * KF_ILP;
  for (I base = (I)blockIdx.x * KF_THREADS * KF_ILP + (I)threadIdx.x; base < n; base += step) {
    // Every output's window is read before any output is stored: a load may not move above
    // a store that could alias it, so storing as it goes would keep one window in flight.
    float r[KF_ILP];
#pragma unroll
    for (int j = 0; j < KF_ILP; ++j) {
      const I idx = base + (I)j * KF_THREADS;
      if (idx < n) {
        const I ow = idx % w_out;
        const I t = idx / w_out;
        const I oh = t % h_out;
        const I nc = t / h_out;
        r[j] = kf_pool<I>(xin + nc * h_in * w_in, h_in, w_in, oh, ow, h_out, w_out);
      }
    }
#pragma unroll
    for (int j = 0; j < KF_ILP; ++j) {
      const I idx = base + (I)j * KF_THREADS;
      if (idx < n) y[idx] = kf_from_float<TO>(r[j]);
    }
  }
}

__device__ __forceinline__ void kf_pool2d_body(const KfArgs& args) {
  // 32-bit index math when every index fits, on request.
  if (KF_INDEX32 && args.inputs[0].numel < 0x7fffffffll && args.outputs[0].numel < 0x3fffffffll) {
    kf_run<int>(args);
  } else {
    kf_run<kf_i64>(args);
  }
}

extern "C" __global__ void __launch_bounds__(KF_THREADS) kf_pool2d(KfArgs args) {
  kf_pool2d_body(args);
}
)";

// The captured call's entry (the plan's captured_entry, after kf_captured_args): the same body
// on a KfArgs of constant shapes, so an output's coordinates and its window's bounds divide by
// constants (multiply-shifts) instead of the sizes read from the parameter at run time.
constexpr char kCapturedEntry[] = R"(
extern "C" __global__ void __launch_bounds__(KF_THREADS) kf_pool2d_captured(KfCapturedArgs args) {
  KfArgs call;
  kf_captured_args(call, args);
  kf_pool2d_body(call);
}
)";

class PoolGenerator : public KernelGenerator {
 public:
  PoolGenerator(const PoolProblem& p, const GpuModel& gpu) : p_(p), gpu_(gpu) {
    space_ = ParamSpace({
        {"threads", {"64", "128", "256", "512", "1024"}, "threads per block"},
        {"ilp", {"1", "2", "4"}, "outputs per thread per iteration"},
        {"grid", {"oneshot", "stride"}, "one thread per output, or num_sms * occupancy blocks"},
        {"index_bits", {"64", "32"}, "32-bit index math when the tensors are small enough"},
    });
  }

  const ParamSpace& Space() const override { return space_; }
  Config Canonicalize(const Config& c) const override { return c; }
  std::string Check(const Config&) const override { return ""; }
  int64_t SharedBytes(const Config&) const override { return 0; }

  double MinBytes() const override {
    return double(p_.in_numel + p_.out_numel) * ElementSize(p_.dtype);
  }

  double EstimateSeconds(const Config& c) const override {
    const int threads = c.GetInt("threads"), ilp = c.GetInt("ilp");
    const double n = std::max<int64_t>(1, p_.out_numel);
    const double blocks = std::ceil(n / (double(threads) * ilp));
    const int per_sm = std::max(1, BlocksPerSm(gpu_, threads, 0, 32 + 4 * ilp));
    const double grid = c.Get("grid") == "stride" ? std::min(blocks, double(gpu_.sm_count) * per_sm) : blocks;
    const bool idx32 = c.GetInt("index_bits") == 32;
    LaunchCost launch;
    launch.blocks = grid;
    launch.threads = threads;
    launch.registers = 32 + 4 * ilp + (idx32 ? 0 : 8);
    // Overlapping windows re-read inputs from L1/L2; DRAM sees them about once.
    launch.dram_bytes = MinBytes();
    launch.l2_bytes = std::max(0.0, n * p_.window - p_.in_numel) * ElementSize(p_.dtype) * 0.3;
    launch.bytes_in_flight_per_thread = ilp * ElementSize(p_.dtype) * std::min(4.0, p_.window);
    launch.ops = n * ((idx32 ? 20 : 45) + p_.window * (idx32 ? 4 : 7));
    launch.block_latency_cycles = std::ceil(blocks / grid) * (600 + 30 * p_.window);
    return synth::EstimateLaunchSeconds(gpu_, launch);
  }

  absl::StatusOr<GeneratedKernel> Generate(const Config& c) const override {
    const int threads = c.GetInt("threads"), ilp = c.GetInt("ilp");
    static const char* kNames[] = {"adaptive_avg_pool2d", "avg_pool2d", "max_pool2d"};
    std::string src = SourceHeader(kNames[static_cast<int>(p_.kind)]);
    src += DevicePreamble({});
    absl::StrAppend(&src, "\ntypedef ", CudaType(p_.dtype), " TI;\ntypedef ", CudaType(p_.dtype),
                    " TO;\n");
    absl::StrAppend(&src, "#define KF_THREADS ", threads, "\n#define KF_ILP ", ilp,
                    "\n#define KF_INDEX32 ", c.GetInt("index_bits") == 32 ? 1 : 0,
                    "\n#define KF_KIND ", static_cast<int>(p_.kind), "\n#define KF_KH ", p_.kh,
                    "\n#define KF_KW ", p_.kw, "\n#define KF_SH ", p_.sh, "\n#define KF_SW ", p_.sw,
                    "\n#define KF_PH ", p_.ph, "\n#define KF_PW ", p_.pw, "\n#define KF_DH ", p_.dh,
                    "\n#define KF_DW ", p_.dw, "\n#define KF_COUNT_PAD ", p_.count_include_pad ? 1 : 0,
                    "\n#define KF_DIVISOR ", p_.divisor, "\n");
    src += kEngine;
    absl::StrAppend(&src, CapturedArgsSource(p_.captured_call), kCapturedEntry);
    PlanSpec plan;
    const std::string grid = FlatGrid(plan, threads * ilp, c.Get("grid") == "stride",
                                      std::max(1, BlocksPerSm(gpu_, threads, 0, 32 + 4 * ilp)));
    plan.launches.push_back({"kf_pool2d", {grid, "1", "1"}, {threads, 1, 1}, "0", {}});
    // Element by element: the captured call needs no alignment beyond its element type's.
    plan.launches.back().captured_entry = "kf_pool2d_captured";
    plan.captured = CapturedCall{p_.captured_call.shape_key, 1};
    return GeneratedKernel{std::move(src), PlanJson(plan)};
  }

 private:
  PoolProblem p_;
  GpuModel gpu_;
  ParamSpace space_;
};

// An int[2] argument given as [a], [a, b] or a single int; `fallback` when empty.
absl::StatusOr<std::pair<int64_t, int64_t>> Pair(const TargetArgs& args, const char* name,
                                                 int position,
                                                 std::pair<int64_t, int64_t> fallback) {
  if (args.IsNone(name, position)) return fallback;
  KF_ASSIGN_OR_RETURN(std::vector<int64_t> values, args.IntList(name, position));
  if (values.empty()) return fallback;
  if (values.size() == 1) return std::make_pair(values[0], values[0]);
  if (values.size() == 2) return std::make_pair(values[0], values[1]);
  return absl::InvalidArgumentError(absl::StrCat(args.node().op(), ": ", name, " has ",
                                                 values.size(), " values, expected 1 or 2"));
}

class PoolingFamily : public Family {
 public:
  std::string Name() const override { return "pooling"; }
  std::vector<std::string> Ops() const override {
    return {"aten::adaptive_avg_pool2d", "aten::avg_pool2d", "aten::max_pool2d"};
  }

  absl::StatusOr<std::unique_ptr<KernelGenerator>> Bind(const v1::Target& target,
                                                        const GpuModel& gpu) const override {
    KF_ASSIGN_OR_RETURN(TargetArgs args, TargetArgs::Create(target));
    const std::string op = args.OpName();
    PoolProblem p;
    if (op == "adaptive_avg_pool2d") {
      p.kind = PoolKind::kAdaptiveAvg;
    } else if (op == "avg_pool2d") {
      p.kind = PoolKind::kAvg;
    } else if (op == "max_pool2d") {
      p.kind = PoolKind::kMax;
    } else {
      return absl::UnimplementedError(absl::StrCat("pooling family does not cover ", op));
    }
    if (args.num_outputs() != 1) {
      return absl::UnimplementedError(absl::StrCat(op, " with ", args.num_outputs(),
                                                   " outputs (indices) is not covered"));
    }
    KF_ASSIGN_OR_RETURN(int x, args.RequiredInput("self", 0));
    if (x != 0) return absl::UnimplementedError("the input must be the target's first input");
    const v1::TensorSignature& in = args.input(0);
    const v1::TensorSignature& out = args.output(0);
    KF_RETURN_IF_ERROR(RequireDenseFloat(in, "input"));
    KF_RETURN_IF_ERROR(RequireDenseFloat(out, "output"));
    if (out.dtype() != in.dtype()) {
      return absl::InvalidArgumentError("pooling output dtype differs from its input's");
    }
    const int ndim = in.sizes_size();
    if (ndim != 3 && ndim != 4) {
      return absl::UnimplementedError(absl::StrCat(op, " of a ", ndim,
                                                   "-d tensor; expected (N, C, H, W) or (C, H, W)"));
    }
    if (out.sizes_size() != ndim) {
      return absl::InvalidArgumentError("pooling output rank differs from its input's");
    }
    p.dtype = in.dtype();
    p.in_numel = Numel(in);
    p.out_numel = Numel(out);
    p.captured_call = CapturedCallArgs(target);
    const int64_t h = in.sizes(ndim - 2), w = in.sizes(ndim - 1);
    if (p.kind == PoolKind::kAdaptiveAvg) {
      KF_ASSIGN_OR_RETURN(auto size, Pair(args, "output_size", 1, {0, 0}));
      if (size.first <= 0 || size.second <= 0) {
        return absl::InvalidArgumentError("adaptive_avg_pool2d: output_size must be positive");
      }
      if (size.first == 1 && size.second == 1) {
        // Global pooling: a mean over rows of H*W.
        RowProblem row;
        row.op = RowOp::kMean;
        row.in_dtype = in.dtype();
        row.out_dtype = out.dtype();
        row.ndim = ndim;
        row.row_dims = 2;
        row.cols = h * w;
        row.rows = row.cols > 0 ? p.in_numel / row.cols : 0;
        row.captured_call = p.captured_call;
        return MakeRowKernelGenerator(row, gpu);
      }
      p.window = std::max(1.0, std::ceil(double(h) / size.first) * std::ceil(double(w) / size.second));
    } else {
      KF_ASSIGN_OR_RETURN(auto kernel, Pair(args, "kernel_size", 1, {0, 0}));
      KF_ASSIGN_OR_RETURN(auto stride, Pair(args, "stride", 2, kernel));
      KF_ASSIGN_OR_RETURN(auto padding, Pair(args, "padding", 3, {0, 0}));
      if (kernel.first <= 0 || kernel.second <= 0 || stride.first <= 0 || stride.second <= 0 ||
          padding.first < 0 || padding.second < 0) {
        return absl::InvalidArgumentError(absl::StrCat(op, ": kernel_size and stride must be "
                                                       "positive and padding non-negative"));
      }
      p.kh = kernel.first;
      p.kw = kernel.second;
      p.sh = stride.first;
      p.sw = stride.second;
      p.ph = padding.first;
      p.pw = padding.second;
      if (p.kind == PoolKind::kMax) {
        KF_ASSIGN_OR_RETURN(auto dilation, Pair(args, "dilation", 4, {1, 1}));
        if (dilation.first <= 0 || dilation.second <= 0) {
          return absl::InvalidArgumentError("max_pool2d: dilation must be positive");
        }
        p.dh = dilation.first;
        p.dw = dilation.second;
      } else {
        if (!args.IsNone("count_include_pad", 5)) {
          KF_ASSIGN_OR_RETURN(p.count_include_pad, args.Bool("count_include_pad", 5));
        }
        if (!args.IsNone("divisor_override", 6)) {
          KF_ASSIGN_OR_RETURN(p.divisor, args.Int("divisor_override", 6));
          if (p.divisor <= 0) {
            return absl::InvalidArgumentError("avg_pool2d: divisor_override must be positive");
          }
        }
      }
      // ceil_mode only changes the output size, which the kernel reads from its output.
      p.window = double(p.kh) * p.kw;
    }
    return std::unique_ptr<KernelGenerator>(std::make_unique<PoolGenerator>(p, gpu));
  }
};

}  // namespace

std::unique_ptr<Family> MakePoolingFamily() { return std::make_unique<PoolingFamily>(); }

}  // namespace kforge::synth
