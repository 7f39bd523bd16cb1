// BatchNormFamily: batch_norm in inference (training=False) over contiguous (N, C, *)
// tensors: y = (x - running_mean[c]) * rsqrt(running_var[c] + eps) * weight[c] + bias[c].
// Flat mode walks elements in vectors of any H*W and derives each element's channel; plane
// mode gives each (n, c) plane to a block that computes its channel's scale once.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "common/tensor_signature.h"
#include "services/proposer/synth/device_code.h"
#include "services/proposer/synth/family.h"
#include "services/proposer/synth/kernel_source.h"
#include "services/proposer/synth/pointwise_chain.h"
#include "services/proposer/synth/occupancy.h"
#include "services/proposer/synth/target_args.h"

namespace kforge::synth {
namespace {

struct BatchNormProblem {
  v1::DType in_dtype = v1::FLOAT32, out_dtype = v1::FLOAT32;
  // Input indices of weight, bias, running_mean, running_var (-1: absent) and their dtypes.
  int index[4] = {-1, -1, -1, -1};
  v1::DType dtype[4] = {v1::FLOAT32, v1::FLOAT32, v1::FLOAT32, v1::FLOAT32};
  double eps = 1e-5;
  int64_t numel = 0, channels = 1, plane = 1;  // captured, for the prior
  PointwiseChain chain;  // a chain's elementwise nodes after the batch norm (ReLU, residual add)
  uint64_t shape_key = 0;  // the captured call's (CapturedShapeKey), which its fast path tests
};

constexpr char kEngine[] = R"(
struct KfChannel { float mean; float scale; float shift; };

// A chain's epilogue (pointwise_chain.h) on the values about to be stored: its operands at
// element e are loaded with the step's inputs, before any store (the compiler may not move a
// load above a store that could alias it), and applied just before the store.
#if KF_EPILOGUE
template <int V> using KfEpi = KfEpiOperands<V>;
template <int V, typename I>
__device__ __forceinline__ void kf_epi_load(const KfArgs& args, I e, KfEpi<V>& o) {
  KfChain ch;
  kf_chain_init(ch, args, 0, 0);
  kf_epilogue_load<V>(ch, (kf_i64)e, o);
}
template <int V>
__device__ __forceinline__ void kf_epi_apply(const KfEpi<V>& o, float (&v)[V]) {
  kf_epilogue_apply<V>(o, v);
}
#else
template <int V> struct KfEpi {};
template <int V, typename I>
__device__ __forceinline__ void kf_epi_load(const KfArgs&, I, KfEpi<V>&) {}
template <int V>
__device__ __forceinline__ void kf_epi_apply(const KfEpi<V>&, float (&)[V]) {}
#endif

// The channel's affine transform in the (x - mean) * scale + shift form eager uses.
__device__ __forceinline__ KfChannel kf_channel(const KfArgs& args, kf_i64 c) {
  KfChannel ch;
  ch.mean = kf_to_float(reinterpret_cast<const TM*>(args.data[KF_MEAN])[c]);
  const float var = kf_to_float(reinterpret_cast<const TV*>(args.data[KF_VAR])[c]);
  ch.scale = rsqrtf(var + KF_EPS);
#if KF_WEIGHT >= 0
  ch.scale *= kf_to_float(reinterpret_cast<const TW*>(args.data[KF_WEIGHT])[c]);
#endif
#if KF_BIAS >= 0
  ch.shift = kf_to_float(reinterpret_cast<const TB*>(args.data[KF_BIAS])[c]);
#else
  ch.shift = 0.f;
#endif
  return ch;
}

#if KF_PLANE
// Plane mode: blockIdx.x walks the (n, c) planes; the block's threads walk the plane.
template <int V>
__device__ __forceinline__ void kf_run(const KfArgs& args, kf_i64 planes, kf_i64 channels,
                                       kf_i64 hw) {
  const TI* x = reinterpret_cast<const TI*>(args.data[0]);
  TO* y = reinterpret_cast<TO*>(args.data[KF_MAX_INPUTS]);
  const kf_i64 nv = hw / V;
  for (kf_i64 plane = blockIdx.x; plane < planes; plane += gridDim.x) {
    const KfChannel ch = kf_channel(args, plane % channels);
    const TI* xp = x + plane * hw;
    TO* yp = y + plane * hw;
    for (kf_i64 base = (kf_i64)blockIdx.y * KF_THREADS * KF_ILP + threadIdx.x; base < nv;
         base += (kf_i64)gridDim.y * KF_THREADS * KF_ILP) {
      float v[KF_ILP][V];
#pragma unroll
      for (int j = 0; j < KF_ILP; ++j) {
        const kf_i64 k = base + (kf_i64)j * KF_THREADS;
        if (k < nv) kf_load<V>(xp + k * V, v[j]);
      }
      KfEpi<V> epi[KF_ILP];
#pragma unroll
      for (int j = 0; j < KF_ILP; ++j) {
        const kf_i64 k = base + (kf_i64)j * KF_THREADS;
        if (k < nv) kf_epi_load<V>(args, plane * hw + k * V, epi[j]);
      }
#pragma unroll
      for (int j = 0; j < KF_ILP; ++j) {
        const kf_i64 k = base + (kf_i64)j * KF_THREADS;
        if (k < nv) {
          float o[V];
#pragma unroll
          for (int i = 0; i < V; ++i) o[i] = (v[j][i] - ch.mean) * ch.scale + ch.shift;
          kf_epi_apply<V>(epi[j], o);
          kf_store<V>(yp + k * V, o);
        }
      }
    }
  }
}
#else
// Flat mode. A call of fewer than 2^31 elements indexes in 32 bits and finds an element's
// plane and channel by multiply-shifts: of the captured call's H*W and C (constants, so the
// compiler emits them with no setup) or of divisors each thread computes once. A 64-bit
// division and modulo per vector cost more issue slots than a small plane's loads.
template <typename I, bool CAPTURED>
struct KfPlanes {
  I hw, channels;
  KfDivisor by_hw, by_c;
  __device__ __forceinline__ KfPlanes(kf_i64 hw_, kf_i64 channels_)
      : hw((I)hw_), channels((I)channels_) {
    if (sizeof(I) == 4 && !CAPTURED) {
      by_hw = kf_divisor((unsigned long long)max(hw_, 1ll));
      by_c = kf_divisor((unsigned long long)max(channels_, 1ll));
    }
  }
  __device__ __forceinline__ I div(I n, I d, KfDivisor by, unsigned captured) const {
    if (sizeof(I) == 8) return n / d;
    return CAPTURED ? (I)((unsigned)n / captured) : (I)kf_divide((unsigned)n, by);
  }
  __device__ __forceinline__ I plane(I e) const { return div(e, hw, by_hw, KF_HW); }
  __device__ __forceinline__ I channel(I plane) const {
    return plane - div(plane, channels, by_c, KF_C) * channels;
  }
};

// How a vector's elements find their channels: all in one plane (H*W a multiple of V), at
// most two planes (H*W >= V), or each its own (planes shorter than a vector).
#define KF_SPAN_ONE 0
#define KF_SPAN_TWO 1
#define KF_SPAN_EACH 2

template <int V, int SPAN, typename I, bool CAPTURED>
__device__ __forceinline__ void kf_norm(const KfArgs& args, const KfPlanes<I, CAPTURED>& p, I e,
                                        const float (&v)[V], float (&o)[V]) {
  const I plane = p.plane(e);
  const KfChannel a = kf_channel(args, p.channel(plane));
  if (SPAN == KF_SPAN_ONE) {
#pragma unroll
    for (int i = 0; i < V; ++i) o[i] = (v[i] - a.mean) * a.scale + a.shift;
  } else if (SPAN == KF_SPAN_TWO) {
    const I r = e - plane * p.hw;  // the vector's offset in its first plane
    const KfChannel b = r + V > p.hw ? kf_channel(args, p.channel(plane + 1)) : a;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const KfChannel& ch = r + i < p.hw ? a : b;
      o[i] = (v[i] - ch.mean) * ch.scale + ch.shift;
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const KfChannel ch = kf_channel(args, p.channel(p.plane(e + i)));
      o[i] = (v[i] - ch.mean) * ch.scale + ch.shift;
    }
  }
}

// EXACT: the captured call on a one-shot grid that tiles it (KF_CAPTURED_EXACT), whose every
// vector is in range: no loop, no bounds tests, no tail, and n a constant.
template <int V, int SPAN, typename I, bool CAPTURED, bool EXACT>
__device__ __forceinline__ void kf_run(const KfArgs& args, const KfPlanes<I, CAPTURED>& p,
                                       I n) {
  const TI* x = reinterpret_cast<const TI*>(args.data[0]);
  TO* y = reinterpret_cast<TO*>(args.data[KF_MAX_INPUTS]);
  const I nv = n / V;
  const I step = (I)gridDim.x * KF_THREADS * KF_ILP;
  for (I base = (I)blockIdx.x * KF_THREADS * KF_ILP + (I)threadIdx.x; EXACT || base < nv;
       base += step) {
    float v[KF_ILP][V];
#pragma unroll
    for (int j = 0; j < KF_ILP; ++j) {
      const I k = base + (I)j * KF_THREADS;
      if (EXACT || k < nv) kf_load<V>(x + k * V, v[j]);
    }
    // A vector in one plane: every vector's channel parameters loaded before any store (the
    // compiler may not move a load above a store that could alias it), so their latencies
    // overlap instead of queueing one vector's behind the previous one's store.
    KfChannel ch[KF_ILP];
    if (SPAN == KF_SPAN_ONE) {
#pragma unroll
      for (int j = 0; j < KF_ILP; ++j) {
        const I k = base + (I)j * KF_THREADS;
        if (EXACT || k < nv) ch[j] = kf_channel(args, p.channel(p.plane(k * V)));
      }
    }
    KfEpi<V> epi[KF_ILP];
#pragma unroll
    for (int j = 0; j < KF_ILP; ++j) {
      const I k = base + (I)j * KF_THREADS;
      if (EXACT || k < nv) kf_epi_load<V>(args, k * V, epi[j]);
    }
#pragma unroll
    for (int j = 0; j < KF_ILP; ++j) {
      const I k = base + (I)j * KF_THREADS;
      if (EXACT || k < nv) {
        float o[V];
        if (SPAN == KF_SPAN_ONE) {
#pragma unroll
          for (int i = 0; i < V; ++i) o[i] = (v[j][i] - ch[j].mean) * ch[j].scale + ch[j].shift;
        } else {
          kf_norm<V, SPAN>(args, p, k * V, v[j], o);
        }
        kf_epi_apply<V>(epi[j], o);
        kf_store<V>(y + k * V, o);
      }
    }
    if (EXACT) break;
  }
  // The elements past the last whole vector.
  if (!EXACT && V > 1 && blockIdx.x == 0) {
    for (I e = nv * V + (I)threadIdx.x; e < n; e += KF_THREADS) {
      float v[1] = {kf_to_float(x[e])}, o[1];
      kf_norm<1, KF_SPAN_ONE>(args, p, e, v, o);
      KfEpi<1> epi;
      kf_epi_load<1>(args, e, epi);
      kf_epi_apply<1>(epi, o);
      y[e] = kf_from_float<TO>(o[0]);
    }
  }
}

template <typename I, bool CAPTURED, bool EXACT = false>
__device__ __forceinline__ void kf_flat(const KfArgs& args, kf_i64 channels, kf_i64 hw) {
  const KfPlanes<I, CAPTURED> p(hw, channels);
  const I n = (I)args.inputs[0].numel;
  if (KF_VEC == 1 || hw % KF_VEC == 0) {
    kf_run<KF_VEC, KF_SPAN_ONE, I, CAPTURED, EXACT>(args, p, EXACT ? (I)KF_CAPTURED_NUMEL : n);
  } else if (hw >= KF_VEC) {
    kf_run<KF_VEC, KF_SPAN_TWO, I, CAPTURED, false>(args, p, n);
  } else {
    kf_run<KF_VEC, KF_SPAN_EACH, I, CAPTURED, false>(args, p, n);
  }
}
#endif

extern "C" __global__ void __launch_bounds__(KF_THREADS) kf_batch_norm(KfArgs args) {
  const KfTensor& x = args.inputs[0];
  const kf_i64 channels = x.sizes[1];
  const kf_i64 planes = x.sizes[0] * channels;
#if KF_PLANE
  // No per-element path: the plan requires KF_VEC to divide H*W, and aligned pointers.
  kf_run<KF_VEC>(args, planes, channels, planes > 0 ? x.numel / planes : 0);
#else
  // Aligned pointers (the plan requires them); any H*W. The captured call is recognized by its
  // shape key (the launcher's digest of every tensor's sizes and strides: one 64-bit compare);
  // another call of its C and H*W by those, without the 64-bit division H*W takes otherwise:
  // every thread would pay it up front.
#if KF_CAPTURED_NARROW
  if (args.shape_key == KF_SHAPE_KEY) {
    kf_flat<int, true, KF_CAPTURED_EXACT>(args, KF_C, KF_HW);
    return;
  }
#endif
  const bool narrow = x.numel < 0x7fffffffll;
  if (narrow && channels == KF_C && planes * KF_HW == x.numel) {
    kf_flat<int, true>(args, channels, KF_HW);
    return;
  }
  const kf_i64 hw = planes > 0 ? x.numel / planes : 0;
  if (narrow) {
    kf_flat<int, false>(args, channels, hw);
  } else {
    kf_flat<kf_i64, false>(args, channels, hw);
  }
#endif
}
)";

class BatchNormGenerator : public KernelGenerator {
 public:
  BatchNormGenerator(const BatchNormProblem& p, const GpuModel& gpu) : p_(p), gpu_(gpu) {
    space_ = ParamSpace({
        {"mode", {"flat", "plane"}, "walk elements (channel per element) or (n, c) planes"},
        {"threads", {"64", "128", "256", "512", "1024"}, "threads per block"},
        {"vec", {"1", "2", "4", "8"}, "elements per load/store (16 bytes at most)"},
        {"ilp", {"1", "2", "4"}, "vectors in flight per thread"},
        {"grid", {"oneshot", "stride"}, "one block per tile, or num_sms * occupancy blocks"},
        OccupancyParam(),
    });
  }

  const ParamSpace& Space() const override { return space_; }
  Config Canonicalize(const Config& c) const override { return c; }

  std::string Check(const Config& c) const override {
    if (std::string why = CheckOccupancy(gpu_, c); !why.empty()) return why;
    const int size = std::max(ElementSize(p_.in_dtype), ElementSize(p_.out_dtype));
    if (c.GetInt("vec") * size > 16) return "loads wider than 16 bytes";
    if (c.Get("mode") == "plane" && c.GetInt("vec") > 1 && p_.plane % c.GetInt("vec") != 0) {
      return absl::StrCat("planes of ", p_.plane, " elements do not split into vectors of ",
                          c.GetInt("vec"), kNoPerElementPath);
    }
    return "";
  }

  int64_t SharedBytes(const Config&) const override { return 0; }

  // Registers the fast path holds, as the elementwise family counts them: a step's V x ILP
  // values over a base of 24. An occupancy cap below it spills (SpillFactor). Without the
  // factor the prior put occupancy=100, ilp=4 first on the b32 batch norms, which spilled
  // and ran 1.27-1.38x the fastest swept config (docs/benchmarks/2026-12-02-prior-ranking.md;
  // with it 1.02-1.06x).
  int FastPathRegisters(const Config& c) const {
    return 24 + c.GetInt("vec") * c.GetInt("ilp");
  }

  // Registers per thread: a base plus the vectors in flight, as occupancy leaves them.
  int Registers(const Config& c) const {
    return OccupancyRegisters(gpu_, c.GetInt("threads"), MinBlocksPerSm(gpu_, c),
                              30 + c.GetInt("vec") * c.GetInt("ilp") * 2);
  }

  double MinBytes() const override {
    return double(p_.numel) * (ElementSize(p_.in_dtype) + ElementSize(p_.out_dtype)) +
           p_.chain.OperandBytes();
  }

  double EstimateSeconds(const Config& c) const override {
    const int threads = c.GetInt("threads"), vec = c.GetInt("vec"), ilp = c.GetInt("ilp");
    const bool plane = c.Get("mode") == "plane";
    const double n = std::max<int64_t>(1, p_.numel);
    const double per_block = double(threads) * vec * ilp;
    const int regs = Registers(c);
    const int per_sm = std::max(1, BlocksPerSm(gpu_, threads, 0, regs));
    double blocks, active = 1.0;
    if (plane) {
      const double planes = std::max<int64_t>(1, p_.numel / std::max<int64_t>(1, p_.plane));
      const double per_plane = std::ceil(p_.plane / per_block);
      blocks = planes * per_plane;
      active = std::min(1.0, p_.plane / (per_block * per_plane));
    } else {
      blocks = std::ceil(n / per_block);
    }
    const double grid = c.Get("grid") == "stride" ? std::min(blocks, double(gpu_.sm_count) * per_sm) : blocks;
    LaunchCost launch;
    launch.blocks = grid;
    launch.threads = threads;
    launch.registers = regs;
    launch.dram_bytes = MinBytes() * AccessWidthPenalty(vec * ElementSize(p_.in_dtype));
    launch.bytes_in_flight_per_thread = active * vec * ilp * ElementSize(p_.in_dtype);
    // Flat mode finds the channel per vector (two multiply-shifts) and re-reads its four
    // parameters.
    launch.ops = n * (plane ? 3 : 3 + 16.0 / vec) / active;
    launch.block_latency_cycles = std::ceil(blocks / grid) * (plane ? 1200 : 700);
    return synth::EstimateLaunchSeconds(gpu_, launch) * SpillFactor(FastPathRegisters(c), regs);
  }

  absl::StatusOr<GeneratedKernel> Generate(const Config& c) const override {
    if (std::string why = Check(c); !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("config ", c.ToString(), ": ", why));
    }
    const int threads = c.GetInt("threads"), vec = c.GetInt("vec"), ilp = c.GetInt("ilp");
    const bool plane = c.Get("mode") == "plane";
    std::string src = SourceHeader(p_.chain.empty() ? "batch_norm inference"
                                                   : p_.chain.Describe("batch_norm inference"));
    src += DevicePreamble({});
    const char* types[4] = {"TW", "TB", "TM", "TV"};
    absl::StrAppend(&src, "\ntypedef ", CudaType(p_.in_dtype), " TI;\ntypedef ",
                    CudaType(p_.out_dtype), " TO;\n");
    for (int i = 0; i < 4; ++i) {
      absl::StrAppend(&src, "typedef ", CudaType(p_.index[i] >= 0 ? p_.dtype[i] : v1::FLOAT32), " ",
                      types[i], ";\n");
    }
    absl::StrAppend(&src, "#define KF_THREADS ", threads, "\n#define KF_VEC ", vec,
                    "\n#define KF_ILP ", ilp, "\n#define KF_PLANE ", plane ? 1 : 0,
                    "\n#define KF_WEIGHT ", p_.index[0], "\n#define KF_BIAS ", p_.index[1],
                    "\n#define KF_MEAN ", p_.index[2], "\n#define KF_VAR ", p_.index[3],
                    "\n#define KF_EPS ", FloatLiteral(p_.eps), "\n#define KF_EPILOGUE ",
                    p_.chain.empty() ? 0 : 1, "\n");
    if (!plane) {
      // The captured call: its plane and channel count (divisions by constants), its shape
      // key, and whether a one-shot grid tiles it exactly (an element count of 32 bits only).
      const bool narrow = p_.numel < 0x7fffffffll;
      const bool exact = p_.plane % vec == 0 &&
                         OneShotTilesExactly(c.Get("grid") == "stride", p_.numel,
                                             int64_t{threads} * vec * ilp);
      absl::StrAppend(&src, kCapturedShapeBegin, "\n#define KF_HW ",
                      std::max<int64_t>(1, p_.plane), "u\n#define KF_C ",
                      std::max<int64_t>(1, p_.channels), "u\n#define KF_CAPTURED_NARROW ",
                      narrow ? 1 : 0, "\n#define KF_SHAPE_KEY ",
                      absl::StrFormat("0x%016xull", p_.shape_key), "\n#define KF_CAPTURED_EXACT ",
                      exact ? "true" : "false", "\n#define KF_CAPTURED_NUMEL ", p_.numel, "\n",
                      kCapturedShapeEnd, "\n");
      src += FastDivideSource();
    }
    if (!p_.chain.empty()) src += p_.chain.DeviceCode();
    src += kEngine;
    PlanSpec plan;
    plan.let = {{"N", "in0_numel"},
                {"PLANES", "in0_size0 * in0_size1"},
                {"HW", "N / max(PLANES, 1)"}};
    std::string grid_x, grid_y = "1";
    const int per_block = threads * vec * ilp;
    const int per_sm = std::max(1, BlocksPerSm(gpu_, threads, 0, Registers(c)));
    if (plane) {
      plan.let.push_back({"TILES", absl::StrCat("max(1, ceil_div(HW, ", per_block, "))")});
      grid_x = c.Get("grid") == "stride"
                   ? absl::StrCat("max(1, min(PLANES, ceil_div(num_sms * ", per_sm, ", TILES)))")
                   : "max(1, PLANES)";
      grid_y = "min(TILES, 65535)";
    } else {
      plan.let.push_back({"BLOCKS", absl::StrCat("max(1, ceil_div(N, ", per_block, "))")});
      grid_x = c.Get("grid") == "stride" ? absl::StrCat("min(BLOCKS, num_sms * ", per_sm, ")")
                                         : "BLOCKS";
    }
    plan.launches.push_back({"kf_batch_norm", {grid_x, grid_y, "1"}, {threads, 1, 1}, "0", {}});
    plan.alignment_bytes =
        vec > 1 ? vec * std::max({ElementSize(p_.in_dtype), ElementSize(p_.out_dtype),
                                  p_.chain.MaxVectorElementSize()})
                : 0;
    if (plane && vec > 1) plan.multiple_of.push_back({"HW", vec});
    return GeneratedKernel{WithMinBlocksPerSm(std::move(src), MinBlocksPerSm(gpu_, c)),
                           PlanJson(plan)};
  }

 private:
  BatchNormProblem p_;
  GpuModel gpu_;
  ParamSpace space_;
};

class BatchNormFamily : public Family {
 public:
  std::string Name() const override { return "batch_norm"; }
  std::vector<std::string> Ops() const override { return {"aten::batch_norm"}; }

  absl::StatusOr<std::unique_ptr<KernelGenerator>> Bind(const v1::Target& target,
                                                        const GpuModel& gpu) const override {
    // Alone, or the first node of a chain whose elementwise nodes follow it.
    if (ChainAnchor(target) != 0) {
      return absl::UnimplementedError(
          "a chain with elementwise nodes before the batch_norm; the family writes them after it");
    }
    KF_ASSIGN_OR_RETURN(TargetArgs args, TargetArgs::ForChainNode(target, 0, -1));
    if (args.OpName() != "batch_norm") {
      return absl::UnimplementedError(absl::StrCat("batch_norm family does not cover ",
                                                   target.nodes(0).op()));
    }
    KF_ASSIGN_OR_RETURN(bool training, args.Bool("training", 5));
    if (training) {
      return absl::UnimplementedError(
          "batch_norm with training=True updates running statistics; the synthesizer covers "
          "inference (model.eval()) only");
    }
    KF_ASSIGN_OR_RETURN(int x, args.RequiredInput("input", 0));
    if (x != 0) return absl::UnimplementedError("the input must be the target's first input");
    const v1::TensorSignature& in = args.input(0);
    KF_RETURN_IF_ERROR(RequireDenseFloat(in, "input"));
    KF_RETURN_IF_ERROR(RequireDenseFloat(args.output(0), "output"));
    if (in.sizes_size() < 2) return absl::UnimplementedError("batch_norm needs (N, C, ...) input");
    BatchNormProblem p;
    p.in_dtype = in.dtype();
    p.out_dtype = args.output(0).dtype();
    KF_ASSIGN_OR_RETURN(p.chain, PointwiseChain::Bind(target, 0, /*row_cols=*/0, in.dtype()));
    p.channels = in.sizes(1);
    p.numel = Numel(in);
    const int64_t planes = in.sizes(0) * p.channels;
    p.plane = planes > 0 ? p.numel / planes : 1;
    const char* names[4] = {"weight", "bias", "running_mean", "running_var"};
    for (int i = 0; i < 4; ++i) {
      std::optional<int> index = args.InputIndex(names[i], i + 1);
      if (!index.has_value()) {
        if (i >= 2) {
          return absl::UnimplementedError(absl::StrCat(
              "batch_norm without ", names[i], " normalizes with batch statistics; the "
              "synthesizer covers inference with running statistics only"));
        }
        if (!args.IsNone(names[i], i + 1)) {
          return absl::UnimplementedError(absl::StrCat("batch_norm: ", names[i], " is not a tensor input"));
        }
        continue;
      }
      KF_RETURN_IF_ERROR(RequireDenseFloat(args.input(*index), names[i]));
      if (Numel(args.input(*index)) != p.channels) {
        return absl::InvalidArgumentError(absl::StrCat("batch_norm: ", names[i], " has ",
                                                       Numel(args.input(*index)),
                                                       " elements for ", p.channels, " channels"));
      }
      p.index[i] = *index;
      p.dtype[i] = args.input(*index).dtype();
    }
    KF_ASSIGN_OR_RETURN(p.eps, args.Float("eps", 7));
    p.shape_key = CapturedShapeKey(target);
    return std::unique_ptr<KernelGenerator>(std::make_unique<BatchNormGenerator>(p, gpu));
  }
};

}  // namespace

std::unique_ptr<Family> MakeBatchNormFamily() { return std::make_unique<BatchNormFamily>(); }

}  // namespace kforge::synth
