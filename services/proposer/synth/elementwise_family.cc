// ElementwiseFamily: relu, gelu (erf and tanh), silu, sigmoid, tanh, neg, abs, exp, sqrt,
// rsqrt, sin, cos, log, log1p, reciprocal, erf, hardsigmoid, hardswish, mish, pow by a number,
// leaky_relu, clamp / clamp_min / clamp_max / hardtanh / relu6 to numbers, elu, softplus, to
// (a dtype conversion between float32, float16 and bfloat16), add / sub / rsub / mul / div
// with broadcasting (each broadcast input is read through the output's dims merged into
// groups, device/broadcast_groups.cuh), by a number (a traced Python number the capture
// recorded, or a Scalar argument; baked into the kernel) or by a one-element float64 tensor on
// the device (read by the kernel), masked_fill with a number under a broadcast bool mask, and
// where between a tensor and a number; and their in-place forms (relu_, add_, ...), the output
// being self.
// Flat inputs and broadcasts along whole last-dim runs take the vectorized path; anything else
// the per-element path. An input broadcast over whole output rows (a mask, a bias) may be
// loaded once for several rows (`reuse`, kf_reuse_rows), and any broadcast input under an L2
// evict_last policy (`keep`, kKeptLoads). The captured call's path is decided when the kernel
// is generated (kf_decide, device/elementwise_path.cuh); other calls decide it per block.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/tensor_signature.h"
#include "services/proposer/synth/device_code.h"
#include "services/proposer/synth/family.h"
#include "services/proposer/synth/kernel_source.h"
#include "services/proposer/synth/occupancy.h"
#include "services/proposer/synth/pointwise_chain.h"
#include "services/proposer/synth/target_args.h"

namespace kforge::synth {
namespace {

enum class UnaryOp {
  kRelu, kGeluErf, kGeluTanh, kSilu, kSigmoid, kTanh, kNeg, kAbs, kExp, kSqrt, kRsqrt, kSin,
  kCos, kLog, kLog1p, kReciprocal, kErf, kHardsigmoid, kHardswish, kMish, kPow, kTo,
  kLeakyRelu, kClamp, kElu, kSoftplus, kAdd, kSub, kRsub, kMul, kDiv, kMaskedFill, kWhere
};

// The numbers the ops with number arguments compute with (aten's names and defaults).
struct OpNumbers {
  std::optional<double> min, max;  // clamp, clamp_min, clamp_max, hardtanh, relu6
  double negative_slope = 0.01;    // leaky_relu
  double alpha = 1, scale = 1, input_scale = 1;  // elu
  double beta = 1, threshold = 20;  // softplus
  double value = 0;                 // masked_fill, where (its number branch)
  bool value_is_self = false;       // where: the number is `self` (taken where true)
};

struct ElementwiseProblem {
  UnaryOp op = UnaryOp::kRelu;
  int num_inputs = 1;
  v1::DType in_dtype[2] = {v1::FLOAT32, v1::FLOAT32};
  v1::DType out_dtype = v1::FLOAT32;
  double alpha = 1.0;
  double exponent = 1.0;  // pow by a number
  OpNumbers numbers;
  // add/sub/rsub/mul/div whose `other` is a number the capture recorded (a traced Python number, a
  // 0-dim CPU tensor): baked into the kernel, which then has the one input `self`.
  std::optional<double> other_value;
  // An input of one float64 element (a scalar tensor the model keeps on the device, such as
  // an attention scale): read once per vector, so it does not set the vector width (the
  // kernel takes its vector path when the pointer is aligned for KF_VEC doubles, as the
  // caching allocator's 512-byte blocks are).
  bool device_scalar[2] = {false, false};
  double broadcast_index_ops = 0;  // per vector: integer ops to find the broadcast inputs' offsets
  int64_t numel = 0;
  uint64_t shape_key = 0;  // the captured call's (CapturedShapeKey), the plan's `captured`
  KfTensor in_tensor[2] = {};  // captured sizes and strides, baked into the kernel's fast path
  KfTensor out_tensor = {};
  KfGroups<kf_i64> in_groups[2] = {};  // each input's groups along the captured output
  // Elements each input holds (its dims of stride 0, an expand's, hold one): what it moves.
  double in_numel[2] = {0, 0};
  // Every input and the output contiguous; else the plan does not require it (the kernel reads
  // any strides through its groups and writes a dense output in its memory order).
  bool all_contiguous = true;
  // Elements per output row when every broadcast input spans exactly one row of the output
  // (kf_reuse_rows's form), else 0.
  int64_t reuse_inner = 0;
  std::string name;
  // A chain of elementwise nodes (a --fuse target): kf_op composes their stages, the streamed
  // value input 0, the one tensor operand among them input 1. Empty for a single op.
  std::vector<PointwiseStage> chain;
};

// Loads under an L2 evict_last policy (kL2CacheHints), emitted only for keep=1
// configs: a broadcast input is read again for every output row it spans, and the streamed
// operands passing between two reads would otherwise evict it (Inductor marks such loads
// evict_last too). One byte (bool) loads take the plain path.
constexpr char kKeptLoads[] = R"(
#define KF_KEEP 1
template <typename T, int V>
__device__ __forceinline__ KfVec<T, V> kf_load_kept(const T* p) {
  return kf_load_l2<T, V>(p, kf_l2_policy(true));
}
)";

constexpr char kEngine[] = R"(
// Input INPUT's offset of output element e: from the captured call's groups, baked in
// (CAPTURED, kf_captured_offset), or from the groups the block built.
template <int V, typename I, int INPUT, bool CAPTURED, typename T>
__device__ __forceinline__ void kf_read(const T* x, int mode, const KfGroups<I>& g, I e,
                                        float (&v)[V]) {
  const I offset = mode == KF_FLAT ? e
                   : CAPTURED      ? kf_captured_offset<INPUT, I>(e)
                                   : kf_group_offset<I>(g, e);
#ifdef KF_KEEP
  if (mode != KF_FLAT) {  // a broadcast input: read again for every row it spans
    if (V > 1 && mode == KF_CONST) {
      const float c = kf_to_float(kf_load_kept<T, 1>(x + offset).v[0]);
#pragma unroll
      for (int i = 0; i < V; ++i) v[i] = c;
    } else {
      const KfVec<T, V> raw = kf_load_kept<T, V>(x + offset);
      kf_to_floats(raw, v);
    }
    return;
  }
#endif
  if (V > 1 && mode == KF_CONST) {
    const float c = kf_to_float(x[offset]);
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = c;
  } else if (V > 1) {
    kf_load<V>(x + offset, v);
  } else {
    v[0] = kf_to_float(x[offset]);
  }
}

// kf_read, or V copies of `value` when ONCE: the input was read before the loop.
template <int V, typename I, int INPUT, bool CAPTURED, bool ONCE, typename T>
__device__ __forceinline__ void kf_read_or_fill(const T* x, int mode, const KfGroups<I>& g, I e,
                                                float value, float (&v)[V]) {
  if (ONCE) {
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = value;
  } else {
    kf_read<V, I, INPUT, CAPTURED>(x, mode, g, e, v);
  }
}

// One input's KF_ILP vectors of the thread's group starting at vector `base` (those below nv,
// or all of them when not `checked`).
template <int V, typename I, int INPUT, bool CAPTURED, bool ONCE, typename T>
__device__ __forceinline__ void kf_read_all(const T* x, int mode, const KfGroups<I>& g, I base,
                                            I nv, bool checked, float value,
                                            float (&v)[KF_ILP][V]) {
#pragma unroll
  for (int j = 0; j < KF_ILP; ++j) {
    const I k = base + (I)j * KF_THREADS;
    if (!checked || k < nv) {
      kf_read_or_fill<V, I, INPUT, CAPTURED, ONCE>(x, mode, g, k * V, value, v[j]);
    }
  }
}

// The output's element count, and the inputs' broadcast groups (built by thread 0 into
// shared memory, then a barrier): from the tensors of a call, or none for the captured call,
// whose count is a constant and whose offsets divide by constants (kf_captured_offset).
__device__ __forceinline__ kf_i64 kf_numel(const KfArgs& args) { return args.outputs[0].numel; }
template <typename I>
__device__ __forceinline__ void kf_block_groups(const KfArgs& args, KfGroups<I>* groups) {
  if (threadIdx.x == 0) {
    kf_with_memory_order(args.inputs[0], args.inputs[KF_NIN - 1], args.outputs[0],
                         [&](const KfTensor& in0, const KfTensor& in1, const KfTensor& out) {
                           kf_groups<I>(in0, out, groups[0]);
#if KF_NIN == 2
                           kf_groups<I>(in1, out, groups[1]);
#endif
                         });
  }
  __syncthreads();
}
#ifdef KF_CAPTURED_SETUP
__device__ __forceinline__ kf_i64 kf_numel(const KfCapturedArgs&) { return KF_CAPTURED_NUMEL; }
template <typename I>
__device__ __forceinline__ void kf_block_groups(const KfCapturedArgs&, KfGroups<I>*) {}
#endif

// Loads KF_ILP vectors per thread before computing any, so their latencies overlap. A is
// KfArgs, or KfCapturedArgs for the captured call (CAPTURED).
template <int V, typename I, bool CAPTURED, typename A>
__device__ __forceinline__ void kf_run(const A& args, int mode0, int mode1) {
  // The captured call on a one-shot grid that tiles it exactly (KF_CAPTURED_EXACT): every
  // thread's vectors are in range, so no loop, no bounds tests and no tail.
  constexpr bool kExact = CAPTURED && V == KF_VEC && KF_CAPTURED_EXACT;
  const I n = (I)kf_numel(args);
  const I nv = n / V;
  const T0* x0 = reinterpret_cast<const T0*>(args.data[0]);
#if KF_NIN == 2
  const T1* x1 = reinterpret_cast<const T1*>(args.data[1]);
#endif
  TO* y = reinterpret_cast<TO*>(args.data[KF_MAX_INPUTS]);
  // The inputs' broadcast groups, the same for every thread: built once per block, read from
  // shared memory by a short loop (compact code, no registers held).
  __shared__ KfGroups<I> groups[KF_NIN];
  kf_block_groups<I>(args, groups);
  // A one-element input of the captured call (a device scalar) is read once, before the loop,
  // with KF_SCALAR_ONCE (the compiler may not hoist a load above the loop's stores, which could
  // alias it); else with every vector, after the streamed input's loads.
  const float one0 = CAPTURED && KF_ONCE0 ? kf_to_float(x0[0]) : 0.f;
#if KF_NIN == 2
  const float one1 = CAPTURED && KF_ONCE1 ? kf_to_float(x1[0]) : 0.f;
#endif
  const I step = (I)gridDim.x * KF_THREADS * KF_ILP;
  for (I base = (I)blockIdx.x * KF_THREADS * KF_ILP + (I)threadIdx.x; kExact || base < nv;
       base += step) {
    float a[KF_ILP][V];
    float b[KF_ILP][V] = {};
    // One input's vectors, then the other's: a one-element input's load (the same address every
    // time) and its conversion to float then wait with the streamed loads already in flight.
#if KF_NIN == 2 && KF_CAPTURED_ONE0 && !KF_CAPTURED_ONE1
    kf_read_all<V, I, 1, CAPTURED, CAPTURED && KF_ONCE1>(x1, mode1, groups[1], base, nv,
                                                         !kExact, one1, b);
    kf_read_all<V, I, 0, CAPTURED, CAPTURED && KF_ONCE0>(x0, mode0, groups[0], base, nv,
                                                         !kExact, one0, a);
#else
    kf_read_all<V, I, 0, CAPTURED, CAPTURED && KF_ONCE0>(x0, mode0, groups[0], base, nv,
                                                         !kExact, one0, a);
#if KF_NIN == 2
    kf_read_all<V, I, 1, CAPTURED, CAPTURED && KF_ONCE1>(x1, mode1, groups[1], base, nv,
                                                         !kExact, one1, b);
#endif
#endif
#pragma unroll
    for (int j = 0; j < KF_ILP; ++j) {
      const I k = base + (I)j * KF_THREADS;
      if (kExact || k < nv) {
        float o[V];
#pragma unroll
        for (int i = 0; i < V; ++i) o[i] = kf_op(a[j][i], b[j][i]);
        kf_store<V>(y + k * V, o);
      }
    }
    if (kExact) break;
  }
  // The tail that does not fill a vector (only flat inputs have one).
  if (!kExact && V > 1 && blockIdx.x == 0) {
    for (I e = nv * V + (I)threadIdx.x; e < n; e += KF_THREADS) {
      float a[1], b[1] = {0.f};
      kf_read_or_fill<1, I, 0, CAPTURED, CAPTURED && KF_ONCE0>(x0, mode0, groups[0], e, one0, a);
#if KF_NIN == 2
      kf_read_or_fill<1, I, 1, CAPTURED, CAPTURED && KF_ONCE1>(x1, mode1, groups[1], e, one1, b);
#endif
      y[e] = kf_from_float<TO>(kf_op(a[0], b[0]));
    }
  }
}

#if KF_REUSE > 1 && KF_NIN == 2
template <bool C, typename A, typename B> struct KfPick { typedef A type; };
template <typename A, typename B> struct KfPick<false, A, B> { typedef B type; };

// An output of rows of `inner` elements and a broadcast input (ROW) spanning one row (an
// attention mask over heads, a bias over tokens), the other input flat: a thread loads the
// row input's vector once and applies it to KF_REUSE rows, so DRAM reads it once instead of
// once per row (the streamed operands evict it from L2 between rows). ROW is a compile-time
// index so the vectors stay in registers.
template <int V, typename I, int ROW, typename A>
__device__ __forceinline__ void kf_reuse_rows(const A& args, I inner) {
  const I rows = (I)kf_numel(args) / inner;
  const I nkv = inner / V;
  const I cells = nkv * ((rows + KF_REUSE - 1) / KF_REUSE);
  const KfDivisor by_nkv = kf_divisor(sizeof(I) == 4 ? (unsigned long long)nkv : 1ull);
  typedef typename KfPick<ROW == 0, T0, T1>::type TR;
  typedef typename KfPick<ROW == 0, T1, T0>::type TF;
  const TR* xr = reinterpret_cast<const TR*>(args.data[ROW]);
  const TF* xf = reinterpret_cast<const TF*>(args.data[1 - ROW]);
  TO* y = reinterpret_cast<TO*>(args.data[KF_MAX_INPUTS]);
  for (I cell = (I)blockIdx.x * KF_THREADS + (I)threadIdx.x; cell < cells;
       cell += (I)gridDim.x * KF_THREADS) {
    const I group = sizeof(I) == 4 ? (I)kf_divide((unsigned)cell, by_nkv) : cell / nkv;
    const I col = (cell - group * nkv) * V;
    const I row0 = group * KF_REUSE;
    // The row vector, then every row's vector of the flat input, before any store (the
    // compiler may not hoist a load above a store that could alias it).
    float row_v[V];
#ifdef KF_KEEP
    const KfVec<TR, V> kept = kf_load_kept<TR, V>(xr + col);
    kf_to_floats(kept, row_v);
#else
    kf_load<V>(xr + col, row_v);
#endif
    KfVec<TF, V> flat_v[KF_REUSE];  // as loaded: half the registers of floats for 16-bit types
#pragma unroll
    for (int r = 0; r < KF_REUSE; ++r) {
      if (row0 + r < rows) {
        flat_v[r] = *reinterpret_cast<const KfVec<TF, V>*>(xf + (row0 + r) * inner + col);
      }
    }
#pragma unroll
    for (int r = 0; r < KF_REUSE; ++r) {
      if (row0 + r < rows) {
        float f[V], o[V];
        kf_to_floats(flat_v[r], f);
#pragma unroll
        for (int i = 0; i < V; ++i) o[i] = ROW == 0 ? kf_op(row_v[i], f[i]) : kf_op(f[i], row_v[i]);
        kf_store<V>(y + (row0 + r) * inner + col, o);
      }
    }
  }
}

#endif

// A call other than the captured one: decided once per block by thread 0 and read by every
// thread from shared memory. Deciding it in every thread (the modes alone walk every dim of
// every tensor) cost more issue slots than the two loads and one store a thread of a one-shot
// grid does.
__device__ __forceinline__ KfSetup kf_setup(const KfArgs& args) {
  const bool aligned = kf_aligned(args.outputs[0].data, KF_VEC * (int)sizeof(TO)) &&
                       kf_aligned(args.inputs[0].data, KF_VEC * (int)sizeof(T0)) &&
                       kf_aligned(args.inputs[KF_NIN - 1].data, KF_VEC * (int)sizeof(T1));
  return kf_with_memory_order(
      args.inputs[0], args.inputs[KF_NIN - 1], args.outputs[0],
      [&](const KfTensor& in0, const KfTensor& in1, const KfTensor& out) {
        return kf_decide(in0, in1, out, KF_NIN, KF_VEC, KF_REUSE, aligned);
      });
}

template <typename I, bool CAPTURED, typename A>
__device__ __forceinline__ void kf_dispatch(const A& args, const KfSetup& s) {
  switch (s.path) {
#if KF_REUSE > 1 && KF_NIN == 2
    case KF_PATH_REUSE:
      if (s.row_input == 0) {
        kf_reuse_rows<KF_VEC, I, 0>(args, (I)s.inner);
      } else {
        kf_reuse_rows<KF_VEC, I, 1>(args, (I)s.inner);
      }
      return;
#endif
    case KF_PATH_VEC:
      kf_run<KF_VEC, I, CAPTURED>(args, s.mode0, s.mode1);
      return;
    default:
      kf_run<1, I, CAPTURED>(args, s.mode0, s.mode1);
  }
}

#ifdef KF_CAPTURED_SETUP
// The captured call, which the launcher recognizes by its shape key and alignment (the plan's
// `captured`): its path is a constant and its broadcast offsets divide by constants, so the
// first loads wait for nothing but the pointers, and the code is that path alone.
extern "C" __global__ void __launch_bounds__(KF_THREADS)
    kf_elementwise_captured(KfCapturedArgs args) {
  const KfSetup captured = KF_CAPTURED_SETUP;
  kf_dispatch<int, true>(args, captured);
}
#endif

extern "C" __global__ void __launch_bounds__(KF_THREADS) kf_elementwise(KfArgs args) {
  __shared__ KfSetup setup;
  if (threadIdx.x == 0) setup = kf_setup(args);
  __syncthreads();
  if (setup.small) {
    kf_dispatch<int, false>(args, setup);
  } else {
    kf_dispatch<kf_i64, false>(args, setup);
  }
}
)";

std::string OpBody(const ElementwiseProblem& p, bool fast) {
  // The second operand: input 1, or the number, rounded to float as aten computes with it.
  const std::string other = p.other_value ? FloatLiteral(*p.other_value) : "b";
  switch (p.op) {
    case UnaryOp::kRelu:
      // NaN stays NaN, as aten's relu (clamp_min).
      return "return a != a ? a : (a > 0.f ? a : 0.f);";
    case UnaryOp::kGeluErf:
      return "return 0.5f * a * (1.f + erff(a * 0.70710678118654752440f));";
    case UnaryOp::kGeluTanh:
      return "const float inner = 0.79788456080286535588f * (a + 0.044715f * a * a * a);\n"
             "  return 0.5f * a * (1.f + KF_TANH(inner));";
    case UnaryOp::kSilu:
      return "return KF_DIV(a, 1.f + KF_EXP(-a));";
    case UnaryOp::kSigmoid:
      return fast ? "return __frcp_rn(1.f + KF_EXP(-a));" : "return 1.f / (1.f + KF_EXP(-a));";
    case UnaryOp::kTanh:
      return "return KF_TANH(a);";
    case UnaryOp::kNeg:
      return "return -a;";
    case UnaryOp::kAbs:
      return "return fabsf(a);";
    case UnaryOp::kExp:
      return "return KF_EXP(a);";
    case UnaryOp::kSqrt:
      return "return sqrtf(a);";
    case UnaryOp::kRsqrt:
      return "return rsqrtf(a);";  // as aten's CUDA kernel
    case UnaryOp::kSin:  // precise: rotary angles grow with the position, past __sinf's range
      return "return sinf(a);";
    case UnaryOp::kCos:
      return "return cosf(a);";
    case UnaryOp::kLog:
      return "return logf(a);";
    case UnaryOp::kLog1p:
      return "return log1pf(a);";
    case UnaryOp::kReciprocal:
      return "return 1.f / a;";
    case UnaryOp::kErf:
      return "return erff(a);";
    // hardswish is a * hardsigmoid; std::max / std::min as aten's kernels call them: NaN in,
    // NaN out.
    case UnaryOp::kHardsigmoid:
    case UnaryOp::kHardswish:
      return absl::StrCat("const float t = a + 3.f, lo = t < 0.f ? 0.f : t;\n  return ",
                          p.op == UnaryOp::kHardswish ? "a * " : "",
                          "(6.f < lo ? 6.f : lo) * (1.f / 6.f);");
    case UnaryOp::kMish:
      return "return a * tanhf(log1pf(expf(a)));";
    case UnaryOp::kLeakyRelu:
      return absl::StrCat("return a > 0.f ? a : a * ", FloatLiteral(p.numbers.negative_slope),
                          ";");
    case UnaryOp::kClamp: {
      // aten compares in the tensor's type, its bounds rounded to it; NaN stays NaN.
      std::string body = "if (a != a) return a;\n";
      std::string v = "a";
      if (p.numbers.min) {
        absl::StrAppend(&body, "  const float lo = kf_to_float(kf_from_float<TO>(",
                        FloatLiteral(*p.numbers.min), "));\n");
        v = "fmaxf(a, lo)";
      }
      if (p.numbers.max) {
        absl::StrAppend(&body, "  const float hi = kf_to_float(kf_from_float<TO>(",
                        FloatLiteral(*p.numbers.max), "));\n");
        v = absl::StrCat("fminf(", v, ", hi)");
      }
      return absl::StrCat(body, "  return ", v, ";");
    }
    case UnaryOp::kElu: {
      // aten's coefficients, each rounded to float: alpha * scale, scale, input_scale.
      const OpNumbers& n = p.numbers;
      const float neg = static_cast<float>(n.alpha) * static_cast<float>(n.scale);
      return absl::StrCat("return a > 0.f ? a * ", FloatLiteral(static_cast<float>(n.scale)),
                          " : expm1f(a * ", FloatLiteral(static_cast<float>(n.input_scale)),
                          ") * ", FloatLiteral(neg), ";");
    }
    case UnaryOp::kSoftplus: {
      const std::string beta = FloatLiteral(p.numbers.beta);
      return absl::StrCat("return a * ", beta, " > ", FloatLiteral(p.numbers.threshold),
                          " ? a : log1pf(expf(a * ", beta, ")) / ", beta, ";");
    }
    case UnaryOp::kMaskedFill:
      // b is the mask (0 or 1); the value is rounded into the output's type by the store.
      return absl::StrCat("return b != 0.f ? ", FloatLiteral(p.numbers.value), " : a;");
    case UnaryOp::kWhere: {
      // a is the condition, b the tensor branch.
      const std::string value = FloatLiteral(p.numbers.value);
      return p.numbers.value_is_self ? absl::StrCat("return a != 0.f ? ", value, " : b;")
                                     : absl::StrCat("return a != 0.f ? b : ", value, ";");
    }
    case UnaryOp::kPow:
      // aten's CUDA pow by a number: squares, cubes and (reciprocal) roots exactly so, the
      // rest through powf.
      if (p.exponent == 2) return "return a * a;";
      if (p.exponent == 3) return "return a * a * a;";
      if (p.exponent == 0.5) return "return sqrtf(a);";
      if (p.exponent == -0.5) return "return rsqrtf(a);";
      if (p.exponent == -1) return "return 1.f / a;";
      if (p.exponent == -2) return "return 1.f / (a * a);";
      return absl::StrCat("return powf(a, ", FloatLiteral(p.exponent), ");");
    case UnaryOp::kTo:
      // The conversion is the engine's: exact to float on load, rounded to nearest even into
      // TO on store, as aten converts.
      return "return a;";
    case UnaryOp::kAdd:
    case UnaryOp::kSub: {
      const char* sign = p.op == UnaryOp::kAdd ? " + " : " - ";
      if (p.alpha == 1.0) return absl::StrCat("return a", sign, other, ";");
      return absl::StrCat("return a", sign, FloatLiteral(p.alpha), " * ", other, ";");
    }
    case UnaryOp::kRsub:  // other - alpha * self
      if (p.alpha == 1.0) return absl::StrCat("return ", other, " - a;");
      return absl::StrCat("return ", other, " - ", FloatLiteral(p.alpha), " * a;");
    case UnaryOp::kMul:
      return absl::StrCat("return a * ", other, ";");
    case UnaryOp::kDiv:
      // By a number aten multiplies by its float reciprocal; by a tensor it divides (IEEE).
      if (p.other_value) return absl::StrCat("return a * (1.f / ", other, ");");
      return "return a / b;";
  }
  return "return a;";
}

// Arithmetic of the precise math functions an op calls (no fast-math choice), per element.
double PreciseMathOps(UnaryOp op) {
  switch (op) {
    case UnaryOp::kLog: case UnaryOp::kLog1p: case UnaryOp::kErf: return 20;
    case UnaryOp::kElu: return 25;
    case UnaryOp::kSoftplus: return 40;
    case UnaryOp::kMish: return 60;
    default: return 0;
  }
}

bool HasTranscendental(UnaryOp op) {
  return op == UnaryOp::kGeluTanh || op == UnaryOp::kSilu || op == UnaryOp::kSigmoid ||
         op == UnaryOp::kTanh || op == UnaryOp::kExp;
}

// Whether the op (or a stage of the chain) calls exp, tanh or a division, which fast math
// replaces with intrinsics.
bool UsesFastMath(const ElementwiseProblem& p) {
  if (p.chain.empty()) return HasTranscendental(p.op);
  for (const PointwiseStage& stage : p.chain) {
    if (FastMathCalls(stage) > 0) return true;
  }
  return false;
}

class ElementwiseGenerator : public KernelGenerator {
 public:
  ElementwiseGenerator(const ElementwiseProblem& p, const GpuModel& gpu) : p_(p), gpu_(gpu) {
    std::vector<ParamDef> params = {
        {"threads", {"64", "128", "256", "512", "1024"}, "threads per block"},
        {"vec", {"1", "2", "4", "8"}, "elements per load/store (16 bytes at most)"},
        {"ilp", {"1", "2", "4"}, "vectors in flight per thread"},
        {"grid", {"oneshot", "stride"}, "one thread per vector group, or num_sms * occupancy blocks"},
    };
    if (UsesFastMath(p_)) {
      params.push_back({"fast_math", {"0", "1"}, "approximate exp and division (PTX .ftz)"});
    }
    if (p_.reuse_inner > 0) {
      params.push_back({"reuse", {"1", "2", "4", "8"},
                        "output rows per thread sharing one load of the broadcast input"});
    }
    if (HasOneElementInput()) {
      params.push_back({"scalar", {"once", "each"},
                        "read the one-element input once before the loop, or with each vector "
                        "after the other input's loads"});
    }
    if (HasReusedInput()) {
      params.push_back({"keep", {"0", "1"},
                        "load the broadcast input under L2 evict_last, kept for its next rows"});
    }
    params.push_back(OccupancyParam());
    space_ = ParamSpace(std::move(params));
  }

  const ParamSpace& Space() const override { return space_; }
  Config Canonicalize(const Config& c) const override { return c; }

  // The captured call baked into the kernel's captured entry, which the launcher takes for a
  // call of its shape key and alignment (the plan's `captured`, CapturedCall below):
  // KF_CAPTURED_SETUP is its path (kf_decide's on the captured tensors), and
  // kf_captured_offset<INPUT, I>(e) a broadcast input's offset with its groups' sizes as
  // constants (divisions become shifts or multiply-shifts). So the captured call needs no
  // setup and no barrier; other shapes take kf_elementwise, the generic path.
  std::string CapturedShapeSource(const Config& c) const {
    std::string src = kConstDivide;
    if (!HasCapturedPath()) {
      return src + R"(#define KF_CAPTURED_EXACT 0
#define KF_CAPTURED_ONE0 0
#define KF_CAPTURED_ONE1 0
#define KF_ONCE0 0
#define KF_ONCE1 0
template <int INPUT, typename I>
__device__ __forceinline__ I kf_captured_offset(I e) { return e; }
)";
    }
    const KfSetup path = kf_decide(p_.in_tensor[0], p_.in_tensor[p_.num_inputs - 1],
                                   p_.out_tensor, p_.num_inputs, c.GetInt("vec"), Reuse(c),
                                   /*aligned=*/true);
    absl::StrAppend(&src, kCapturedShapeBegin, "\n#define KF_CAPTURED_SETUP {", path.small,
                    ", ", path.path, ", ", path.mode0, ", ", path.mode1, ", ", path.row_input,
                    ", ", path.inner, "}\n#define KF_CAPTURED_EXACT ",
                    CapturedExact(c, path) ? 1 : 0,
                    "\n#define KF_CAPTURED_NUMEL ", p_.numel,
                    "\n#define KF_CAPTURED_ONE0 ", p_.in_numel[0] == 1 ? 1 : 0,
                    "\n#define KF_CAPTURED_ONE1 ", p_.in_numel[p_.num_inputs - 1] == 1 ? 1 : 0,
                    "\n#define KF_ONCE0 (KF_CAPTURED_ONE0 && KF_SCALAR_ONCE)",
                    "\n#define KF_ONCE1 (KF_CAPTURED_ONE1 && KF_SCALAR_ONCE)\n");
    src += "template <int INPUT, typename I>\n"
           "__device__ __forceinline__ I kf_captured_offset(I e) {\n  I offset = 0;\n";
    for (int i = 0; i < p_.num_inputs; ++i) {
      absl::StrAppend(&src, "  if (INPUT == ", i, ") {\n",
                      ConstGroupOffset(p_.in_groups[i], "    "), "  }\n");
    }
    absl::StrAppend(&src, "  return offset;\n}\n", kCapturedShapeEnd, "\n");
    return src;
  }

  // Whether the kernel has kf_elementwise_captured: not for a call of 64-bit indices.
  bool HasCapturedPath() const {
    return kf_call_fits_index32(p_.in_tensor[0], p_.in_tensor[p_.num_inputs - 1], p_.out_tensor);
  }

  // A one-shot grid of the captured call's vector path whose blocks tile it exactly.
  bool CapturedExact(const Config& c, const KfSetup& path) const {
    const int64_t per_block = int64_t{c.GetInt("threads")} * c.GetInt("vec") * c.GetInt("ilp");
    return path.path == KF_PATH_VEC &&
           OneShotTilesExactly(c.Get("grid") == "stride", p_.numel, per_block);
  }

  // The widest element a vector loads or stores.
  int MaxElementSize() const {
    int size = ElementSize(p_.out_dtype);
    for (int i = 0; i < p_.num_inputs; ++i) {
      if (!p_.device_scalar[i]) size = std::max(size, ElementSize(p_.in_dtype[i]));
    }
    return size;
  }

  std::string Check(const Config& c) const override {
    if (std::string why = CheckOccupancy(gpu_, c); !why.empty()) return why;
    if (c.GetInt("vec") * MaxElementSize() > 16) return "loads wider than 16 bytes";
    if (c.GetInt("vec") > 1 && !VectorPathRuns(c.GetInt("vec"))) {
      return absl::StrCat("vec ", c.GetInt("vec"), " would never run: the broadcast inputs "
                          "of this shape are read element by element");
    }
    if (Reuse(c) > 1) {
      if (c.GetInt("ilp") > 1) return "reuse and ilp both put several rows' vectors in flight";
      if (c.GetInt("vec") == 1 || p_.reuse_inner % c.GetInt("vec") != 0) {
        return "reuse runs on the vector path only, with vec dividing the row";
      }
    }
    return "";
  }

  // Every input flat, or broadcast along whole last-dim runs or constants (kf_mode).
  bool VectorPathRuns(int vec) const {
    for (int i = 0; i < p_.num_inputs; ++i) {
      if (kf_mode(p_.in_tensor[i], p_.out_tensor, vec) == KF_SCALAR_ONLY) return false;
    }
    return true;
  }

  int64_t SharedBytes(const Config&) const override { return 0; }

  int Reuse(const Config& c) const { return p_.reuse_inner > 0 ? c.GetInt("reuse") : 1; }

  // Some input is read more than once: a broadcast tensor (not a one-element device scalar).
  bool HasReusedInput() const {
    for (int i = 0; i < p_.num_inputs; ++i) {
      if (!p_.device_scalar[i] && p_.in_numel[i] < double(p_.numel)) return true;
    }
    return false;
  }

  // An input of one element (a device scalar) in a call of more: the captured path may read it
  // once (kf_run's `scalar`).
  bool HasOneElementInput() const {
    for (int i = 0; i < p_.num_inputs; ++i) {
      if (p_.in_numel[i] == 1 && p_.numel > 1) return true;
    }
    return false;
  }

  bool Keep(const Config& c) const { return HasReusedInput() && c.GetInt("keep") == 1; }

  // Registers the fast path holds per thread: a base plus the values in flight. kf_run keeps
  // KF_ILP vectors of floats per streamed input (one float for a one-element or constant-mode
  // input); kf_reuse_rows a row vector of floats and KF_REUSE raw vectors of the flat input, and
  // more indices (measured in the H200 sweeps of the mask add and the mul by a device scalar:
  // docs/benchmarks/2026-12-01-h200-shape-key-and-spills.md).
  int FastPathRegisters(const Config& c) const {
    const int vec = c.GetInt("vec"), reuse = Reuse(c);
    if (reuse > 1) {
      const int flat = p_.in_numel[0] < double(p_.numel) ? 1 : 0;
      return 40 + vec + reuse * (vec * ElementSize(p_.in_dtype[flat]) + 3) / 4;
    }
    int per_vector = 0;
    for (int i = 0; i < p_.num_inputs; ++i) {
      const bool one = p_.in_numel[i] == 1 ||
                       kf_mode(p_.in_tensor[i], p_.out_tensor, vec) == KF_CONST;
      per_vector += one ? 1 : vec;
    }
    return 24 + c.GetInt("ilp") * per_vector;
  }

  // Registers per thread, as occupancy leaves them.
  int Registers(const Config& c) const {
    return OccupancyRegisters(gpu_, c.GetInt("threads"), MinBlocksPerSm(gpu_, c),
                              FastPathRegisters(c));
  }

  double MinBytes() const override {
    double bytes = double(p_.numel) * ElementSize(p_.out_dtype);
    for (int i = 0; i < p_.num_inputs; ++i) bytes += p_.in_numel[i] * ElementSize(p_.in_dtype[i]);
    return bytes;
  }

  double EstimateSeconds(const Config& c) const override {
    const int threads = c.GetInt("threads"), vec = c.GetInt("vec"), ilp = c.GetInt("ilp");
    const int reuse = Reuse(c);
    const double n = std::max<int64_t>(1, p_.numel);
    const double per_block = double(threads) * vec * ilp * reuse;
    const double blocks = std::ceil(n / per_block);
    const int regs = Registers(c);
    const int per_sm = std::max(1, BlocksPerSm(gpu_, threads, 0, regs));
    const double grid = c.Get("grid") == "stride" ? std::min(blocks, double(gpu_.sm_count) * per_sm) : blocks;
    double in_flight = 0;
    for (int i = 0; i < p_.num_inputs; ++i) {
      in_flight += vec * ilp * (p_.in_numel[i] < n ? 1 : reuse) * ElementSize(p_.in_dtype[i]);
    }
    // Scalar code pays index math per element; broadcast offsets once per vector.
    double ops_per_elem = 4 + (vec == 1 ? 12 : vec == 2 ? 4 : 1) + p_.broadcast_index_ops / vec;
    const bool fast = c.GetInt("fast_math") == 1;
    if (p_.chain.empty()) {
      if (HasTranscendental(p_.op)) ops_per_elem += fast ? 6 : 22;
      if (p_.op == UnaryOp::kGeluErf) ops_per_elem += 12;
      ops_per_elem += PreciseMathOps(p_.op);
    }
    for (const PointwiseStage& stage : p_.chain) ops_per_elem += stage.math_ops;
    LaunchCost launch;
    launch.blocks = grid;
    launch.threads = threads;
    launch.registers = regs;
    launch.dram_bytes = MinBytes() * AccessWidthPenalty(vec * MaxElementSize());
    if (p_.reuse_inner > 0) {
      // Each broadcast input is re-read once per row group of `reuse` rows: from L2 while a
      // row group's streamed bytes leave it room, else from DRAM.
      double streamed_per_row = double(p_.reuse_inner) * ElementSize(p_.out_dtype), again = 0;
      for (int i = 0; i < p_.num_inputs; ++i) {
        streamed_per_row += double(p_.reuse_inner) * ElementSize(p_.in_dtype[i]);
        if (p_.in_numel[i] < n) {
          again += (n / reuse - p_.in_numel[i]) * ElementSize(p_.in_dtype[i]);
        }
      }
      if (streamed_per_row * reuse > double(gpu_.l2_bytes) / 4 && !Keep(c)) {
        launch.dram_bytes += again;
      } else {
        launch.l2_bytes += again;
      }
    }
    launch.bytes_in_flight_per_thread = in_flight;
    launch.ops = n * ops_per_elem;
    launch.block_latency_cycles = std::ceil(blocks / grid) * 700;
    return synth::EstimateLaunchSeconds(gpu_, launch) * SpillFactor(FastPathRegisters(c), regs);
  }

  absl::StatusOr<GeneratedKernel> Generate(const Config& c) const override {
    if (std::string why = Check(c); !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("config ", c.ToString(), ": ", why));
    }
    const int threads = c.GetInt("threads"), vec = c.GetInt("vec"), ilp = c.GetInt("ilp");
    const bool fast = c.GetInt("fast_math") == 1;
    std::string src = SourceHeader(absl::StrCat(p_.name, " elementwise"));
    src += DevicePreamble({.fast_math = fast});
    absl::StrAppend(&src, "\ntypedef ", CudaType(p_.in_dtype[0]), " T0;\ntypedef ",
                    CudaType(p_.in_dtype[p_.num_inputs > 1 ? 1 : 0]), " T1;\ntypedef ",
                    CudaType(p_.out_dtype), " TO;\n#define KF_THREADS ", threads,
                    "\n#define KF_VEC ", vec, "\n#define KF_ILP ", ilp, "\n#define KF_REUSE ",
                    Reuse(c), "\n#define KF_NIN ", p_.num_inputs, "\n#define KF_SCALAR_ONCE ",
                    HasOneElementInput() && c.Get("scalar") == "each" ? 0 : 1, "\n");
    // Loads of the non-float inputs, in this source only: a change to the shared preamble
    // would change every kernel, and every sweep's results belong to kernels.
    if (p_.device_scalar[0] || p_.device_scalar[1]) {
      // Converted as aten's CUDA kernels load it.
      src += "__device__ __forceinline__ float kf_to_float(double x) { return (float)x; }\n";
    }
    if (p_.in_dtype[0] == v1::BOOL || p_.in_dtype[1] == v1::BOOL) {
      src += "__device__ __forceinline__ float kf_to_float(unsigned char x) { return x; }\n";
    }
    if (Keep(c)) absl::StrAppend(&src, kL2CacheHints, kKeptLoads);
    if (p_.chain.empty()) {
      absl::StrAppend(&src, "__device__ __forceinline__ float kf_op(float a, float b) {\n  ",
                      OpBody(p_, fast), "\n}\n");
    } else {
      // The chain's stages in turn on the streamed value; the operand is b, or a where it is
      // the streamed input itself (`x * sigmoid(x)`).
      std::string steps;
      for (size_t i = 0; i < p_.chain.size(); ++i) {
        const PointwiseStage& stage = p_.chain[i];
        const std::string fn = absl::StrCat("kf_stage", i);
        src += StageFunction(stage, fn);
        const char* b = stage.operand == 0 ? "a" : stage.operand > 0 ? "b" : "0.f";
        absl::StrAppend(&steps, "  x = ", fn, "(", stage.value_is_b ? b : "x", ", ",
                        stage.value_is_b ? "x" : b, ");\n");
      }
      absl::StrAppend(&src, "__device__ __forceinline__ float kf_op(float a, float b) {\n",
                      "  float x = a;\n", steps, "  return x;\n}\n");
    }
    src += FastDivideSource();
    src += BroadcastGroupsSource();
    src += ElementwisePathSource();
    src += CapturedShapeSource(c);
    src += kEngine;
    PlanSpec plan;
    const std::string grid =
        FlatGrid(plan, threads * vec * ilp * Reuse(c), c.Get("grid") == "stride",
                 std::max(1, BlocksPerSm(gpu_, threads, 0, Registers(c))));
    plan.launches.push_back({"kf_elementwise", {grid, "1", "1"}, {threads, 1, 1}, "0", {}});
    plan.alignment_bytes = vec > 1 ? vec * MaxElementSize() : 0;
    plan.contiguous = p_.all_contiguous;
    if (HasCapturedPath()) {  // for the captured call with pointers aligned for its vectors
      plan.launches.back().captured_entry = "kf_elementwise_captured";
      plan.captured = CapturedCall{p_.shape_key, std::max(plan.alignment_bytes, 1)};
    }
    return GeneratedKernel{WithMinBlocksPerSm(std::move(src), MinBlocksPerSm(gpu_, c)),
                           PlanJson(plan)};
  }

 private:
  ElementwiseProblem p_;
  GpuModel gpu_;
  ParamSpace space_;
};

// aten::to.dtype(self, dtype, non_blocking, copy, memory_format) converting a CUDA tensor (a
// view too, read through its strides) between float types. With the dtype changed aten::to
// always returns a new tensor, as the kernel writes one, whatever `copy` says; non_blocking
// changes nothing on one device.
absl::Status CheckDtypeConversion(const TargetArgs& args) {
  const std::string& op = args.node().op();
  const std::string& overload = args.node().overload();
  if (!overload.empty() && overload != "dtype") {
    return absl::UnimplementedError(absl::StrCat(
        op, ".", overload, ": the elementwise family covers ", op,
        ".dtype only (a dtype conversion on the tensor's own device)"));
  }
  KF_ASSIGN_OR_RETURN(v1::DType dtype, args.ScalarType("dtype", 1));
  if (!IsFloatType(dtype)) {
    return absl::UnimplementedError(absl::StrCat(
        op, " to ", DTypeName(dtype), ": the family converts between float32, float16 and "
        "bfloat16 only"));
  }
  if (!args.IsNone("memory_format", 4)) {
    KF_ASSIGN_OR_RETURN(int64_t format, args.Int("memory_format", 4));
    // contiguous (0) and preserve (1) keep a contiguous input's layout; channels_last does not.
    if (format != 0 && format != 1) {
      return absl::UnimplementedError(absl::StrCat(
          op, ": memory_format=", format, " changes the layout; the family writes the "
          "output contiguous like its input (memory_format None, preserve or contiguous)"));
    }
  }
  KF_ASSIGN_OR_RETURN(int self, args.RequiredInput("self", 0));
  const v1::TensorSignature& in = args.input(self);
  KF_RETURN_IF_ERROR(RequireFloat(in, "self"));
  if (in.dtype() == dtype) {
    const bool copy = !args.IsNone("copy", 3) && args.Bool("copy", 3).value_or(false);
    return absl::UnimplementedError(absl::StrCat(
        op, ": self is already ", DTypeName(dtype), "; to(", DTypeName(dtype), ") ",
        copy ? "with copy=True is a plain copy, no conversion" : "returns self",
        ": nothing to compute"));
  }
  if (args.output(0).dtype() != dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": dtype=", DTypeName(dtype), " but the captured output is ",
        DTypeName(args.output(0).dtype()), "; re-capture the model"));
  }
  return absl::OkStatus();
}

// aten::type_as(self, other): a conversion to other's dtype (Gemma's `output.type_as(x)`);
// other is not read.
absl::StatusOr<v1::DType> TypeAsDtype(const TargetArgs& args) {
  std::optional<int> other = args.InputIndex("other", 1);
  if (!other.has_value() || args.IsChainedValue("other", 1)) {
    return absl::UnimplementedError(
        "type_as: 'other' is not a tensor input of the target; the family converts to the "
        "dtype of a tensor it does not otherwise read");
  }
  const v1::DType dtype = args.input(*other).dtype();
  if (!IsFloatType(dtype)) {
    return absl::UnimplementedError(absl::StrCat(
        "type_as ", DTypeName(dtype), ": the family converts between float32, float16 and "
        "bfloat16 only"));
  }
  return dtype;
}

// leaky_relu, clamp / clamp_min / clamp_max / hardtanh / relu6, elu and softplus: their
// numbers by schema name and position, aten's defaults where the capture has none.
absl::Status BindNumbers(const std::string& op, const TargetArgs& args, ElementwiseProblem& p) {
  OpNumbers& n = p.numbers;
  p.name = op;
  if (op == "leaky_relu") {
    p.op = UnaryOp::kLeakyRelu;
    KF_ASSIGN_OR_RETURN(n.negative_slope, args.FloatOr("negative_slope", 1, 0.01));
    return absl::OkStatus();
  }
  if (op == "elu") {
    p.op = UnaryOp::kElu;
    KF_ASSIGN_OR_RETURN(n.alpha, args.FloatOr("alpha", 1, 1));
    KF_ASSIGN_OR_RETURN(n.scale, args.FloatOr("scale", 2, 1));
    KF_ASSIGN_OR_RETURN(n.input_scale, args.FloatOr("input_scale", 3, 1));
    return absl::OkStatus();
  }
  if (op == "softplus") {
    p.op = UnaryOp::kSoftplus;
    KF_ASSIGN_OR_RETURN(n.beta, args.FloatOr("beta", 1, 1));
    KF_ASSIGN_OR_RETURN(n.threshold, args.FloatOr("threshold", 2, 20));
    return absl::OkStatus();
  }
  p.op = UnaryOp::kClamp;
  if (op == "relu6") {
    n.min = 0;
    n.max = 6;
    return absl::OkStatus();
  }
  if (op == "hardtanh") {
    KF_ASSIGN_OR_RETURN(n.min, args.FloatOr("min_val", 1, -1));
    KF_ASSIGN_OR_RETURN(n.max, args.FloatOr("max_val", 2, 1));
    return absl::OkStatus();
  }
  // clamp, clamp_min, clamp_max; their .Tensor overloads too when the capture recorded the
  // bounds as numbers (0-dim CPU tensors).
  const bool has_min = op != "clamp_max", has_max = op != "clamp_min";
  const int max_position = op == "clamp" ? 2 : 1;
  for (const auto& [name, position] :
       {std::pair<const char*, int>{"min", 1}, {"max", max_position}}) {
    if (args.InputIndex(name, position).has_value()) {
      return absl::UnimplementedError(absl::StrCat(
          op, ": the bound '", name, "' is a tensor on the device; the family clamps to numbers"));
    }
  }
  if (has_min && !args.IsNone("min", 1)) {
    KF_ASSIGN_OR_RETURN(n.min, args.Float("min", 1));
  }
  if (has_max && !args.IsNone("max", max_position)) {
    KF_ASSIGN_OR_RETURN(n.max, args.Float("max", max_position));
  }
  if (!n.min && !n.max) {
    return absl::InvalidArgumentError(absl::StrCat(op, " without a bound: nothing to compute"));
  }
  return absl::OkStatus();
}

// where(condition, self, other) with one branch a tensor and the other a number (.ScalarOther,
// .ScalarSelf, or .self with a traced Python number the capture recorded): the number goes
// into the kernel, whose inputs are the condition and the tensor branch.
absl::Status BindWhere(const TargetArgs& args, ElementwiseProblem& p) {
  const bool self_tensor = args.InputIndex("self", 1).has_value();
  const bool other_tensor = args.InputIndex("other", 2).has_value();
  if (self_tensor == other_tensor) {
    return absl::UnimplementedError(absl::StrCat(
        "where with ", self_tensor ? "two tensor branches" : "two number branches",
        ": the family covers one tensor branch and one number"));
  }
  p.op = UnaryOp::kWhere;
  p.num_inputs = 2;
  p.name = "where";
  p.numbers.value_is_self = other_tensor;
  KF_ASSIGN_OR_RETURN(p.numbers.value, other_tensor ? args.Float("self", 1)
                                                    : args.Float("other", 2));
  return absl::OkStatus();
}

// Integer ops per vector for the broadcast inputs' offsets: a division by a constant and a
// multiply-subtract (~4 ops) per merged group of each broadcast input (the captured shape's
// path, kf_captured_offset).
double BroadcastIndexOps(const ElementwiseProblem& p) {
  double ops = 0;
  for (int i = 0; i < p.num_inputs; ++i) {
    if (!kf_flat(p.in_tensor[i], p.out_tensor)) ops += 4.0 * p.in_groups[i].n;
  }
  return ops;
}

// kf_reuse_rows's form on the captured shapes (as kf_setup decides it per call): one input
// of the output's shape, the other spanning one output row (kf_row_span).
int64_t ReuseInner(const ElementwiseProblem& p) {
  if (p.num_inputs != 2) return 0;
  const bool flat0 = kf_flat(p.in_tensor[0], p.out_tensor);
  const bool flat1 = kf_flat(p.in_tensor[1], p.out_tensor);
  if (flat0 == flat1) return 0;
  // A span of one element is a scalar, read once per vector already (constant mode).
  const int64_t inner = kf_row_span(p.in_tensor[flat0 ? 1 : 0], p.out_tensor);
  return inner > 1 ? inner : 0;
}

// The arithmetic of node `args` (op: its name without "aten::" and any in-place "_"): every
// op of the family but `to`, whose conversion the engines do on load and store. Sets p.op,
// p.num_inputs (2 when a tensor operand joins self), p.name and the op's numbers.
absl::Status BindArithmetic(const TargetArgs& args, const std::string& op, ElementwiseProblem& p) {
  // The one-input ops without arguments.
  static const auto* const kPlainUnary = new std::map<std::string, UnaryOp>{
      {"relu", UnaryOp::kRelu}, {"silu", UnaryOp::kSilu},   {"sigmoid", UnaryOp::kSigmoid},
      {"tanh", UnaryOp::kTanh}, {"neg", UnaryOp::kNeg},     {"abs", UnaryOp::kAbs},
      {"exp", UnaryOp::kExp},   {"sqrt", UnaryOp::kSqrt},   {"rsqrt", UnaryOp::kRsqrt},
      {"sin", UnaryOp::kSin},   {"cos", UnaryOp::kCos},     {"log", UnaryOp::kLog},
      {"log1p", UnaryOp::kLog1p}, {"reciprocal", UnaryOp::kReciprocal},
      {"erf", UnaryOp::kErf},   {"hardsigmoid", UnaryOp::kHardsigmoid},
      {"hardswish", UnaryOp::kHardswish}, {"mish", UnaryOp::kMish}};
  // self (op) other, other a tensor or a number.
  static const auto* const kArithmetic = new std::map<std::string, UnaryOp>{
      {"add", UnaryOp::kAdd}, {"sub", UnaryOp::kSub}, {"rsub", UnaryOp::kRsub},
      {"mul", UnaryOp::kMul}, {"div", UnaryOp::kDiv}};
  if (auto plain = kPlainUnary->find(op); plain != kPlainUnary->end()) {
    p.op = plain->second;
  } else if (op == "gelu") {
    std::string approximate = "none";
    if (!args.IsNone("approximate", 1)) {
      KF_ASSIGN_OR_RETURN(approximate, args.String("approximate", 1));
    }
    if (approximate == "none") {
      p.op = UnaryOp::kGeluErf;
    } else if (approximate == "tanh") {
      p.op = UnaryOp::kGeluTanh;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("gelu: unknown approximate='", approximate, "'"));
    }
  } else if (op == "pow") {
    const std::string& overload = args.node().overload();
    if (overload != "Tensor_Scalar") {
      return absl::UnimplementedError(absl::StrCat(
          args.node().op(), ".", overload, ": the elementwise family covers "
          "pow.Tensor_Scalar only (a tensor to the power of a number)"));
    }
    KF_ASSIGN_OR_RETURN(p.exponent, args.Float("exponent", 1));
    p.op = UnaryOp::kPow;
    p.name = absl::StrCat("pow ", p.exponent);
  } else if (op == "leaky_relu" || op == "clamp" || op == "clamp_min" || op == "clamp_max" ||
             op == "hardtanh" || op == "relu6" || op == "elu" || op == "softplus") {
    KF_RETURN_IF_ERROR(BindNumbers(op, args, p));
  } else if (op == "masked_fill") {
    // .Scalar, or .Tensor with a value the capture recorded as a number (a 0-dim CPU tensor).
    if (args.InputIndex("value", 2).has_value()) {
      return absl::UnimplementedError(
          "masked_fill: the value is a tensor on the device; the family fills with a number");
    }
    KF_ASSIGN_OR_RETURN(p.numbers.value, args.Float("value", 2));
    p.op = UnaryOp::kMaskedFill;
    p.num_inputs = 2;
  } else if (op == "where") {
    KF_RETURN_IF_ERROR(BindWhere(args, p));
  } else if (auto arithmetic = kArithmetic->find(op); arithmetic != kArithmetic->end()) {
    // .Scalar (a scripted `x * 2.0`) computes as .Tensor with a traced number.
    const std::string& overload = args.node().overload();
    if (!overload.empty() && overload != "Tensor" && overload != "Scalar") {
      return absl::UnimplementedError(absl::StrCat(
          args.node().op(), ".", overload, ": the elementwise family covers ", op,
          ".Tensor and ", op, ".Scalar only"));
    }
    p.op = arithmetic->second;
    p.num_inputs = 2;
    if (p.op == UnaryOp::kAdd || p.op == UnaryOp::kSub || p.op == UnaryOp::kRsub) {
      KF_ASSIGN_OR_RETURN(p.alpha, args.FloatOr("alpha", 2, 1.0));
    }
    // `other` is a tensor where it is an input or, in a chain, the value it streams
    // (`weight * x`).
    const bool other_tensor =
        args.InputIndex("other", 1).has_value() || args.IsChainedValue("other", 1);
    if (!other_tensor && !args.IsNone("other", 1)) {
      KF_ASSIGN_OR_RETURN(double other, args.Float("other", 1));
      p.other_value = other;
      p.num_inputs = 1;
      p.name = absl::StrCat(op, " by ", other);
    }
  } else {
    return absl::UnimplementedError(absl::StrCat("elementwise family does not cover ", op));
  }
  return absl::OkStatus();
}

// The schema names of an op's two operands, a and b of its body (OpBody).
struct OperandNames {
  explicit OperandNames(const ElementwiseProblem& p) {
    if (p.op == UnaryOp::kMaskedFill) names[1] = "mask";
    if (p.op == UnaryOp::kWhere) {
      names[0] = "condition";
      names[1] = p.numbers.value_is_self ? "other" : "self";
    }
  }
  const char* operator[](int i) const { return names[i]; }
  const char* names[2] = {"self", "other"};
};

// Ops of the family that aten has no in-place form of.
constexpr std::string_view kNoInPlaceForm[] = {"aten::to", "aten::type_as", "aten::where",
                                               "aten::rsub", "aten::softplus", "aten::relu6"};

class ElementwiseFamily : public Family {
 public:
  std::string Name() const override { return "elementwise"; }
  std::vector<std::string> Ops() const override {
    std::vector<std::string> ops = {
        "aten::relu", "aten::gelu", "aten::silu", "aten::sigmoid", "aten::tanh",
        "aten::neg",  "aten::abs",  "aten::exp",  "aten::sqrt",    "aten::rsqrt",
        "aten::sin",  "aten::cos",  "aten::log",  "aten::log1p",   "aten::reciprocal",
        "aten::erf",  "aten::hardsigmoid", "aten::hardswish", "aten::mish",
        "aten::pow",  "aten::to",   "aten::type_as", "aten::leaky_relu", "aten::clamp",
        "aten::clamp_min",
        "aten::clamp_max", "aten::hardtanh", "aten::relu6", "aten::elu", "aten::softplus",
        "aten::add",  "aten::sub",  "aten::rsub", "aten::mul",  "aten::div",
        "aten::masked_fill", "aten::where"};
    // The in-place forms (relu_, add_, ...: `inplace=True` modules, `x += y`), where aten has
    // them: the same kernel, its output in self's memory (kf_run reads each element before
    // the same thread writes it).
    for (size_t i = 0, n = ops.size(); i < n; ++i) {
      const bool has_form = std::find(std::begin(kNoInPlaceForm), std::end(kNoInPlaceForm),
                                      ops[i]) == std::end(kNoInPlaceForm);
      if (has_form) ops.push_back(ops[i] + "_");
    }
    return ops;
  }

  absl::StatusOr<std::unique_ptr<KernelGenerator>> Bind(const v1::Target& target,
                                                        const GpuModel& gpu) const override {
    ElementwiseProblem p;
    if (target.nodes_size() > 1) {
      KF_RETURN_IF_ERROR(BindChain(target, p));
      return MakeGenerator(target, p, gpu);
    }
    KF_ASSIGN_OR_RETURN(TargetArgs args, TargetArgs::Create(target));
    std::string op = args.OpName();
    p.name = op;
    if (!op.empty() && op.back() == '_') {
      // In place: self (input 0, dense like every input here) is the output.
      if (AliasedInput(target, 0) != 0) {
        return absl::UnimplementedError(absl::StrCat(
            target.nodes(0).op(), ": its schema does not write the output into self, input 0 "
            "of the target; re-capture the model"));
      }
      op.pop_back();
      p.name = absl::StrCat(op, " in place");
    }
    if (op == "to") {
      KF_RETURN_IF_ERROR(CheckDtypeConversion(args));
      p.op = UnaryOp::kTo;
      p.name = absl::StrCat("to ", DTypeName(args.output(0).dtype()));
    } else if (op == "type_as") {
      KF_ASSIGN_OR_RETURN(const v1::DType dtype, TypeAsDtype(args));
      if (args.input(0).dtype() == dtype) {
        return absl::UnimplementedError(absl::StrCat(
            "type_as: self is already ", DTypeName(dtype), ": it returns self, nothing to "
            "compute"));
      }
      if (args.output(0).dtype() != dtype) {
        return absl::InvalidArgumentError("type_as: the captured output is not of other's "
                                          "dtype; re-capture the model");
      }
      p.op = UnaryOp::kTo;
      p.name = absl::StrCat("to ", DTypeName(dtype));
    } else {
      KF_RETURN_IF_ERROR(BindArithmetic(args, op, p));
    }
    const OperandNames names(p);
    for (int i = 0; i < p.num_inputs; ++i) {
      std::optional<int> index = args.InputIndex(names[i], i);
      if (!index.has_value()) {
        return absl::UnimplementedError(absl::StrCat(
            target.nodes(0).op(), ": '", names[i],
            "' is not a tensor input"));
      }
      if (*index != i) {
        return absl::UnimplementedError(absl::StrCat(
            target.nodes(0).op(), ": '", names[i], "' must be input ", i, " of the target"));
      }
      const bool mask = (p.op == UnaryOp::kMaskedFill && i == 1) ||
                        (p.op == UnaryOp::kWhere && i == 0);
      if (mask && args.input(i).dtype() != v1::BOOL) {
        return absl::InvalidArgumentError(absl::StrCat(op, ": the ", names[i], " has dtype ",
                                                       DTypeName(args.input(i).dtype()),
                                                       ", not bool"));
      }
    }
    return MakeGenerator(target, p, gpu);
  }

 private:
  // The inputs' signatures, broadcasts and paths, once the op (or chain) is bound.
  static absl::StatusOr<std::unique_ptr<KernelGenerator>> MakeGenerator(
      const v1::Target& target, ElementwiseProblem& p, const GpuModel& gpu) {
    const v1::TensorSignature& out = target.outputs(0);
    KF_RETURN_IF_ERROR(RequireFloat(out, "output"));
    p.out_dtype = out.dtype();
    p.numel = Numel(out);
    p.out_tensor = SignatureTensor(out);
    // Dense in some order, which the kernel writes in its memory order (kf_in_memory_order).
    if (!IsDenseInSomeOrder(out)) {
      return absl::UnimplementedError(absl::StrCat(
          "the output is not dense (sizes [", absl::StrJoin(out.sizes(), ","), "], strides [",
          absl::StrJoin(out.strides(), ","), "]); the family writes dense outputs"));
    }
    p.all_contiguous = IsContiguous(out);
    p.shape_key = CapturedShapeKey(target);
    const OperandNames names(p);
    for (int i = 0; i < p.num_inputs; ++i) {
      const v1::TensorSignature& in = target.inputs(i);
      p.device_scalar[i] = p.num_inputs == 2 && in.dtype() == v1::FLOAT64 && Numel(in) == 1;
      // A bool mask: masked_fill's, where's condition, or a chain's operand of that type.
      const bool mask = p.chain.empty() ? (p.op == UnaryOp::kMaskedFill && i == 1) ||
                                              (p.op == UnaryOp::kWhere && i == 0)
                                        : in.dtype() == v1::BOOL;
      // Any strides: a slice, a transposed or an expanded view is read through its groups.
      KF_RETURN_IF_ERROR(p.device_scalar[i] || mask ? RequireCuda(in, names[i])
                                                    : RequireFloat(in, names[i]));
      p.all_contiguous = p.all_contiguous && IsContiguous(in);
      if (in.sizes_size() > out.sizes_size()) {
        return absl::InvalidArgumentError(absl::StrCat(names[i], " has more dims than the output"));
      }
      const int shift = out.sizes_size() - in.sizes_size();
      for (int d = 0; d < in.sizes_size(); ++d) {
        const int64_t s = in.sizes(d), o = out.sizes(d + shift);
        if (s != o && s != 1) {
          return absl::InvalidArgumentError(absl::StrCat(names[i], " does not broadcast to the output"));
        }
      }
      p.in_dtype[i] = in.dtype();
      p.in_tensor[i] = SignatureTensor(in);
      p.in_numel[i] = 1;
      for (int d = 0; d < in.sizes_size(); ++d) {
        if (d >= in.strides_size() || in.strides(d) != 0) p.in_numel[i] *= double(in.sizes(d));
      }
    }
    // The kernel walks the output's memory: every tensor's dims in its order, as on the device.
    const KfCallTensors in_order =
        kf_in_memory_order(p.in_tensor[0], p.in_tensor[p.num_inputs - 1], p.out_tensor);
    p.in_tensor[0] = in_order.in0;
    p.in_tensor[p.num_inputs - 1] = in_order.in1;
    p.out_tensor = in_order.out;
    for (int i = 0; i < p.num_inputs; ++i) {
      kf_groups<kf_i64>(p.in_tensor[i], p.out_tensor, p.in_groups[i]);
    }
    p.broadcast_index_ops = BroadcastIndexOps(p);
    p.reuse_inner = ReuseInner(p);
    return std::unique_ptr<KernelGenerator>(std::make_unique<ElementwiseGenerator>(p, gpu));
  }

  // A chain of elementwise nodes as one kernel: its stages in turn on input 0, with at most
  // one tensor operand among them (input 1) beside input 0 itself, as the engine reads two
  // inputs.
  static absl::Status BindChain(const v1::Target& target, ElementwiseProblem& p) {
    v1::DType dtype = target.inputs_size() > 0 ? target.inputs(0).dtype() : v1::FLOAT32;
    std::vector<std::string> names;
    for (int i = 0; i < target.nodes_size(); ++i) {
      KF_ASSIGN_OR_RETURN(PointwiseStage stage, BindPointwiseStage(target, i, dtype));
      dtype = stage.value_dtype;
      if (stage.operand > 1) {
        return absl::UnimplementedError(absl::StrCat(
            "a chain of elementwise nodes whose ", stage.name, " reads input ", stage.operand,
            ": the family reads the streamed value and one operand (inputs 0 and 1)"));
      }
      names.push_back(stage.name);
      p.chain.push_back(std::move(stage));
    }
    p.num_inputs = target.inputs_size();
    if (p.num_inputs < 1 || p.num_inputs > 2) {
      return absl::UnimplementedError(absl::StrCat(
          "a chain of elementwise nodes with ", p.num_inputs,
          " tensor inputs; the family reads one or two"));
    }
    p.name = absl::StrJoin(names, " -> ");
    return absl::OkStatus();
  }
};

// Whether every value the op yields is >= 0 or NaN, whatever its input: a negative base to a
// power that is not an odd integer is NaN or a positive number.
bool YieldsNonNegative(const ElementwiseProblem& p) {
  switch (p.op) {
    case UnaryOp::kRelu:
    case UnaryOp::kAbs:
    case UnaryOp::kExp:
    case UnaryOp::kSqrt:
    case UnaryOp::kRsqrt:
    case UnaryOp::kSigmoid:
    case UnaryOp::kHardsigmoid:
      return true;
    case UnaryOp::kPow:
      return !(p.exponent == std::floor(p.exponent) && std::fmod(p.exponent, 2.0) != 0.0);
    case UnaryOp::kClamp:
      return p.numbers.min.has_value() && *p.numbers.min >= 0;
    default:
      return false;
  }
}

}  // namespace

absl::StatusOr<PointwiseStage> BindPointwiseStage(const v1::Target& target, int index,
                                                  v1::DType value_dtype) {
  KF_ASSIGN_OR_RETURN(TargetArgs args, TargetArgs::ForChainNode(target, index, -1));
  std::string op = args.OpName();
  // An in-place form inside a chain writes the chained value, which nothing else reads (the
  // capture joins no other): the same arithmetic.
  if (!op.empty() && op.back() == '_') op.pop_back();
  PointwiseStage stage;
  stage.value_dtype = value_dtype;
  if (op == "to" || op == "type_as") {
    if (!args.IsChainedValue("self", 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": self is not the chain's value; re-capture the model"));
    }
    if (op == "to") {
      KF_ASSIGN_OR_RETURN(stage.value_dtype, args.ScalarType("dtype", 1));
    } else {
      KF_ASSIGN_OR_RETURN(stage.value_dtype, TypeAsDtype(args));
    }
    if (!IsFloatType(stage.value_dtype)) {
      return absl::UnimplementedError(absl::StrCat(
          "to ", DTypeName(stage.value_dtype), " inside a chain: chains convert between "
          "float32, float16 and bfloat16 only"));
    }
    stage.name = absl::StrCat("to ", DTypeName(stage.value_dtype));
    stage.keeps_sign = true;
    // The engines convert on load and on the store, so a chain's last conversion is the
    // store's. One inside the chain rounds as eager's does: RMSNorm's `weight * h.to(bf16)`
    // multiplies the rounded h (the chains compute in float otherwise).
    const bool rounds = index + 1 < target.nodes_size() && stage.value_dtype != v1::FLOAT32;
    stage.body = rounds ? "return kf_to_float(kf_from_float<TO>(a));" : "return a;";
    return stage;
  }
  ElementwiseProblem p;
  p.name = op;
  KF_RETURN_IF_ERROR(BindArithmetic(args, op, p));
  const OperandNames names(p);
  int chained = -1;
  for (int i = 0; i < p.num_inputs; ++i) {
    if (args.IsChainedValue(names[i], i)) chained = i;
  }
  if (chained < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.node().op(), ": none of its operands is the value the chain streams (the previous "
        "node's output, or the chain's first input); re-capture the model"));
  }
  if (p.num_inputs == 2) {
    const int other = 1 - chained;
    std::optional<int> input = args.InputIndex(names[other], other);
    if (!input.has_value()) {
      return absl::UnimplementedError(absl::StrCat(
          args.node().op(), ": '", names[other], "' is neither a number nor a target input"));
    }
    stage.operand = *input;
    stage.value_is_b = chained == 1;
  }
  stage.name = p.name;
  stage.body = OpBody(p, /*fast=*/false);
  stage.math_ops = PreciseMathOps(p.op) + (HasTranscendental(p.op) ? 8 : 2);
  stage.non_negative = YieldsNonNegative(p);
  return stage;
}

std::unique_ptr<Family> MakeElementwiseFamily() { return std::make_unique<ElementwiseFamily>(); }

}  // namespace kforge::synth
