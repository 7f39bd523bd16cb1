// row_threads=32;rows_per_block=1;vec=4;cache=regs;reg_cache=16;split=1;split_mode=scratch;unroll=1;grid=stride
// kforge synth: pow 2 -> mean -> add -> rsqrt -> mul -> to bfloat16 -> mul rows
#include "kforge_device.h"

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

template <int V, typename T>
__device__ __forceinline__ void kf_load(const T* p, float (&out)[V]) {
  const KfVec<T, V> v = *reinterpret_cast<const KfVec<T, V>*>(p);
#pragma unroll
  for (int i = 0; i < V; ++i) out[i] = kf_to_float(v.v[i]);
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

#define KF_EXP(x) expf(x)
#define KF_LOG(x) logf(x)
#define KF_DIV(a, b) ((a) / (b))
#define KF_TANH(x) tanhf(x)

typedef float TI;
typedef __nv_bfloat16 TO;
typedef float TW;
typedef float TB;
#define KF_RT 32
#define KF_RPB 1
#define KF_BLOCK 32
#define KF_WARPS 1
#define KF_VEC 4
#define KF_CACHE 2
#define KF_CAP 16
#define KF_SPLIT 1
#define KF_CLUSTER 0
#define KF_UNROLL 1
#define KF_PASSES 1
#define KF_PER_ROW 0
#define KF_MIN_BLOCKS 1
#define KF_SPLIT_MIN_BLOCKS 1

__device__ __forceinline__ void kf_geometry(const KfArgs& args, kf_i64& rows, kf_i64& cols) {
  const KfTensor& x = args.inputs[0];
  rows = 1;
  cols = 1;
  for (int d = 0; d < x.ndim; ++d) (d < x.ndim - 1 ? rows : cols) *= x.sizes[d];
}
// Division by a divisor that many threads share, as a multiply and a shift: (umulhi(n, magic)
// + n) >> shift, exact for n and d below 2^31, a few instructions instead of the ~20 of an
// integer division. Computed once (per block or per row), applied per vector.
//
// Plain C++ marked KF_HD, embedded in kernel sources and compiled on the host for its test
// (device_code.h).

struct KfDivisor {
  unsigned magic;
  unsigned shift;
};

KF_HD unsigned kf_umulhi(unsigned a, unsigned b) {
#ifdef __CUDA_ARCH__
  return __umulhi(a, b);
#else
  return (unsigned)(((unsigned long long)a * b) >> 32);
#endif
}

// The divisor d, 1 <= d < 2^31: shift = ceil(log2 d), magic = 2^32 (2^shift - d) / d + 1.
KF_HD KfDivisor kf_divisor(unsigned long long d) {
  KfDivisor div;
#ifdef __CUDA_ARCH__
  div.shift = d > 1 ? 64u - (unsigned)__clzll((long long)(d - 1)) : 0u;
#else
  div.shift = d > 1 ? 64u - (unsigned)__builtin_clzll(d - 1) : 0u;
#endif
  div.magic = (unsigned)((((1ull << div.shift) - d) << 32) / d + 1);
  return div;
}

// n / d for 0 <= n < 2^31.
KF_HD unsigned kf_divide(unsigned n, KfDivisor div) {
  return (kf_umulhi(n, div.magic) + n) >> div.shift;
}

// The chain's elementwise nodes around its anchor (pointwise_chain.h).
__device__ __forceinline__ float kf_to_float(double x) { return (float)x; }
struct KfChain {
  const double* p0;
  const float* p1;
  kf_i64 base1;
  const __nv_bfloat16* p2;
  kf_i64 base2;
};
__device__ __forceinline__ void kf_chain_init(KfChain& ch, const KfArgs& args, kf_i64 row, kf_i64 cols) {
  ch.p0 = reinterpret_cast<const double*>(args.data[1]);
  ch.p1 = reinterpret_cast<const float*>(args.data[0]);
  ch.base1 = row * cols;
  ch.p2 = reinterpret_cast<const __nv_bfloat16*>(args.data[2]);
  ch.base2 = (row * cols) % args.inputs[2].numel;
}
// pow 2
__device__ __forceinline__ float kf_pro0(float a, float b) {
  return a * a;
}
template <int V> struct KfProOperands {
  char none;
};
template <int V>
__device__ __forceinline__ void kf_prologue_load(const KfChain& ch, kf_i64 c, KfProOperands<V>& o) {
}
template <int V>
__device__ __forceinline__ void kf_prologue_apply(const KfProOperands<V>& o, float (&v)[V]) {
#pragma unroll
  for (int i = 0; i < V; ++i) {
    float x = v[i];
    x = kf_pro0(x, 0.f);
    v[i] = x;
  }
}
// add
__device__ __forceinline__ float kf_epi0(float a, float b) {
  return a + b;
}
// rsqrt
__device__ __forceinline__ float kf_epi1(float a, float b) {
  return rsqrtf(a);
}
// mul
__device__ __forceinline__ float kf_epi2(float a, float b) {
  return a * b;
}
// to bfloat16
__device__ __forceinline__ float kf_epi3(float a, float b) {
  typedef __nv_bfloat16 TO;
  return kf_to_float(kf_from_float<TO>(a));
}
// mul
__device__ __forceinline__ float kf_epi4(float a, float b) {
  return a * b;
}
template <int V> struct KfEpiOperands {
  float v0;
  float v1[V];
  float v2[V];
};
template <int V>
__device__ __forceinline__ void kf_epilogue_load(const KfChain& ch, kf_i64 c, KfEpiOperands<V>& o) {
  o.v0 = kf_to_float(ch.p0[0]);
  kf_load<V>(ch.p1 + ch.base1 + c, o.v1);
  kf_load<V>(ch.p2 + ch.base2 + c, o.v2);
}
template <int V>
__device__ __forceinline__ void kf_epilogue_apply(const KfEpiOperands<V>& o, float (&v)[V]) {
#pragma unroll
  for (int i = 0; i < V; ++i) {
    float x = v[i];
    x = kf_epi0(x, o.v0);
    x = kf_epi1(x, 0.f);
    x = kf_epi2(o.v1[i], x);
    x = kf_epi3(x, 0.f);
    x = kf_epi4(o.v2[i], x);
    v[i] = x;
  }
}
template <int V>
__device__ __forceinline__ void kf_epilogue_load_from_row(const float (&r)[V], KfEpiOperands<V>& o) {
#pragma unroll
  for (int i = 0; i < V; ++i) o.v1[i] = r[i];
}

struct KfRowCtx {
  kf_i64 row;
  kf_i64 cols;
  float a;
  float b;
  const TW* w;
  const TB* bias;
  kf_i64 c_first;
  kf_i64 hw;
  KfDivisor hw_divisor;
  bool div32;
  double inv_hw;
  KfChain chain;
};
__device__ __forceinline__ void kf_init_ctx(KfRowCtx& ctx, const KfArgs& args, kf_i64 row,
                                            kf_i64 cols) {
  ctx.row = row;
  ctx.cols = cols;
  ctx.a = 0.f;
  ctx.b = 0.f;
  ctx.w = nullptr;
  ctx.bias = nullptr;
  ctx.c_first = 0;
  ctx.hw = 1;
  ctx.hw_divisor = kf_divisor(1);
  ctx.div32 = false;
  ctx.inv_hw = 1.0;
  kf_chain_init(ctx.chain, args, ctx.row, ctx.cols);
}

// fp64 accumulation: the sum of a long row of values that nearly cancel keeps its low
// digits (an fp32 sum, even Kahan-compensated, can miss the validation's tolerance there),
// and a memory-bound reduction has DADD throughput to spare.
struct KfStat { double s; };
__device__ __forceinline__ KfStat kf_reduce_identity() { return {0.0}; }
__device__ __forceinline__ void kf_reduce_add(KfStat& st, float x, kf_i64 index) {
  st.s += (double)x;
}
__device__ __forceinline__ KfStat kf_reduce_merge(const KfStat& a, const KfStat& b) {
  return {a.s + b.s};
}

__device__ __forceinline__ void kf_reduce_store(TO* out, kf_i64 index, const KfStat& s,
                                                kf_i64 count) {
  out[index] = kf_from_float<TO>((float)(s.s * (1.0 / (double)count)));
}

template <int P> __device__ __forceinline__ KfStat kf_identity() { return kf_reduce_identity(); }
template <int P, int V>
__device__ __forceinline__ void kf_op_add(KfStat& st, const float (&v)[V], kf_i64 col,
                                       const KfRowCtx& ctx) {
#pragma unroll
  for (int i = 0; i < V; ++i) kf_reduce_add(st, v[i], col + i);
}
template <int P> __device__ __forceinline__ KfStat kf_merge(const KfStat& a, const KfStat& b) {
  return kf_reduce_merge(a, b);
}
// The row's value broadcast back: every element of the output pass is it, before the
// chain's epilogue.
template <int P> __device__ __forceinline__ void kf_finish(const KfStat& s, KfRowCtx& ctx) {
  const kf_i64 count = ctx.cols;
  ctx.a = (float)(s.s * (1.0 / (double)count));
}
__device__ __forceinline__ float kf_out(float, kf_i64, const KfRowCtx& ctx) { return ctx.a; }
template <int V> struct KfOpOutParams {};
template <int V>
__device__ __forceinline__ void kf_op_out_params(kf_i64, const KfRowCtx&, KfOpOutParams<V>&) {}
template <int V>
__device__ __forceinline__ void kf_op_out_vec(const float (&v)[V], kf_i64 c, const KfOpOutParams<V>&,
                                           const KfRowCtx& ctx, float (&o)[V]) {
#pragma unroll
  for (int i = 0; i < V; ++i) o[i] = kf_out(v[i], c + i, ctx);
}

template <int V> struct KfOutParams {
  KfOpOutParams<V> op;
  KfProOperands<V> pro;
  KfEpiOperands<V> epi;
};
template <int V>
__device__ __forceinline__ void kf_out_params(kf_i64 c, const KfRowCtx& ctx, KfOutParams<V>& p) {
  kf_op_out_params<V>(c, ctx, p.op);
  kf_prologue_load<V>(ctx.chain, c, p.pro);
  kf_epilogue_load<V>(ctx.chain, c, p.epi);
}
template <int V>
__device__ __forceinline__ void kf_out_vec(const float (&v)[V], kf_i64 c, const KfOutParams<V>& p,
                                           const KfRowCtx& ctx, float (&o)[V]) {
  float u[V];
#pragma unroll
  for (int i = 0; i < V; ++i) u[i] = v[i];
  kf_prologue_apply<V>(p.pro, u);
  kf_op_out_vec<V>(u, c, p.op, ctx, o);
  // v holds the row as read: the epilogue's operands that are the row input.
  KfEpiOperands<V> epi = p.epi;
  kf_epilogue_load_from_row<V>(v, epi);
  kf_epilogue_apply<V>(epi, o);
}
template <int P, int V>
__device__ __forceinline__ void kf_add(KfStat& st, const float (&v)[V], kf_i64 col,
                                       const KfRowCtx& ctx) {
  KfProOperands<V> pro;
  kf_prologue_load<V>(ctx.chain, col, pro);
  float u[V];
#pragma unroll
  for (int i = 0; i < V; ++i) u[i] = v[i];
  kf_prologue_apply<V>(pro, u);
  kf_op_add<P, V>(st, u, col, ctx);
}

template <typename T, int V>
__device__ __forceinline__ void kf_store_vec(T* p, const float (&in)[V]) {
  KfVec<T, V> v;
#pragma unroll
  for (int i = 0; i < V; ++i) v.v[i] = kf_from_float<T>(in[i]);
  constexpr int kBytes = (int)sizeof(T) * V;
  const unsigned* w = reinterpret_cast<const unsigned*>(&v);
  char* a = reinterpret_cast<char*>(p);
  if constexpr (kBytes % 16 == 0) {
#pragma unroll
    for (int q = 0; q < kBytes / 16; ++q) {
      asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};"
                   :: "l"(a + 16 * q), "r"(w[4 * q]), "r"(w[4 * q + 1]), "r"(w[4 * q + 2]),
                      "r"(w[4 * q + 3]) : "memory");
    }
  } else if constexpr (kBytes == 8) {
    asm volatile("st.global.v2.u32 [%0], {%1, %2};" :: "l"(a), "r"(w[0]), "r"(w[1]) : "memory");
  } else {
    *reinterpret_cast<KfVec<T, V>*>(p) = v;
  }
}

// Exchanges a KfStat between lanes word by word.
__device__ __forceinline__ KfStat kf_shfl_xor(const KfStat& s, int mask) {
  KfStat r;
  const unsigned* src = reinterpret_cast<const unsigned*>(&s);
  unsigned* dst = reinterpret_cast<unsigned*>(&r);
#pragma unroll
  for (int i = 0; i < (int)(sizeof(KfStat) / 4); ++i) {
    dst[i] = __shfl_xor_sync(0xffffffffu, src[i], mask);
  }
  return r;
}

// Folds the KF_RT threads of a row together. Every lane merges in lane order, so all
// lanes end with the same bits (the row's output never depends on which lane computes it).
template <int P>
__device__ __forceinline__ KfStat kf_reduce_row(KfStat s, int lane, int rib,
                                                KfStat (*red)[KF_WARPS]) {
#pragma unroll
  for (int m = 1; m < (KF_RT < 32 ? KF_RT : 32); m <<= 1) {
    const KfStat o = kf_shfl_xor(s, m);
    s = (lane & m) ? kf_merge<P>(o, s) : kf_merge<P>(s, o);
  }
#if KF_RT > 32
  if ((lane & 31) == 0) red[rib][lane / 32] = s;
  __syncthreads();
  s = red[rib][0];
#pragma unroll
  for (int w = 1; w < KF_WARPS; ++w) s = kf_merge<P>(s, red[rib][w]);
  __syncthreads();
#endif
  return s;
}

#if KF_CLUSTER
// Folds the row's partial statistics of the KF_SPLIT blocks of the cluster, in rank order,
// through distributed shared memory.
template <int P>
__device__ __forceinline__ KfStat kf_reduce_cluster(KfStat s, int lane, int rib, KfStat* part) {
  if (lane == 0) part[rib] = s;
  kf_cluster_sync();
  KfStat r = kf_identity<P>();
#pragma unroll
  for (int q = 0; q < KF_SPLIT; ++q) {
    KfStat o;
    unsigned* words = reinterpret_cast<unsigned*>(&o);
#pragma unroll
    for (int i = 0; i < (int)(sizeof(KfStat) / 4); ++i) {
      words[i] = kf_dsmem_u32(reinterpret_cast<const unsigned*>(&part[rib]) + i, q);
    }
    r = kf_merge<P>(r, o);
  }
  kf_cluster_sync();
  return r;
}
#endif

// Visits this thread's vectors of [c0, c1): fully unrolled over the register cache slots
// when the row fits it (`slots`), else a loop unrolled KF_UNROLL times. Each vector is loaded
// into an L through `load` first, and all loads of the slots (or of a step's KF_UNROLL
// vectors) are issued before `f(c, slot, l)` sees any: a load followed at once by the work on
// it waits out its latency before the next is issued (pass 0 ran at two thirds of the DRAM
// bandwidth so; the register cache's slots, each load in a branch of its own followed by its
// work, went to DRAM one after another: sm_90 SASS, 2026-12-05), and the compiler may not move
// a load above a store through a pointer that could alias it.
template <int V, typename L, typename R, typename F>
__device__ __forceinline__ void kf_for_each_read(kf_i64 c0, kf_i64 c1, int lane, bool slots,
                                                 R&& load, F&& f) {
  if (slots) {
    L l[KF_CAP / V > 0 ? KF_CAP / V : 1];  // no slots (and never `slots`) without the cache
#pragma unroll
    for (int k = 0; k < KF_CAP / V; ++k) {
      const kf_i64 c = c0 + ((kf_i64)k * KF_RT + lane) * V;
      if (c < c1) load(c, k, l[k]);
    }
#pragma unroll
    for (int k = 0; k < KF_CAP / V; ++k) {
      const kf_i64 c = c0 + ((kf_i64)k * KF_RT + lane) * V;
      if (c < c1) f(c, k, l[k]);
    }
  } else {
    for (kf_i64 base = c0 + (kf_i64)lane * V; base < c1; base += (kf_i64)KF_RT * V * KF_UNROLL) {
      L l[KF_UNROLL];
#pragma unroll
      for (int u = 0; u < KF_UNROLL; ++u) {
        const kf_i64 c = base + (kf_i64)u * KF_RT * V;
        if (c < c1) load(c, 0, l[u]);
      }
#pragma unroll
      for (int u = 0; u < KF_UNROLL; ++u) {
        const kf_i64 c = base + (kf_i64)u * KF_RT * V;
        if (c < c1) f(c, 0, l[u]);
      }
    }
  }
}

// Pass 0: kf_for_each_read of the raw vectors of row xr.
template <int V, typename F>
__device__ __forceinline__ void kf_for_each(const TI* xr, kf_i64 c0, kf_i64 c1, int lane,
                                            bool slots, F&& f) {
  kf_for_each_read<V, KfVec<TI, V>>(
      c0, c1, lane, slots,
      [&](kf_i64 c, int, KfVec<TI, V>& raw) {
        raw = *reinterpret_cast<const KfVec<TI, V>*>(xr + c);
      },
      f);
}

template <int V> struct KfVals { float v[V]; };

// A vector of the output pass: its inputs and the output hook's per-column parameters, both
// loaded before any store of the step (kf_for_each_read).
template <int V> struct KfOutVals {
  float v[V];
  KfOutParams<V> p;
};

// The output pass over columns [c0, c1) of a row: each vector read back through `read`, its
// per-column parameters through `params`, normalized by kf_out_vec and stored.
template <int V, typename R, typename Q>
__device__ __forceinline__ void kf_write_chunk(const KfArgs& args, kf_i64 row, bool valid,
                                               kf_i64 cols, kf_i64 c0, kf_i64 c1, int lane,
                                               bool slots, R&& read, Q&& params,
                                               const KfRowCtx& ctx) {
  TO* yr = reinterpret_cast<TO*>(args.outputs[0].data) + (valid ? row * cols : 0);
  kf_for_each_read<V, KfOutVals<V>>(
      c0, c1, lane, slots,
      [&](kf_i64 c, int k, KfOutVals<V>& l) {
        read(c, k, l.v);
        params(c, k, l.p);
      },
      [&](kf_i64 c, int, const KfOutVals<V>& l) {
        float o[V];
        kf_out_vec<V>(l.v, c, l.p, ctx, o);
        kf_store_vec<TO, V>(yr + c, o);
      });
}

// One row (or, split, one chunk of it: chunk number `part_index`). PHASE 0: whole row in one
// launch (maybe a cluster); 1: partial statistics of a chunk to scratch; 2: merge partials
// and write the chunk.
template <int V, int PHASE>
__device__ __forceinline__ void kf_row(const KfArgs& args, kf_i64 row, bool valid, kf_i64 cols,
                                       kf_i64 c0, kf_i64 c1, kf_i64 chunk, int part_index,
                                       int lane, int rib, KfStat (*red)[KF_WARPS],
                                       KfStat* part) {
  const TI* xr = reinterpret_cast<const TI*>(args.inputs[0].data) + (valid ? row * cols : 0);
  const kf_i64 e1 = valid ? c1 : c0;
  KfRowCtx ctx;
  kf_init_ctx(ctx, args, row, cols);
#if KF_CACHE == 2
  float cache[KF_CAP];
  // The output pass's per-column parameters, loaded in pass 0 beside the vectors they go
  // with: after the row's reduction the pass only computes and stores, where loading them
  // there put a round trip to L2 behind the reduction's barrier (a written-out RMSNorm's
  // weight: 512 columns, launch-bound, 0.9 us behind Inductor's kernel; H200, 2026-12-05).
  KfOutParams<V> pre[KF_CAP / V] = {};
  const bool use_regs = PHASE == 0 && (c1 - c0) <= (kf_i64)KF_RT * KF_CAP;
#else
  const bool use_regs = false;
#endif
#if KF_CACHE == 1
  extern __shared__ __align__(16) unsigned char kf_dsmem[];
  TI* srow = reinterpret_cast<TI*>(kf_dsmem) + (kf_i64)rib * chunk;
  const bool use_smem =
      (kf_i64)KF_RPB * chunk * (kf_i64)sizeof(TI) <= (kf_i64)kf_dynamic_smem_bytes();
#endif
  // Reads back what pass 0 read: from registers, shared memory or global memory.
  auto read = [&](kf_i64 c, int k, float (&v)[V]) {
#if KF_CACHE == 2
    if (use_regs) {
#pragma unroll
      for (int i = 0; i < V; ++i) v[i] = cache[k * V + i];
      return;
    }
#endif
#if KF_CACHE == 1
    if (use_smem) {
      kf_load<V>(srow + (c - c0), v);
      return;
    }
#endif
    kf_load<V>(xr + c, v);
  };
  auto params = [&](kf_i64 c, int k, KfOutParams<V>& p) {
#if KF_CACHE == 2
    if (use_regs) {
      p = pre[k];
      return;
    }
#endif
    kf_out_params<V>(c, ctx, p);
  };

  KfStat s = kf_identity<0>();
  KfStat* partials = reinterpret_cast<KfStat*>(args.scratch.data) + (valid ? row * KF_SPLIT : 0);
  if (PHASE == 2) {
    // The row's lanes load the partials in parallel and fold them like any row statistic
    // (fixed order, so every block of the row gets the same bits): a handful of loads per
    // thread instead of KF_SPLIT serial merges in every thread.
    if (valid) {
      for (int q = lane; q < KF_SPLIT; q += KF_RT) s = kf_merge<0>(s, partials[q]);
    }
    s = kf_reduce_row<0>(s, lane, rib, red);
  } else {
    kf_for_each<V>(xr, c0, e1, lane, use_regs, [&](kf_i64 c, int k, const KfVec<TI, V>& raw) {
      float v[V];
#pragma unroll
      for (int i = 0; i < V; ++i) v[i] = kf_to_float(raw.v[i]);
#if KF_CACHE == 2
      if (use_regs) {
#pragma unroll
        for (int i = 0; i < V; ++i) cache[k * V + i] = v[i];
        kf_out_params<V>(c, ctx, pre[k]);
      }
#endif
#if KF_CACHE == 1
      if (use_smem) *reinterpret_cast<KfVec<TI, V>*>(srow + (c - c0)) = raw;
#endif
      kf_add<0, V>(s, v, c, ctx);
    });
    s = kf_reduce_row<0>(s, lane, rib, red);
    if (PHASE == 1) {
      if (valid && lane == 0) partials[part_index] = s;
      return;
    }
#if KF_CLUSTER
    s = kf_reduce_cluster<0>(s, lane, rib, part);
#endif
  }
  kf_finish<0>(s, ctx);
#if KF_PASSES == 2
  KfStat t = kf_identity<1>();
  kf_for_each_read<V, KfVals<V>>(
      c0, e1, lane, use_regs, [&](kf_i64 c, int k, KfVals<V>& l) { read(c, k, l.v); },
      [&](kf_i64 c, int, const KfVals<V>& l) { kf_add<1, V>(t, l.v, c, ctx); });
  t = kf_reduce_row<1>(t, lane, rib, red);
#if KF_CLUSTER
  t = kf_reduce_cluster<1>(t, lane, rib, part);
#endif
  kf_finish<1>(t, ctx);
#endif
#if KF_PER_ROW
  if (valid && lane == 0 && part_index == 0) kf_write_row(s, ctx, args);
#else
  kf_write_chunk<V>(args, row, valid, cols, c0, e1, lane, use_regs, read, params, ctx);
#endif
}

template <int PHASE>
__device__ __forceinline__ void kf_rows_body(const KfArgs& args) {
  __shared__ KfStat red[KF_RPB][KF_WARPS];
#if KF_CLUSTER
  __shared__ KfStat part[KF_RPB];
#else
  KfStat* part = nullptr;
#endif
  kf_i64 rows, cols;
  kf_geometry(args, rows, cols);
  const int lane = threadIdx.x % KF_RT;
  const int rib = threadIdx.x / KF_RT;
  // The finishing launch of a split row walks the blocks in reverse: the chunks the partial
  // launch read last are the ones still in L2, so its re-reads start with hits.
  const unsigned bx = PHASE == 2 ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const unsigned by = PHASE == 2 ? gridDim.y - 1 - blockIdx.y : blockIdx.y;
  const kf_i64 chunk = kf_ceil_div(kf_ceil_div(cols, KF_SPLIT), KF_VEC) * KF_VEC;
  const kf_i64 c0 = min(cols, (kf_i64)by * chunk);
  const kf_i64 c1 = min(cols, c0 + chunk);
  // Rows are read KF_VEC elements at a time, with no per-element path: the launch plan
  // requires the vectors to tile the row (requires.multiple_of) and aligned pointers.
  for (kf_i64 rb = bx; rb * KF_RPB < rows; rb += gridDim.x) {
    const kf_i64 row = rb * KF_RPB + rib;
    kf_row<KF_VEC, PHASE>(args, row, row < rows, cols, c0, c1, chunk, by, lane, rib, red, part);
  }
}


extern "C" __global__ void __launch_bounds__(KF_BLOCK) kf_rows(KfArgs args) {
  kf_rows_body<0>(args);
}
