// Device preamble, literals and launch-plan JSON shared by every family.
#include "services/proposer/synth/kernel_source.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "nlohmann/json.hpp"
#include "services/proposer/synth/device_code.h"

namespace kforge::synth {

namespace {

constexpr char kCommon[] = R"(#include "kforge_device.h"

typedef long long kf_i64;
// Marks the functions of device/*.cuh, which the host compiles too (device_code.h).
#define KF_HD __device__ __forceinline__

__device__ __forceinline__ float kf_to_float(float x) { return x; }
__device__ __forceinline__ float kf_to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float kf_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T kf_from_float(float x);
template <> __device__ __forceinline__ float kf_from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half kf_from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 kf_from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// N elements moved as one load or store of N * sizeof(T) bytes.
template <typename T, int N> struct alignas(sizeof(T) * N) KfVec { T v[N]; };

__device__ __forceinline__ bool kf_aligned(const void* p, int bytes) {
  return (reinterpret_cast<unsigned long long>(p) % (unsigned long long)bytes) == 0;
}

// A vector's elements as floats, out[0, N).
template <typename T, int N>
__device__ __forceinline__ void kf_to_floats(const KfVec<T, N>& v, float* out) {
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = kf_to_float(v.v[i]);
}
// A bfloat16 is the high half of its float: a word's low element is w << 16, its high one
// w & 0xffff0000, one instruction each (the per-element conversion took two for the high one,
// a PRMT and a shift: the bfloat16 attention chain's statistics pass issued 98 instructions
// per 16 elements, 85 unpacked by words).
template <int N>
__device__ __forceinline__ void kf_to_floats(const KfVec<__nv_bfloat16, N>& v, float* out) {
  if constexpr (N % 2 == 0) {
    const unsigned* w = reinterpret_cast<const unsigned*>(v.v);
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      out[2 * i] = __uint_as_float(w[i] << 16);
      out[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = kf_to_float(v.v[i]);
  }
}

template <int V, typename T>
__device__ __forceinline__ void kf_load(const T* p, float (&out)[V]) {
  const KfVec<T, V> v = *reinterpret_cast<const KfVec<T, V>*>(p);  // one load, then unpacked
  kf_to_floats(v, out);
}

template <int V, typename T>
__device__ __forceinline__ void kf_store(T* p, const float (&in)[V]) {
  KfVec<T, V> v;
#pragma unroll
  for (int i = 0; i < V; ++i) v.v[i] = kf_from_float<T>(in[i]);
  *reinterpret_cast<KfVec<T, V>*>(p) = v;
}

__device__ __forceinline__ kf_i64 kf_ceil_div(kf_i64 a, kf_i64 b) { return (a + b - 1) / b; }

__device__ __forceinline__ unsigned kf_dynamic_smem_bytes() {
  unsigned bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
  return bytes;
}

// NaN-propagating max/min, as aten's amax/amin and max_pool2d.
__device__ __forceinline__ float kf_max_nan(float a, float b) { return (a > b || a != a) ? a : b; }
__device__ __forceinline__ float kf_min_nan(float a, float b) { return (a < b || a != a) ? a : b; }
)";

constexpr char kAccurate[] = R"(
#define KF_EXP(x) expf(x)
#define KF_LOG(x) logf(x)
#define KF_DIV(a, b) ((a) / (b))
#define KF_TANH(x) tanhf(x)
)";

// __expf and friends are a few ulp off; the search turns them off after a MISMATCH. They are
// the .ftz forms: NVRTC compiles without -ftz, and there __expf also takes a compare and two
// predicated multiplies (__logf and __fdividef a compare and one or two) to keep results and
// arguments below 2^-126 exact, which a float tolerance reads as 0 anyway (sm_90 SASS).
constexpr char kFast[] = R"(
__device__ __forceinline__ float kf_fast_exp(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
  return y;
}
__device__ __forceinline__ float kf_fast_log(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y * 0.6931471805599453f;
}
__device__ __forceinline__ float kf_fast_div(float a, float b) {
  float y;
  asm("div.approx.ftz.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}
#define KF_EXP(x) kf_fast_exp(x)
#define KF_LOG(x) kf_fast_log(x)
#define KF_DIV(a, b) kf_fast_div((a), (b))
__device__ __forceinline__ float kf_fast_tanh(float x) {
  const float e = kf_fast_exp(-2.0f * fabsf(x));
  return copysignf(kf_fast_div(1.0f - e, 1.0f + e), x);
}
#define KF_TANH(x) kf_fast_tanh(x)
)";

constexpr char kCluster[] = R"(
// sm_90 thread-block clusters through PTX: the rank of this block, a cluster-wide barrier
// (release/acquire, so shared memory written before it is visible to the cluster after it)
// and 32-bit loads from another block's shared memory.
__device__ __forceinline__ unsigned kf_cluster_rank() {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}
__device__ __forceinline__ void kf_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
               ::: "memory");
}
__device__ __forceinline__ unsigned kf_dsmem_u32(const void* local, unsigned rank) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(local));
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
  unsigned value;
  asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(value) : "r"(remote) : "memory");
  return value;
}
)";

}  // namespace

const char kProgrammaticLaunch[] = R"(
// Programmatic dependent launch: a kernel lets the plan's next launch be scheduled while it
// runs (kf_launch_dependents), and one launched with early_start waits for the launch before
// it to finish, its writes visible, before it reads them (kf_wait_previous).
__device__ __forceinline__ void kf_launch_dependents() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void kf_wait_previous() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
)";

// kf_l2_policy(keep) (an L2 evict_last or evict_first policy), kf_load_l2 and kf_store_l2 (one
// vector under it), kf_store_floats_l2 (V floats stored as one vector of T under it). Plain
// accesses before sm_80, which has no cache hints.
const char kL2CacheHints[] = R"(
__device__ __forceinline__ unsigned long long kf_l2_policy(bool keep) {
  unsigned long long policy = 0;
#if __CUDA_ARCH__ >= 800
  if (keep) {
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  } else {
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  }
#endif
  return policy;
}

// One access of 2, 4, 8 or 16 bytes with an L2 policy; wider vectors as 16-byte pieces, any
// other width (one-byte bools) plain.
template <typename T, int V>
__device__ __forceinline__ KfVec<T, V> kf_load_l2(const T* p, unsigned long long policy) {
  KfVec<T, V> v;
  constexpr int kBytes = (int)sizeof(T) * V;
#if __CUDA_ARCH__ >= 800
  unsigned* w = reinterpret_cast<unsigned*>(&v);
  const char* a = reinterpret_cast<const char*>(p);
  if constexpr (kBytes % 16 == 0) {
#pragma unroll
    for (int q = 0; q < kBytes / 16; ++q) {
      asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
          : "=r"(w[4 * q]), "=r"(w[4 * q + 1]), "=r"(w[4 * q + 2]), "=r"(w[4 * q + 3])
          : "l"(a + 16 * q), "l"(policy));
    }
  } else if constexpr (kBytes == 8) {
    asm("ld.global.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;"
        : "=r"(w[0]), "=r"(w[1]) : "l"(a), "l"(policy));
  } else if constexpr (kBytes == 4) {
    asm("ld.global.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(w[0]) : "l"(a), "l"(policy));
  } else if constexpr (kBytes == 2) {
    unsigned short h;
    asm("ld.global.L2::cache_hint.u16 %0, [%1], %2;" : "=h"(h) : "l"(a), "l"(policy));
    *reinterpret_cast<unsigned short*>(&v) = h;
  } else {
    v = *reinterpret_cast<const KfVec<T, V>*>(p);
  }
#else
  v = *reinterpret_cast<const KfVec<T, V>*>(p);
#endif
  return v;
}

template <typename T, int V>
__device__ __forceinline__ void kf_store_l2(T* p, const KfVec<T, V>& v,
                                            unsigned long long policy) {
  constexpr int kBytes = (int)sizeof(T) * V;
#if __CUDA_ARCH__ >= 800
  const unsigned* w = reinterpret_cast<const unsigned*>(&v);
  char* a = reinterpret_cast<char*>(p);
  if constexpr (kBytes % 16 == 0) {
#pragma unroll
    for (int q = 0; q < kBytes / 16; ++q) {
      asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;"
                   :: "l"(a + 16 * q), "r"(w[4 * q]), "r"(w[4 * q + 1]), "r"(w[4 * q + 2]),
                      "r"(w[4 * q + 3]), "l"(policy) : "memory");
    }
  } else if constexpr (kBytes == 8) {
    asm volatile("st.global.L2::cache_hint.v2.u32 [%0], {%1, %2}, %3;"
                 :: "l"(a), "r"(w[0]), "r"(w[1]), "l"(policy) : "memory");
  } else if constexpr (kBytes == 4) {
    asm volatile("st.global.L2::cache_hint.u32 [%0], %1, %2;"
                 :: "l"(a), "r"(w[0]), "l"(policy) : "memory");
  } else if constexpr (kBytes == 2) {
    asm volatile("st.global.L2::cache_hint.u16 [%0], %1, %2;"
                 :: "l"(a), "h"(*reinterpret_cast<const unsigned short*>(&v)), "l"(policy)
                 : "memory");
  } else {
    *reinterpret_cast<KfVec<T, V>*>(p) = v;
  }
#else
  *reinterpret_cast<KfVec<T, V>*>(p) = v;
#endif
}

template <typename T, int V>
__device__ __forceinline__ void kf_store_floats_l2(T* p, const float (&in)[V],
                                                   unsigned long long policy) {
  KfVec<T, V> v;
#pragma unroll
  for (int i = 0; i < V; ++i) v.v[i] = kf_from_float<T>(in[i]);
  kf_store_l2<T, V>(p, v, policy);
}
)";

std::string DevicePreamble(const PreambleOptions& options) {
  std::string out = kCommon;
  out += options.fast_math ? kFast : kAccurate;
  if (options.clusters) out += kCluster;
  return out;
}

std::string FloatLiteral(double value) {
  if (std::isinf(value)) return value > 0 ? "(__int_as_float(0x7f800000))" : "(__int_as_float(0xff800000))";
  if (std::isnan(value)) return "(__int_as_float(0x7fc00000))";
  std::string text = absl::StrFormat("%.17g", value);
  return absl::StrCat("((float)", text, ")");
}

std::string CapturedArgsSource(const KfArgs& call) {
  auto tensor = [](const std::string& field, const std::string& data, const KfTensor& t) {
    std::vector<std::string> sizes, strides;
    for (int d = 0; d < KF_MAX_DIMS; ++d) {
      sizes.push_back(absl::StrCat(t.sizes[d], "ll"));
      strides.push_back(absl::StrCat(t.strides[d], "ll"));
    }
    return absl::StrCat("  args.", field, " = KfTensor{", data, ", ", t.numel, "ll, {",
                        absl::StrJoin(sizes, ", "), "}, {", absl::StrJoin(strides, ", "), "}, ",
                        t.ndim, ", ", t.dtype, "};\n");
  };
  std::string body;
  for (int i = 0; i < call.num_inputs; ++i) {
    const std::string data = absl::StrCat("captured.data[", i, "]");
    absl::StrAppend(&body, tensor(absl::StrCat("inputs[", i, "]"), data, call.inputs[i]),
                    "  args.data[", i, "] = ", data, ";\n");
  }
  for (int j = 0; j < call.num_outputs; ++j) {
    const std::string data = absl::StrCat("captured.data[KF_MAX_INPUTS + ", j, "]");
    absl::StrAppend(&body, tensor(absl::StrCat("outputs[", j, "]"), data, call.outputs[j]),
                    "  args.data[KF_MAX_INPUTS + ", j, "] = ", data, ";\n");
  }
  return absl::StrCat(
      kCapturedShapeBegin,
      "\n__device__ __forceinline__ void kf_captured_args(KfArgs& args, const KfCapturedArgs& "
      "captured) {\n",
      body,
      "  args.scratch = KfTensor{captured.data[KF_SCRATCH_SLOT], 0ll, {}, {}, 0, 0};\n"
      "  args.data[KF_SCRATCH_SLOT] = captured.data[KF_SCRATCH_SLOT];\n  args.num_inputs = ",
      call.num_inputs, ";\n  args.num_outputs = ", call.num_outputs,
      ";\n  args.num_int_args = 0;\n  args.num_float_args = 0;\n  args.shape_key = ",
      absl::StrFormat("0x%016xull", call.shape_key), ";\n}\n", kCapturedShapeEnd, "\n");
}

constexpr char kConstDivide[] = R"(
// e / D for a divisor known when the kernel is generated: a shift or a multiply-shift.
template <typename I, unsigned long long D>
__device__ __forceinline__ I kf_const_div(I e) {
  return sizeof(I) == 4 ? (I)((unsigned)e / (unsigned)D) : (I)((unsigned long long)e / D);
}
)";

std::string ConstGroupOffset(const KfGroups<kf_i64>& g, const std::string& indent) {
  std::string src;
  for (int k = 0; k < g.n; ++k) {
    absl::StrAppend(&src, indent, "{ const I q = kf_const_div<I, ", g.size[k],
                    "ull>(e); offset += (e - q * (I)", g.size[k], ") * (I)", g.stride[k],
                    "; e = q; }\n");
  }
  return src;
}

std::string SourceHeader(const std::string& what) {
  return absl::StrCat("// kforge synth: ", what, "\n");
}

std::string FlatGrid(PlanSpec& plan, int64_t per_block, bool stride, int blocks_per_sm) {
  plan.let.push_back({"N", "out0_numel"});
  plan.let.push_back({"BLOCKS", absl::StrCat("max(1, ceil_div(N, ", per_block, "))")});
  if (!stride) return "BLOCKS";
  plan.let.push_back({"GRID", absl::StrCat("min(BLOCKS, num_sms * ", blocks_per_sm, ")")});
  return "GRID";
}

bool OneShotTilesExactly(bool stride, int64_t numel, int64_t per_block) {
  return !stride && numel > 0 && per_block > 0 && numel % per_block == 0;
}

std::string WithMinBlocksPerSm(std::string source, int min_blocks) {
  if (min_blocks == 0) return source;
  return absl::StrReplaceAll(source, {{"__launch_bounds__(KF_THREADS)",
                                       absl::StrCat("__launch_bounds__(KF_THREADS, ", min_blocks,
                                                    ")")}});
}

std::string PlanJson(const PlanSpec& plan) {
  nlohmann::ordered_json json;
  nlohmann::ordered_json let = nlohmann::ordered_json::array();
  for (const auto& [name, expr] : plan.let) let.push_back({name, expr});
  json["let"] = let;
  json["scratch_bytes"] = plan.scratch_bytes;
  nlohmann::ordered_json launches = nlohmann::ordered_json::array();
  for (const PlanLaunch& launch : plan.launches) {
    nlohmann::ordered_json l;
    l["entry"] = launch.entry;
    l["grid"] = launch.grid;
    l["block"] = launch.block;
    l["shared_bytes"] = launch.shared_bytes;
    if (!launch.cluster.empty()) l["cluster"] = launch.cluster;
    if (launch.cooperative) l["cooperative"] = true;
    if (launch.early_start) l["early_start"] = true;
    if (!launch.captured_entry.empty()) l["captured_entry"] = launch.captured_entry;
    launches.push_back(l);
  }
  json["launches"] = launches;
  nlohmann::ordered_json requirements;
  requirements["contiguous"] = plan.contiguous;
  if (plan.alignment_bytes > 0) requirements["alignment_bytes"] = plan.alignment_bytes;
  if (!plan.multiple_of.empty()) {
    nlohmann::ordered_json multiples = nlohmann::ordered_json::array();
    for (const auto& [expr, multiple] : plan.multiple_of) multiples.push_back({expr, multiple});
    requirements["multiple_of"] = multiples;
  }
  json["requires"] = requirements;
  if (plan.captured) {
    json["captured"] = {{"shape_key", absl::StrFormat("0x%016x", plan.captured->shape_key)},
                        {"alignment_bytes", plan.captured->alignment_bytes}};
  }
  return json.dump(2);
}

std::string SizeProduct(int input, int first, int last) {
  if (first > last) return "1";
  std::string out;
  for (int d = first; d <= last; ++d) {
    if (!out.empty()) out += " * ";
    absl::StrAppend(&out, "in", input, "_size", d);
  }
  return out;
}

}  // namespace kforge::synth
