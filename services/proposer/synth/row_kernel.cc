// RowKernelGenerator: parameter space, prior and source of the row engine.
#include "services/proposer/synth/row_kernel.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "services/proposer/synth/device_code.h"
#include "services/proposer/synth/kernel_source.h"
#include "services/proposer/synth/target_args.h"

namespace kforge::synth {
namespace {

// The output's stores under evict_first (kf_write_chunk): sync_keep's and a scratch split's.
constexpr std::pair<const char*, const char*> kL2EvictFirstStore = {
    "        kf_store<V>(yr + c, o);",
    "        KfVec<TO, V> packed;\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < V; ++i) packed.v[i] = kf_from_float<TO>(o[i]);\n"
    "        kf_store_l2<TO, V>(yr + c, packed, kf_l2_policy(false));"};

// split_mode sync_keep: L2 eviction priorities for a sync split that re-reads its chunks from
// L2. Its first read marks the lines evict_last, the re-read and the output's stores
// evict_first, so that the stores stream through L2 without evicting chunks still to be
// re-read. Generated only for such configs (every other config's source stays as it was): the
// L2 cache-hint helpers (kL2CacheHints), and the engine's three accesses rewritten
// (kL2KeepAccesses): (plain, with its L2 policy).
constexpr std::pair<const char*, const char*> kL2KeepAccesses[] = {
    // the first read (kf_sync_read)
    {"  kf_for_each<V>(xr, it.c0, it.c1, lane, false, [&](kf_i64 c, int, const KfVec<TI, V>& raw) {",
     "  const unsigned long long keep = kf_l2_policy(true);\n"
     "  kf_for_each_read<V, KfVec<TI, V>>(it.c0, it.c1, lane, false,\n"
     "      [&](kf_i64 c, int, KfVec<TI, V>& raw) { raw = kf_load_l2<TI, V>(xr + c, keep); },\n"
     "      [&](kf_i64 c, int, const KfVec<TI, V>& raw) {"},
    // the re-read (kf_sync_write)
    {"      kf_load<V>(xr + c, v);",
     "      const KfVec<TI, V> raw = kf_load_l2<TI, V>(xr + c, kf_l2_policy(false));\n"
     "      kf_to_floats(raw, v);"},
    kL2EvictFirstStore,
};

// A scratch split's finishing launch walks the rows in reverse, so that its first re-reads hit
// what the partial launch left in L2; a line it re-read is dead, a line it stored is not read
// again by the op: its re-read and stores under evict_first keep the chunks still to be read.
constexpr std::pair<const char*, const char*> kL2FinishAccesses[] = {
    // the re-read (kf_row's read)
    {"    kf_load<V>(xr + c, v);",
     "    const KfVec<TI, V> raw = kf_load_l2<TI, V>(xr + c, kf_l2_policy(false));\n"
     "    kf_to_floats(raw, v);"},
    kL2EvictFirstStore,
};

// A scratch split's launches overlap (early_start): the partial launch lets the finishing one
// be scheduled into its tail, which waits for the partials before reading them.
constexpr std::pair<const char*, const char*> kEarlyFinishEntries[] = {
    {"  kf_rows_body<1>(args);", "  kf_launch_dependents();\n  kf_rows_body<1>(args);"},
    {"  kf_rows_body<2>(args);", "  kf_wait_previous();\n  kf_rows_body<2>(args);"},
};

// The output pass's store of one vector where it takes no L2 policy (unsplit rows, cluster and
// plain sync splits): 16- and 8-byte vectors in inline PTX. With the plain store NVVM addressed
// an unrolled step's stores from one base + 4 and split the first into f32, f32, v2.f32 (its
// alignment lost); the policy stores, inline PTX already, were all v4. Per-row ops (no output
// pass) keep the engine as it was.
constexpr char kVectorStoreHelper[] = R"(
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
)";

constexpr std::pair<const char*, const char*> kVectorStoreAccesses[] = {
    {"        kf_store<V>(yr + c, o);", "        kf_store_vec<TO, V>(yr + c, o);"},
};

// row_order operand, emitted only for such configs: a block's i-th row is the value's row
// (i % reps) * period + i / reps, so that the rows reading one row of a chain operand the
// value's rows repeat (an attention mask over heads) are neighbours, and a block reads that
// row once where rows in order read it once per repeat, as far apart as the value's rows.
constexpr char kOperandRowOrder[] = R"(
__device__ __forceinline__ kf_i64 kf_value_row(const KfArgs& args, kf_i64 i, kf_i64 rows,
                                               kf_i64 cols) {
  const kf_i64 period = kf_chain_period(args, cols);
  if (i >= rows || period <= 0 || rows % period != 0) return i;
  const kf_i64 reps = rows / period;
  return (i % reps) * period + i / reps;
}
)";
constexpr std::pair<const char*, const char*> kOperandRowOrderAccesses[] = {
    {"    const kf_i64 row = rb * KF_RPB + rib;\n",
     "    const kf_i64 row = kf_value_row(args, rb * KF_RPB + rib, rows, cols);\n"},
};

// The engine's accesses that both caches after the prologue (regs, smem_f32) rewrite: the
// second statistics pass's add and the output pass's parameters and values.
constexpr char kSecondPassAdd[] =
    "      [&](kf_i64 c, int, const KfVals<V>& l) { kf_add<1, V>(t, l.v, c, ctx); });";
constexpr char kOutPassParams[] = "    kf_out_params<V>(c, ctx, p);\n";
constexpr char kOutPassValues[] = "        kf_out_vec<V>(l.v, c, l.p, ctx, o);\n";

// cache=regs, emitted for such configs only: the register cache holds each value after the
// chain's prologue (kf_cache_in), so the later passes neither load the prologue's operands
// again nor recompute it, and a two-pass softmax's second pass leaves exp(x - max) there, so
// that its output pass is one multiply: one exp per element where the others take two (the
// attention chain of 1x8x2048x2048 bf16 issued ~17 instructions an element, 76% of the SMs'
// issue slots, and moved 48% of the DRAM bandwidth: H200, 2026-12-03).
constexpr std::pair<const char*, const char*> kRegisterCacheAccesses[] = {
    {R"(      if (use_regs) {
#pragma unroll
        for (int i = 0; i < V; ++i) cache[k * V + i] = v[i];
        kf_out_params<V>(c, ctx, pre[k]);
      }
)",
     R"(      if (use_regs) {
        kf_cache_in<V>(v, c, ctx);
#pragma unroll
        for (int i = 0; i < V; ++i) cache[k * V + i] = v[i];
        kf_cached_out_params<V>(c, ctx, pre[k]);
        kf_cached_add<0, V>(s, v, c, ctx);
        return;
      }
)"},
    {kSecondPassAdd,
     R"(      [&](kf_i64 c, int k, const KfVals<V>& l) {
        if (use_regs) {
          kf_cached_add<1, V>(t, *reinterpret_cast<float(*)[V]>(cache + k * V), c, ctx);
        } else {
          kf_add<1, V>(t, l.v, c, ctx);
        }
      });)"},
    {kOutPassValues,
     R"(        if (slots) {
          kf_cached_out_vec<V>(l.v, c, l.p, ctx, o);
        } else {
          kf_out_vec<V>(l.v, c, l.p, ctx, o);
        }
)"},
};

// cache=smem_f32, emitted for such configs only: shared memory holds each value after the
// chain's prologue as float (twice a 16-bit row's bytes), and every later pass, reading it
// there or from global memory, sees values the prologue has been applied to, so that the
// output pass loads none of its operands again (the attention chain's output pass reloaded
// the mask and the scale and redid both per vector: H200 SASS, 2026-12-04).
constexpr std::pair<const char*, const char*> kSmemAfterPrologueAccesses[] = {
    {R"(  TI* srow = reinterpret_cast<TI*>(kf_dsmem) + (kf_i64)rib * chunk;
  const bool use_smem =
      (kf_i64)KF_RPB * chunk * (kf_i64)sizeof(TI) <= (kf_i64)kf_dynamic_smem_bytes();
)",
     R"(  float* srow = reinterpret_cast<float*>(kf_dsmem) + (kf_i64)rib * chunk;
  const bool use_smem =
      (kf_i64)KF_RPB * chunk * (kf_i64)sizeof(float) <= (kf_i64)kf_dynamic_smem_bytes();
)"},
    {"    kf_load<V>(xr + c, v);\n  };\n",
     "    kf_load<V>(xr + c, v);\n    kf_cache_in<V>(v, c, ctx);\n  };\n"},
    {R"(      if (use_smem) kf_smem_put<V>(srow, c - c0, chunk, raw);
#endif
      kf_add<0, V>(s, v, c, ctx);
)",
     R"(      kf_cache_in<V>(v, c, ctx);
      if (use_smem) kf_smem_put<V>(srow, c - c0, chunk, v);
#endif
      kf_cached_add<0, V>(s, v, c, ctx);
)"},
    {kSecondPassAdd,
     "      [&](kf_i64 c, int, const KfVals<V>& l) { kf_cached_add<1, V>(t, l.v, c, ctx); });"},
    {kOutPassParams, "    kf_cached_out_params<V>(c, ctx, p);\n"},
    {kOutPassValues, "        kf_cached_out_vec<V>(l.v, c, l.p, ctx, o);\n"},
};

// cache=smem_f32 with a two-pass softmax (after kSmemAfterPrologueAccesses, with CacheHooks'
// exp_once): pass 1 leaves exp(x - max) in shared memory, so the output pass multiplies, as the
// register cache's does: one exp an element where the online softmax takes two, in the
// attention chain that issued ~17 instructions an element (76% of the issue slots, 48% of the
// DRAM bandwidth: H200, 2026-12-03). A row that outgrew shared memory takes its exps again
// where the output pass re-reads it.
constexpr std::pair<const char*, const char*> kSmemExpOnceAccesses[] = {
    {"  // Reads back what pass 0 read: from registers, shared memory or global memory.\n",
     "  bool exps_cached = false;  // pass 1 has left exp(x - max) in shared memory\n"
     "  // Reads back what pass 0 read: from registers, shared memory or global memory.\n"},
    {"    kf_load<V>(xr + c, v);\n    kf_cache_in<V>(v, c, ctx);\n  };\n",
     R"(    kf_load<V>(xr + c, v);
    kf_cache_in<V>(v, c, ctx);
    if (exps_cached) {
#pragma unroll
      for (int i = 0; i < V; ++i) v[i] = kf_exp(v[i], ctx);
    }
  };
)"},
    {"      [&](kf_i64 c, int, const KfVals<V>& l) { kf_cached_add<1, V>(t, l.v, c, ctx); });",
     R"(      [&](kf_i64 c, int, const KfVals<V>& l) {
        float v[V];
#pragma unroll
        for (int i = 0; i < V; ++i) v[i] = l.v[i];
        kf_cached_add<1, V>(t, v, c, ctx);  // leaves exp(x - max) in v
        if (use_smem) kf_smem_put<V>(srow, c - c0, chunk, v);
      });)"},
    {"  kf_finish<1>(t, ctx);\n", "  kf_finish<1>(t, ctx);\n  exps_cached = true;\n"},
};

// `engine` with each (plain, rewritten) access of `accesses` applied; each plain access must
// occur exactly once.
template <size_t N>
std::string Rewritten(std::string engine,
                      const std::pair<const char*, const char*> (&accesses)[N]) {
  for (const auto& [plain, rewritten] : accesses) {
    const size_t at = engine.find(plain);
    if (at == std::string::npos || engine.find(plain, at + 1) != std::string::npos) {
      // A changed engine: fail loudly in every test that generates such a config.
      return absl::StrCat("#error \"the row engine no longer has one '", plain, "'\"\n",
                          engine);
    }
    engine.replace(at, std::string_view(plain).size(), rewritten);
  }
  return engine;
}

// The engine: geometry, op hooks (kf_identity/kf_add/kf_merge/kf_finish/kf_out/kf_write_row)
// and KfStat come from the op snippet emitted before it.
constexpr char kRowEngine[] = R"(
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
// The warps' results are folded the same way, as a butterfly over each warp's first KF_WARPS
// lanes (repeated across the warp), not one after another: log2(KF_WARPS) dependent merges
// where there were KF_WARPS - 1 (H100, an ordered split's VAE group norm of 512-thread blocks
// 249 -> 225 us; docs/benchmarks/2026-12-06-session42.md).
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
  const int warp_lane = lane & 31;
  s = red[rib][warp_lane % KF_WARPS];
#pragma unroll
  for (int m = 1; m < KF_WARPS; m <<= 1) {
    const KfStat o = kf_shfl_xor(s, m);
    s = (warp_lane & m) ? kf_merge<P>(o, s) : kf_merge<P>(s, o);
  }
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

// A row cache's vector at offset `off` of a chunk of `chunk` elements in shared memory, as
// 16-byte pieces: piece q of every vector in plane q of the chunk, so that the 8 lanes of a
// quarter warp, which one 16-byte shared access serves together, touch 128 consecutive bytes.
// Vectors of 32 bytes (8 floats) laid out as in global memory put those lanes 32 bytes apart,
// two to a bank (sm_90). Vectors of at most 16 bytes keep that layout (one plane).
template <typename T, int V> struct KfSmemPieces {
  static constexpr int kElems = 16 / (int)sizeof(T) < V ? 16 / (int)sizeof(T) : V;  // a piece's
  static constexpr int kCount = V / kElems;
};
template <int V, typename T>
__device__ __forceinline__ void kf_smem_put(T* row, kf_i64 off, kf_i64 chunk,
                                            const KfVec<T, V>& v) {
  typedef KfSmemPieces<T, V> P;
  const kf_i64 at = off / V * P::kElems, plane = chunk / P::kCount;
#pragma unroll
  for (int q = 0; q < P::kCount; ++q) {
    KfVec<T, P::kElems> piece;
#pragma unroll
    for (int i = 0; i < P::kElems; ++i) piece.v[i] = v.v[q * P::kElems + i];
    *reinterpret_cast<KfVec<T, P::kElems>*>(row + q * plane + at) = piece;
  }
}
template <int V>
__device__ __forceinline__ void kf_smem_put(float* row, kf_i64 off, kf_i64 chunk,
                                            const float (&v)[V]) {
  KfVec<float, V> w;
#pragma unroll
  for (int i = 0; i < V; ++i) w.v[i] = v[i];
  kf_smem_put<V>(row, off, chunk, w);
}
template <int V, typename T>
__device__ __forceinline__ void kf_smem_get(const T* row, kf_i64 off, kf_i64 chunk,
                                            float (&v)[V]) {
  typedef KfSmemPieces<T, V> P;
  const kf_i64 at = off / V * P::kElems, plane = chunk / P::kCount;
#pragma unroll
  for (int q = 0; q < P::kCount; ++q) {
    const KfVec<T, P::kElems> piece =
        *reinterpret_cast<const KfVec<T, P::kElems>*>(row + q * plane + at);
    kf_to_floats(piece, v + q * P::kElems);
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
  TO* yr =
      reinterpret_cast<TO*>(args.outputs[0].data) + (valid ? kf_out_row(args, row, cols) : 0);
  kf_for_each_read<V, KfOutVals<V>>(
      c0, c1, lane, slots,
      [&](kf_i64 c, int k, KfOutVals<V>& l) {
        read(c, k, l.v);
        params(c, k, l.p);
      },
      [&](kf_i64 c, int, const KfOutVals<V>& l) {
        float o[V];
        kf_out_vec<V>(l.v, c, l.p, ctx, o);
        kf_store<V>(yr + c, o);
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
  const TI* xr =
      reinterpret_cast<const TI*>(args.inputs[0].data) + (valid ? kf_in_row(args, row, cols) : 0);
  const kf_i64 e1 = valid ? c1 : c0;
  KfRowCtx ctx;
  kf_init_ctx(ctx, args, row, cols);
#if KF_CACHE == 2
  float cache[KF_CAP];
  // The output pass's per-column parameters, loaded in pass 0 beside the vectors they go
  // with: after the row's reduction the pass only computes and stores, where loading them
  // there put a round trip to L2 behind the reduction's barrier (a written-out RMSNorm's
  // weight, in launch-bound rows that trailed Inductor's by ~0.9 us on the H200:
  // docs/benchmarks/2026-12-05-cpu-row-engine-latency.md).
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
      kf_smem_get<V>(srow, c - c0, chunk, v);
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
      kf_to_floats(raw, v);
#if KF_CACHE == 2
      if (use_regs) {
#pragma unroll
        for (int i = 0; i < V; ++i) cache[k * V + i] = v[i];
        kf_out_params<V>(c, ctx, pre[k]);
      }
#endif
#if KF_CACHE == 1
      if (use_smem) kf_smem_put<V>(srow, c - c0, chunk, raw);
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
  // Unsplit rows have one chunk (a grid of height 1): a constant, so with the captured entry's
  // columns the chunk's bounds, and whether the register cache holds it, are constants too.
  const unsigned by = KF_SPLIT == 1 ? 0u : PHASE == 2 ? gridDim.y - 1 - blockIdx.y : blockIdx.y;
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

)";

constexpr char kSingleEntry[] = R"(
extern "C" __global__ void __launch_bounds__(KF_BLOCK) kf_rows(KfArgs args) {
  kf_rows_body<0>(args);
}
)";

// The captured call's entry (the plan's `captured`: the launcher picks it by the call's shape
// key and alignment), after kf_captured_args: the engine on a KfArgs of constant shapes, so its
// geometry, the rows' offsets (a broadcast operand's 64-bit remainder) and a mean's divisor fold
// at compile time, where the generic entry reads them from its parameter and works them out
// before its first load, on launch-bound rows where Inductor's static-shape kernels have none
// of it (Qwen3's and Gemma3's RMSNorm chains trailed by ~0.9 us on the H200, 2026-12-05).
constexpr char kCapturedSingleEntry[] = R"(
extern "C" __global__ void __launch_bounds__(KF_BLOCK) kf_rows_captured(KfCapturedArgs args) {
  KfArgs call;
  kf_captured_args(call, args);
  kf_rows_body<0>(call);
}
)";

constexpr char kSplitEntries[] = R"(
extern "C" __global__ void __launch_bounds__(KF_BLOCK, KF_SPLIT_MIN_BLOCKS)
    kf_rows_partial(KfArgs args) {
  kf_rows_body<1>(args);
}
extern "C" __global__ void __launch_bounds__(KF_BLOCK, KF_SPLIT_MIN_BLOCKS)
    kf_rows_finish(KfArgs args) {
  kf_rows_body<2>(args);
}
)";

// split_mode stream: the scratch split's partial launch, then a launch that merges each row's
// partials into its finished statistics (kf_finish's a and b, after the partials in scratch),
// then the output pass as a pointwise launch in address order, as Inductor writes a group norm
// (H200, group norm 1x128x512x512 under ncu: its pointwise pass 61.7 us, the scratch split's
// finishing launch 70.6; docs/benchmarks/2026-12-02-h200-v4-stores-and-profiles.md). Median
// stream / scratch over the 20 fastest scratch configs and their twins: 0.969-0.974
// (1x128x512x512), 0.994-0.996 (1x256x256x256; docs/benchmarks/2026-12-02-h200-stream-splits.md).
// The engine's finishing phase becomes PHASE 3 of kf_row (kStreamAccesses): merge, finish,
// store the row's statistics. The engine's own output pass is never reached (kf_rows_apply
// writes), so it stays as written.
constexpr char kStreamHelpers[] = R"(
// The finished statistics of each row, 16-byte aligned after the partials in scratch.
__device__ __forceinline__ float2* kf_row_stats(const KfArgs& args, kf_i64 rows) {
  const kf_i64 partial_bytes = rows * KF_SPLIT * (kf_i64)sizeof(KfStat);
  return reinterpret_cast<float2*>(reinterpret_cast<char*>(args.scratch.data) +
                                   (partial_bytes + 15) / 16 * 16);
}
__device__ __forceinline__ void kf_store_row_stats(const KfArgs& args, kf_i64 row,
                                                   const KfRowCtx& ctx) {
  kf_i64 rows, cols;
  kf_geometry(args, rows, cols);
  kf_row_stats(args, rows)[row] = make_float2(ctx.a, ctx.b);
}
)";

std::string AffinePointers(const RowProblem& p);

// The captured call's geometry for a stream split's output pass (kf_apply_captured): the
// shape key that recognizes it, its rows and columns, whether its spans tile the rows exactly,
// and kf_captured_ctx, kf_init_ctx with constants for the group's channels. Calls of 2^31
// elements or more take the generic pass.
std::string StreamCapturedCode(const RowProblem& p, int64_t span) {
  std::string src = absl::StrCat(kCapturedShapeBegin, "\n");
  if (p.captured_call.num_inputs == 0 || p.rows * p.cols >= (int64_t{1} << 31)) {
    return absl::StrCat(src, "#define KF_CAPTURED_APPLY 0\n", kCapturedShapeEnd, "\n");
  }
  absl::StrAppend(&src, "#define KF_CAPTURED_APPLY 1\n#define KF_CAPTURED_SHAPE_KEY ",
                  absl::StrFormat("0x%016xull", p.captured_call.shape_key),
                  "\n#define KF_CAPTURED_ROWS ",
                  p.rows, "\n#define KF_CAPTURED_COLS ", p.cols, "\n#define KF_CAPTURED_EXACT ",
                  p.cols > 0 && p.cols % span == 0 ? "true" : "false",
                  "\n__device__ __forceinline__ void kf_captured_ctx(KfRowCtx& ctx, const KfArgs& "
                  "args, int row) {\n  ctx = KfRowCtx{};\n  ctx.row = row;\n"
                  "  ctx.cols = KF_CAPTURED_COLS;\n",
                  AffinePointers(p));
  if (p.op == RowOp::kGroupNorm) {
    const int64_t cg = p.channels / p.groups, hw = std::max<int64_t>(1, p.cols / cg);
    const KfDivisor divisor = kf_divisor(static_cast<unsigned long long>(hw));
    absl::StrAppend(&src, "  ctx.c_first = (row % ", p.groups, ") * ", cg, ";\n  ctx.hw = ", hw,
                    ";\n  ctx.div32 = true;\n  ctx.hw_divisor = KfDivisor{", divisor.magic,
                    "u, ", divisor.shift, "u};\n");
  }
  return absl::StrCat(src, "}\n", kCapturedShapeEnd, "\n");
}

constexpr std::pair<const char*, const char*> kStreamAccesses[] = {
    {"  if (PHASE == 2) {\n", "  if (PHASE >= 2) {\n"},
    {"  kf_finish<0>(s, ctx);\n#if KF_PASSES == 2",
     "  kf_finish<0>(s, ctx);\n"
     "  if (PHASE == 3) {\n"
     "    if (valid && lane == 0) kf_store_row_stats(args, row, ctx);\n"
     "    return;\n"
     "  }\n#if KF_PASSES == 2"},
};

constexpr char kStreamEntries[] = R"(
// Each launch lets the next be scheduled into its tail (early_start), which waits for it
// before reading what it wrote: the statistics their partials, the output pass its statistics
// (after its input loads, which no launch of the split writes).
extern "C" __global__ void __launch_bounds__(KF_BLOCK, KF_SPLIT_MIN_BLOCKS)
    kf_rows_partial(KfArgs args) {
  kf_launch_dependents();
  kf_rows_body<1>(args);
}
extern "C" __global__ void __launch_bounds__(KF_BLOCK) kf_rows_stats(KfArgs args) {
  kf_launch_dependents();
  kf_wait_previous();
  kf_rows_body<3>(args);
}

// The output pass: blockIdx.y a row (striding past 65535 rows), blockIdx.x a span of
// KF_UNROLL * KF_BLOCK vectors of it, a warp's lanes on consecutive vectors, so the grid walks
// the tensor in address order, from its end: what the partial launch read last is still in L2,
// so the first blocks' reads hit. Rows hold whole vectors (the plan requires V to divide them).
// One row's span: its loads are issued before the wait for the statistics launch (no launch
// of the split writes the input), then `get_ctx` gives the row's context, then the stores.
// `exact`: every vector of the span is in the row.
template <typename GetCtx>
__device__ __forceinline__ void kf_apply_span(const KfArgs& args, kf_i64 row, kf_i64 cols,
                                              kf_i64 c0, bool exact,
                                              unsigned long long evict_first, GetCtx&& get_ctx) {
  const TI* xr = reinterpret_cast<const TI*>(args.inputs[0].data) + kf_in_row(args, row, cols);
  TO* yr = reinterpret_cast<TO*>(args.outputs[0].data) + kf_out_row(args, row, cols);
  KfOutVals<KF_VEC> l[KF_UNROLL];
#pragma unroll
  for (int u = 0; u < KF_UNROLL; ++u) {
    const kf_i64 c = c0 + (kf_i64)u * KF_BLOCK * KF_VEC;
    if (exact || c < cols) {
      const KfVec<TI, KF_VEC> raw = kf_load_l2<TI, KF_VEC>(xr + c, evict_first);
      kf_to_floats(raw, l[u].v);
    }
  }
  kf_wait_previous();
  const KfRowCtx ctx = get_ctx();
#pragma unroll
  for (int u = 0; u < KF_UNROLL; ++u) {
    const kf_i64 c = c0 + (kf_i64)u * KF_BLOCK * KF_VEC;
    if (exact || c < cols) kf_out_params<KF_VEC>(c, ctx, l[u].p);
  }
#pragma unroll
  for (int u = 0; u < KF_UNROLL; ++u) {
    const kf_i64 c = c0 + (kf_i64)u * KF_BLOCK * KF_VEC;
    if (exact || c < cols) {
      float o[KF_VEC];
      kf_out_vec<KF_VEC>(l[u].v, c, l[u].p, ctx, o);
      kf_store_floats_l2<TO, KF_VEC>(yr + c, o, evict_first);
    }
  }
}

#if KF_CAPTURED_APPLY
// The captured call's output pass: its geometry is constants (kf_captured_ctx), so each
// thread sets up its row's context itself (a shift or multiply-shift for the channel, the
// row's statistics one broadcast load) where the generic pass has thread 0 pay 64-bit
// divisions while the block waits at two barriers.
__device__ __forceinline__ void kf_apply_captured(const KfArgs& args) {
  const float2* stats = kf_row_stats(args, KF_CAPTURED_ROWS);
  const int c0 = ((int)(gridDim.x - 1 - blockIdx.x) * (KF_UNROLL * KF_BLOCK) + (int)threadIdx.x) *
                 KF_VEC;
  const unsigned long long evict_first = kf_l2_policy(false);
  for (int r = blockIdx.y; r < KF_CAPTURED_ROWS; r += gridDim.y) {
    const int row = KF_CAPTURED_ROWS - 1 - r;
    kf_apply_span(args, row, KF_CAPTURED_COLS, c0, KF_CAPTURED_EXACT, evict_first, [&] {
      KfRowCtx ctx;
      kf_captured_ctx(ctx, args, row);
      const float2 ab = stats[row];
      ctx.a = ab.x;
      ctx.b = ab.y;
      return ctx;
    });
  }
}
#endif

// Any other call: the geometry from products of sizes (kf_geometry), the row's context
// set up once per block by thread 0 (its divisions and the row's statistics) while the block's
// input loads are in flight.
extern "C" __global__ void __launch_bounds__(KF_BLOCK) kf_rows_apply(KfArgs args) {
#if KF_CAPTURED_APPLY
  if (args.shape_key == KF_CAPTURED_SHAPE_KEY) {
    kf_apply_captured(args);
    return;
  }
#endif
  kf_i64 rows, cols;
  kf_geometry(args, rows, cols);
  const float2* stats = kf_row_stats(args, rows);
  const kf_i64 c0 = ((kf_i64)(gridDim.x - 1 - blockIdx.x) * KF_UNROLL * KF_BLOCK + threadIdx.x) *
                    KF_VEC;
  __shared__ KfRowCtx row_ctx;
  const unsigned long long evict_first = kf_l2_policy(false);
  for (kf_i64 r = blockIdx.y; r < rows; r += gridDim.y) {
    const kf_i64 row = rows - 1 - r;
    kf_apply_span(args, row, cols, c0, false, evict_first, [&] {
      if (threadIdx.x == 0) {
        KfRowCtx ctx;
        kf_init_ctx(ctx, args, row, cols);
        const float2 ab = stats[row];
        ctx.a = ab.x;
        ctx.b = ab.y;
        row_ctx = ctx;
      }
      __syncthreads();
      return row_ctx;
    });
    __syncthreads();  // every thread has its copy before thread 0 sets up the next row
  }
}
)";

// The sync split's items, their reads and writes, emitted only for sync and ordered configs
// (every byte of a source counts against the compile policy's size limit, #if'd out or not).
constexpr char kSyncItems[] = R"(
// A sync split: one cooperative launch whose items are (row block, chunk) pairs in
// row-block-major order, taken in sweeps of gridDim.x, a multiple of KF_SPLIT (so a row
// block's chunks fall in one sweep and its blocks are resident together). Software-pipelined:
// a block reads item k (pass 0; its partial statistics published, its chunk kept in shared
// memory or left in L2), then writes item k-1, whose row's blocks have long since published:
// DRAM sees reads and writes together and the wait for a row's last block is hidden.

// The arrival counters of the row blocks, after the partials in scratch.
__device__ __forceinline__ unsigned* kf_arrivals(const KfArgs& args, kf_i64 rows) {
  return reinterpret_cast<unsigned*>(reinterpret_cast<KfStat*>(args.scratch.data) +
                                     rows * KF_SPLIT);
}

__device__ __forceinline__ unsigned kf_load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// A partial statistic another block wrote in this launch: from L2, never from a line this
// SM's L1 cached before it was written.
__device__ __forceinline__ KfStat kf_load_partial(const KfStat* p) {
  KfStat r;
  const unsigned* src = reinterpret_cast<const unsigned*>(p);
  unsigned* dst = reinterpret_cast<unsigned*>(&r);
#pragma unroll
  for (int i = 0; i < (int)(sizeof(KfStat) / 4); ++i) dst[i] = __ldcg(src + i);
  return r;
}

struct KfItem {
  kf_i64 rb;    // row block
  int part;     // chunk of the row
  kf_i64 row;   // this thread's row
  bool valid;   // row < rows
  kf_i64 c0;    // the chunk's columns [c0, c1)
  kf_i64 c1;
  kf_i64 chunk;  // a chunk's columns, the last one's included (its shared-memory buffer's)
};

__device__ __forceinline__ KfItem kf_item(kf_i64 item, kf_i64 rows, kf_i64 cols, kf_i64 chunk,
                                          int rib) {
  KfItem it;
  it.rb = item / KF_SPLIT;
  it.part = (int)(item % KF_SPLIT);
  it.row = it.rb * KF_RPB + rib;
  it.valid = it.row < rows;
  it.c0 = min(cols, (kf_i64)it.part * chunk);
  it.c1 = it.valid ? min(cols, it.c0 + chunk) : it.c0;
  it.chunk = chunk;
  return it;
}

// Shared-memory buffer `buf` (0 or 1) for row `rib`'s chunk; null without a shared-memory
// cache or when two chunks per row do not fit (the chunk is then re-read from L2).
__device__ __forceinline__ TI* kf_sync_buffer(int buf, int rib, kf_i64 chunk) {
#if KF_CACHE == 1
  extern __shared__ __align__(16) unsigned char kf_dsmem[];
  if (2 * (kf_i64)KF_RPB * chunk * (kf_i64)sizeof(TI) > (kf_i64)kf_dynamic_smem_bytes()) {
    return nullptr;
  }
  return reinterpret_cast<TI*>(kf_dsmem) + ((kf_i64)buf * KF_RPB + rib) * chunk;
#else
  return nullptr;
#endif
}

// Pass 0 over an item's chunk: its statistics published, then counted in at the row block's
// arrival counter.
template <int V>
__device__ __forceinline__ void kf_sync_read(const KfArgs& args, const KfItem& it, kf_i64 cols,
                                             int lane, int rib, KfStat (*red)[KF_WARPS],
                                             TI* sbuf, KfStat* partials, unsigned* arrivals) {
  const TI* xr = reinterpret_cast<const TI*>(args.inputs[0].data) +
                 (it.valid ? kf_in_row(args, it.row, cols) : 0);
  KfRowCtx ctx;
  kf_init_ctx(ctx, args, it.row, cols);
  KfStat s = kf_identity<0>();
  kf_for_each<V>(xr, it.c0, it.c1, lane, false, [&](kf_i64 c, int, const KfVec<TI, V>& raw) {
    if (sbuf != nullptr) kf_smem_put<V>(sbuf, c - it.c0, it.chunk, raw);
    float v[V];
    kf_to_floats(raw, v);
    kf_add<0, V>(s, v, c, ctx);
  });
  s = kf_reduce_row<0>(s, lane, rib, red);
  if (it.valid && lane == 0) {
    partials[it.row * KF_SPLIT + it.part] = s;
    __threadfence();
  }
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(arrivals + it.rb, 1u);
}

// Waits for the item's row block to be complete and merges the row's partials (fixed order:
// every block of the row gets the same bits) into its statistics.
__device__ __forceinline__ KfStat kf_row_block_stat(const KfItem& it, int lane, int rib,
                                                    KfStat (*red)[KF_WARPS],
                                                    const KfStat* partials,
                                                    const unsigned* arrivals) {
  if (threadIdx.x == 0) {
    // Bounded: a row block's reads take microseconds to milliseconds, so a wait of seconds
    // (4M polls, each an L2 round trip and a sleep) is a deadlock, which traps the launch (a
    // CRASH the search steers off) instead of holding the GPU until the evaluator's limit.
    for (unsigned polls = 0; kf_load_acquire(arrivals + it.rb) < (unsigned)KF_SPLIT; ++polls) {
      if (polls == (1u << 22)) __trap();
      __nanosleep(64);
    }
  }
  __syncthreads();
  KfStat s = kf_identity<0>();
  if (it.valid) {
    for (int q = lane; q < KF_SPLIT; q += KF_RT) {
      s = kf_merge<0>(s, kf_load_partial(partials + it.row * KF_SPLIT + q));
    }
  }
  return kf_reduce_row<0>(s, lane, rib, red);
}

// Waits for the item's row block (kf_row_block_stat) and writes the chunk.
template <int V>
__device__ __forceinline__ void kf_sync_write(const KfArgs& args, const KfItem& it, kf_i64 cols,
                                              int lane, int rib, KfStat (*red)[KF_WARPS],
                                              const TI* sbuf, const KfStat* partials,
                                              const unsigned* arrivals) {
  const KfStat s = kf_row_block_stat(it, lane, rib, red, partials, arrivals);
  KfRowCtx ctx;
  kf_init_ctx(ctx, args, it.row, cols);
  kf_finish<0>(s, ctx);
#if KF_PER_ROW
  if (it.valid && lane == 0 && it.part == 0) kf_write_row(s, ctx, args);
#else
  const TI* xr = reinterpret_cast<const TI*>(args.inputs[0].data) +
                 (it.valid ? kf_in_row(args, it.row, cols) : 0);
  auto read = [&](kf_i64 c, int, float (&v)[V]) {
    if (sbuf != nullptr) {
      kf_smem_get<V>(sbuf, c - it.c0, it.chunk, v);
    } else {
      kf_load<V>(xr + c, v);
    }
  };
  auto params = [&](kf_i64 c, int, KfOutParams<V>& q) { kf_out_params<V>(c, ctx, q); };
  kf_write_chunk<V>(args, it.row, it.valid, cols, it.c0, it.c1, lane, false, read, params, ctx);
#endif
}
)";

// split_mode sync: the sweeps of one cooperative launch (kSyncItems' comment), and its
// entry after kSyncClear, where it always stood (a sync kernel's source is as it was).
constexpr char kSyncSweepBody[] = R"(
template <int V>
__device__ __forceinline__ void kf_rows_sync_body(const KfArgs& args, kf_i64 rows, kf_i64 cols) {
  __shared__ KfStat red[KF_RPB][KF_WARPS];
  const int lane = threadIdx.x % KF_RT;
  const int rib = threadIdx.x / KF_RT;
  const kf_i64 chunk = kf_ceil_div(kf_ceil_div(cols, KF_SPLIT), KF_VEC) * KF_VEC;
  KfStat* partials = reinterpret_cast<KfStat*>(args.scratch.data);
  unsigned* arrivals = kf_arrivals(args, rows);
  const kf_i64 items = kf_ceil_div(rows, KF_RPB) * KF_SPLIT;
  for (kf_i64 k = 0;; ++k) {
    const kf_i64 item = blockIdx.x + k * gridDim.x;
    if (item < items) {
      kf_sync_read<V>(args, kf_item(item, rows, cols, chunk, rib), cols, lane, rib, red,
                      kf_sync_buffer(k & 1, rib, chunk), partials, arrivals);
    }
    if (k > 0) {
      kf_sync_write<V>(args, kf_item(item - gridDim.x, rows, cols, chunk, rib), cols, lane, rib,
                       red, kf_sync_buffer((k - 1) & 1, rib, chunk), partials, arrivals);
    }
    if (item >= items) break;
  }
}
)";

// The launch that zeroes the row blocks' arrival counters before a sync or ordered split.
constexpr char kSyncClear[] = R"(
extern "C" __global__ void kf_rows_clear(KfArgs args) {
  kf_i64 rows, cols;
  kf_geometry(args, rows, cols);
  unsigned* arrivals = kf_arrivals(args, rows);
  const kf_i64 n = kf_ceil_div(rows, KF_RPB);
  for (kf_i64 i = (kf_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (kf_i64)gridDim.x * blockDim.x) {
    arrivals[i] = 0;
  }
})";

constexpr char kSyncSweepEntry[] = R"(
extern "C" __global__ void __launch_bounds__(KF_BLOCK, KF_MIN_BLOCKS) kf_rows_sync(KfArgs args) {
  kf_i64 rows, cols;
  kf_geometry(args, rows, cols);
  kf_rows_sync_body<KF_VEC>(args, rows, cols);
}
)";

// An ordered split's clearing launch (kSyncClear) also zeroes its ticket counter, 8-byte
// aligned after the arrival counters (scratch_bytes has room for it).
constexpr std::pair<const char*, const char*> kOrderedClearAccesses[] = {
    {"extern \"C\" __global__ void kf_rows_clear(KfArgs args) {",
     "__device__ __forceinline__ unsigned long long* kf_tickets(const KfArgs& args,\n"
     "                                                          kf_i64 rows) {\n"
     "  const unsigned* end = kf_arrivals(args, rows) + kf_ceil_div(rows, KF_RPB);\n"
     "  return reinterpret_cast<unsigned long long*>(\n"
     "      (reinterpret_cast<unsigned long long>(end) + 7) / 8 * 8);\n"
     "}\n"
     "extern \"C\" __global__ void kf_rows_clear(KfArgs args) {"},
    {"    arrivals[i] = 0;\n  }\n}",
     "    arrivals[i] = 0;\n  }\n"
     "  if (blockIdx.x == 0 && threadIdx.x == 0) *kf_tickets(args, rows) = 0;\n}"},
};

// split_mode ordered: the items in one launch of about the resident blocks, which take them
// in ticket order (an atomic counter): each row block's chunks are read `lag` row blocks
// before they are written, reads and writes interleaved, so that the write re-reads them from
// L2 while `lag` row blocks of reads and writes stay within KF_ORDERED_LAG_BYTES (a quarter of
// L2; lag_scale scales the row blocks by KF_ORDERED_LAG_HALVES / 2). A sync split's sweep is all
// its resident blocks' chunks, most of a VAE group norm, which outgrows L2. A block waits only on
// items of smaller tickets, held by blocks that have started (the next ticket is taken while an
// item runs, and is behind it), so the launch needs no co-residency: not cooperative. (H200, group
// norm 1x128x512x512 fp32, by hand before this mode: 92-96 us at a lag of 8-16 MB, 103-104 at 32-64
// MB, the stream split 106.6; docs/benchmarks/2026-12-04-h200-ordered-split.md.)
constexpr char kOrderedEntry[] = R"(
// The vectors loaded before the wait: the first step's, but one of unroll 4's, where two
// already spilled under the resident blocks' registers (ptxas, sm_90, 256 threads: 16 B).
#define KF_ORDERED_FIRST (KF_UNROLL > 2 ? 1 : KF_UNROLL)

// An ordered split's write: the thread's first KF_ORDERED_FIRST vectors of the chunk are
// loaded before the wait for its row block (no launch of the split writes the input), so the
// wait, the merge of the row's partials and the block's reduction overlap their latency, where
// a sync split's write issues its first load after all three; the rest of the chunk as there.
template <int V>
__device__ __forceinline__ void kf_ordered_write(const KfArgs& args, const KfItem& it,
                                                 kf_i64 cols, int lane, int rib,
                                                 KfStat (*red)[KF_WARPS], const KfStat* partials,
                                                 const unsigned* arrivals) {
  const TI* xr = reinterpret_cast<const TI*>(args.inputs[0].data) +
                 (it.valid ? kf_in_row(args, it.row, cols) : 0);
  TO* yr =
      reinterpret_cast<TO*>(args.outputs[0].data) + (it.valid ? kf_out_row(args, it.row, cols) : 0);
  const unsigned long long evict_first = kf_l2_policy(false);
  const kf_i64 first_end = min(it.c1, it.c0 + (kf_i64)KF_ORDERED_FIRST * KF_RT * V);
  KfVals<V> first[KF_ORDERED_FIRST];
#pragma unroll
  for (int u = 0; u < KF_ORDERED_FIRST; ++u) {
    const kf_i64 c = it.c0 + ((kf_i64)u * KF_RT + lane) * V;
    if (c < first_end) kf_to_floats(kf_load_l2<TI, V>(xr + c, evict_first), first[u].v);
  }
  const KfStat s = kf_row_block_stat(it, lane, rib, red, partials, arrivals);
  KfRowCtx ctx;
  kf_init_ctx(ctx, args, it.row, cols);
  kf_finish<0>(s, ctx);
#pragma unroll
  for (int u = 0; u < KF_ORDERED_FIRST; ++u) {
    const kf_i64 c = it.c0 + ((kf_i64)u * KF_RT + lane) * V;
    if (c < first_end) {
      KfOutParams<V> p;
      kf_out_params<V>(c, ctx, p);
      float o[V];
      kf_out_vec<V>(first[u].v, c, p, ctx, o);
      kf_store_floats_l2<TO, V>(yr + c, o, evict_first);
    }
  }
  auto read = [&](kf_i64 c, int, float (&v)[V]) {
    kf_to_floats(kf_load_l2<TI, V>(xr + c, evict_first), v);
  };
  auto params = [&](kf_i64 c, int, KfOutParams<V>& q) { kf_out_params<V>(c, ctx, q); };
  kf_write_chunk<V>(args, it.row, it.valid, cols, first_end, it.c1, lane, false, read, params,
                    ctx);
}

template <int V>
__device__ __forceinline__ void kf_rows_ordered_body(const KfArgs& args, kf_i64 rows,
                                                     kf_i64 cols) {
  __shared__ KfStat red[KF_RPB][KF_WARPS];
  __shared__ unsigned long long ticket;
  const int lane = threadIdx.x % KF_RT;
  const int rib = threadIdx.x / KF_RT;
  const kf_i64 chunk = kf_ceil_div(kf_ceil_div(cols, KF_SPLIT), KF_VEC) * KF_VEC;
  KfStat* partials = reinterpret_cast<KfStat*>(args.scratch.data);
  unsigned* arrivals = kf_arrivals(args, rows);
  unsigned long long* tickets = kf_tickets(args, rows);
  const kf_i64 row_blocks = kf_ceil_div(rows, KF_RPB);
  const kf_i64 lag = kf_ticket_lag(row_blocks, (kf_i64)KF_RPB * cols * KF_ORDERED_ELEM_BYTES,
                                   KF_ORDERED_LAG_BYTES, KF_ORDERED_LAG_HALVES);
  const unsigned long long total = kf_ticket_count(row_blocks, KF_SPLIT);
  if (threadIdx.x == 0) ticket = atomicAdd(tickets, 1ull);
  __syncthreads();
  for (unsigned long long t = ticket; t < total;) {
    unsigned long long next = 0;
    if (threadIdx.x == 0) next = atomicAdd(tickets, 1ull);
    const KfTicketItem item = kf_ticket_item(t, row_blocks, lag, KF_SPLIT);
    const KfItem it =
        kf_item(item.row_block * KF_SPLIT + item.part, rows, cols, chunk, rib);
    if (item.write) {
      kf_ordered_write<V>(args, it, cols, lane, rib, red, partials, arrivals);
    } else {
      kf_sync_read<V>(args, it, cols, lane, rib, red, nullptr, partials, arrivals);
    }
    __syncthreads();  // every thread has read `ticket` and is done with the item
    if (threadIdx.x == 0) ticket = next;
    __syncthreads();
    t = ticket;
  }
}

// Scheduled into the clearing launch's tail (early_start): it waits for the cleared counters.
extern "C" __global__ void __launch_bounds__(KF_BLOCK, KF_MIN_BLOCKS) kf_rows_ordered(KfArgs args) {
  kf_wait_previous();
  kf_i64 rows, cols;
  kf_geometry(args, rows, cols);
  kf_rows_ordered_body<KF_VEC>(args, rows, cols);
}
)";

// cache=output, an ordered split's after a prologue with operands of the value's shape (a
// residual added before the norm): the read stores each value after the prologue in the
// output buffer, where its write re-reads it and stores the result over it, so that what a
// write re-reads from L2 is one float an element instead of the input and every operand (the
// lag and the window count KF_ORDERED_ELEM_BYTES of them). Those values are other blocks'
// stores of this launch: every thread's are ordered before its row block's arrival (the
// barrier, then thread 0's fence, as a grid barrier orders them), and a write loads them only
// after its wait, with plain loads the compiler cannot hoist above it. The input and the
// operands are dead once read; the values stay in L2 (evict_last) until their write. The read
// loads a step's prologue operands with its input vectors (KfStashRead), before the step's
// first store: loaded with each vector's work, after the store of the vector before it (which
// may alias them), they went to DRAM one vector after another (sm_90 SASS, session 47).
constexpr std::pair<const char*, const char*> kOutputStashAccesses[] = {
    // the read (kf_sync_read, as kL2KeepAccesses left it)
    {"// Pass 0 over an item's chunk: its statistics published",
     "// cache=output's read of a vector: the input and the prologue's operands there.\n"
     "template <int V> struct KfStashRead {\n  KfVec<TI, V> raw;\n  KfProOperands<V> pro;\n};\n\n"
     "// Pass 0 over an item's chunk: its statistics published"},
    {"  KfRowCtx ctx;\n  kf_init_ctx(ctx, args, it.row, cols);\n  KfStat s = kf_identity<0>();\n"
     "  const unsigned long long keep = kf_l2_policy(true);\n",
     "  TO* yr = reinterpret_cast<TO*>(args.outputs[0].data) +\n"
     "           (it.valid ? kf_out_row(args, it.row, cols) : 0);\n"
     "  KfRowCtx ctx;\n  kf_init_ctx(ctx, args, it.row, cols);\n  KfStat s = kf_identity<0>();\n"
     "  const unsigned long long keep = kf_l2_policy(true), dead = kf_l2_policy(false);\n"},
    {"  kf_for_each_read<V, KfVec<TI, V>>(it.c0, it.c1, lane, false,\n"
     "      [&](kf_i64 c, int, KfVec<TI, V>& raw) { raw = kf_load_l2<TI, V>(xr + c, keep); },\n"
     "      [&](kf_i64 c, int, const KfVec<TI, V>& raw) {",
     "  kf_for_each_read<V, KfStashRead<V>>(it.c0, it.c1, lane, false,\n"
     "      [&](kf_i64 c, int, KfStashRead<V>& l) {\n"
     "        l.raw = kf_load_l2<TI, V>(xr + c, dead);\n"
     "        kf_prologue_load<V>(ctx.chain, c, l.pro);\n"
     "      },\n"
     "      [&](kf_i64 c, int, const KfStashRead<V>& l) {"},
    {"    if (sbuf != nullptr) kf_smem_put<V>(sbuf, c - it.c0, it.chunk, raw);\n"
     "    float v[V];\n    kf_to_floats(raw, v);\n    kf_add<0, V>(s, v, c, ctx);\n",
     "    float v[V];\n    kf_to_floats(l.raw, v);\n    kf_prologue_apply<V>(l.pro, v);\n"
     "    kf_store_floats_l2<TO, V>(yr + c, v, keep);\n    kf_cached_add<0, V>(s, v, c, ctx);\n"},
    {"  __syncthreads();\n  if (threadIdx.x == 0) atomicAdd(arrivals + it.rb, 1u);",
     "  __syncthreads();\n  if (threadIdx.x == 0) {\n    __threadfence();\n"
     "    atomicAdd(arrivals + it.rb, 1u);\n  }"},
    // the write (kf_ordered_write): its first loads after the wait, then the rest
    {R"(  KfVals<V> first[KF_ORDERED_FIRST];
#pragma unroll
  for (int u = 0; u < KF_ORDERED_FIRST; ++u) {
    const kf_i64 c = it.c0 + ((kf_i64)u * KF_RT + lane) * V;
    if (c < first_end) kf_to_floats(kf_load_l2<TI, V>(xr + c, evict_first), first[u].v);
  }
  const KfStat s = kf_row_block_stat(it, lane, rib, red, partials, arrivals);
)",
     R"(  const KfStat s = kf_row_block_stat(it, lane, rib, red, partials, arrivals);
  KfVals<V> first[KF_ORDERED_FIRST];
#pragma unroll
  for (int u = 0; u < KF_ORDERED_FIRST; ++u) {
    const kf_i64 c = it.c0 + ((kf_i64)u * KF_RT + lane) * V;
    if (c < first_end) kf_load<V>(yr + c, first[u].v);
  }
)"},
    {"      kf_out_params<V>(c, ctx, p);\n      float o[V];\n      kf_out_vec<V>(first[u].v,",
     "      kf_cached_out_params<V>(c, ctx, p);\n      float o[V];\n"
     "      kf_cached_out_vec<V>(first[u].v,"},
    {"    kf_to_floats(kf_load_l2<TI, V>(xr + c, evict_first), v);\n",
     "    kf_load<V>(yr + c, v);\n"},
    {"  auto params = [&](kf_i64 c, int, KfOutParams<V>& q) { kf_out_params<V>(c, ctx, q); };\n"
     "  kf_write_chunk<V>(args, it.row, it.valid, cols, first_end,",
     "  auto params = [&](kf_i64 c, int, KfOutParams<V>& q) {\n"
     "    kf_cached_out_params<V>(c, ctx, q);\n  };\n"
     "  kf_write_chunk<V>(args, it.row, it.valid, cols, first_end,"},
    {kOutPassValues, "        kf_cached_out_vec<V>(l.v, c, l.p, ctx, o);\n"},
};

// The ordered launch's captured entry (after kf_captured_args): its geometry, the ticket
// schedule's lag and every item's rows and columns fold at compile time, where the generic
// entry works them out in 64-bit arithmetic at run time. (ptxas, sm_90, VAE group norm
// 1x128x512x512 fp32: 512 threads whose item is one step, all of it loaded before the wait,
// took 72 registers where the generic entry took 126; 107 and 114 as the write loads one
// vector early; at the 256-thread configs the sweeps found fastest, within 2 of each other.)
constexpr char kOrderedCapturedEntry[] = R"(
extern "C" __global__ void __launch_bounds__(KF_BLOCK, KF_MIN_BLOCKS)
    kf_rows_ordered_captured(KfCapturedArgs args) {
  kf_wait_previous();
  KfArgs call;
  kf_captured_args(call, args);
  kf_i64 rows, cols;
  kf_geometry(call, rows, cols);
  kf_rows_ordered_body<KF_VEC>(call, rows, cols);
}
)";

bool HasAlgoChoice(RowOp op) {
  return op == RowOp::kSoftmax || op == RowOp::kLogSoftmax || op == RowOp::kLayerNorm ||
         op == RowOp::kGroupNorm;
}
bool UsesExp(RowOp op) { return op == RowOp::kSoftmax || op == RowOp::kLogSoftmax; }

// Row geometry from the ABI at run time: the source never holds the captured shape. Rows and
// columns are products of sizes: a 64-bit division (numel / cols) took a good part of a stream
// split's output pass's instructions, and in every kernel it stood before the first load. The
// loop runs over every dim slot, each a constant index: the captured entry's KfArgs then stays
// in registers (an index that varies at run time puts the whole struct in local memory).
std::string GeometryCode(const RowProblem& p) {
  std::string body;
  if (p.op == RowOp::kGroupNorm) {
    absl::StrAppend(&body, "  rows = x.sizes[0] * (kf_i64)", p.groups, ";\n",
                    "  cols = x.ndim > 1 ? x.sizes[1] / ", p.groups, " : 0;\n",
                    "#pragma unroll\n  for (int d = 2; d < KF_MAX_DIMS; ++d) {\n",
                    "    if (d < x.ndim) cols *= x.sizes[d];\n  }\n");
  } else {
    absl::StrAppend(&body, "  rows = 1;\n  cols = 1;\n",
                    "#pragma unroll\n  for (int d = 0; d < KF_MAX_DIMS; ++d) {\n",
                    "    if (d < x.ndim) (d < x.ndim - ", p.row_dims,
                    " ? rows : cols) *= x.sizes[d];\n  }\n");
  }
  // Where a row starts in input 0 and in output 0 (`n` elements a row there: COLS, or 1 where
  // the op writes one value per row): adjacent rows, or rows through the outer dims' strides.
  const std::string outer_ndim = absl::StrCat("args.inputs[0].ndim - ", p.row_dims);
  const std::string offsets =
      p.strided_rows
          ? absl::StrCat(
                "__device__ __forceinline__ kf_i64 kf_in_row(const KfArgs& args, kf_i64 row, "
                "kf_i64) {\n  return kf_outer_offset(args.inputs[0], row, ", outer_ndim,
                ");\n}\n__device__ __forceinline__ kf_i64 kf_out_row(const KfArgs& args, "
                "kf_i64 row, kf_i64) {\n  return kf_outer_offset(args.outputs[0], row, ",
                outer_ndim, ");\n}\n")
          : "__device__ __forceinline__ kf_i64 kf_in_row(const KfArgs&, kf_i64 row, kf_i64 n) "
            "{\n  return row * n;\n}\n__device__ __forceinline__ kf_i64 kf_out_row(const "
            "KfArgs&, kf_i64 row, kf_i64 n) {\n  return row * n;\n}\n";
  return absl::StrCat(
      "\n__device__ __forceinline__ void kf_geometry(const KfArgs& args, kf_i64& rows, "
      "kf_i64& cols) {\n  const KfTensor& x = args.inputs[0];\n",
      body, "}\n", offsets);
}

// The statements of kf_init_ctx that point a row's context at the affine parameters.
std::string AffinePointers(const RowProblem& p) {
  std::string init;
  if (p.weight_input >= 0) {
    absl::StrAppend(&init, "  ctx.w = reinterpret_cast<const TW*>(args.inputs[", p.weight_input,
                    "].data);\n");
  }
  if (p.bias_input >= 0) {
    absl::StrAppend(&init, "  ctx.bias = reinterpret_cast<const TB*>(args.inputs[",
                    p.bias_input, "].data);\n");
  }
  if (!p.chain.empty()) init += "  kf_chain_init(ctx.chain, args, ctx.row, ctx.cols);\n";
  return init;
}

// The chain hooks' epilogue where it reads the row input (PointwiseChain::
// EpilogueReadsStreamedInput): from the values the output pass read.
constexpr char kEpilogueFromRow[] =
    R"(  // v holds the row as read: the epilogue's operands that are the row input.
  KfEpiOperands<V> epi = p.epi;
  kf_epilogue_load_from_row<V>(v, epi);
  kf_epilogue_apply<V>(epi, o);
)";

// A chain's op hooks: the op's kf_add, kf_out_params and kf_out_vec (and KfOutParams) renamed
// kf_op_*, and hooks of those names that apply the prologue to every value read and the
// epilogue to every value written, their operands loaded where the op's parameters are.
// Single ops keep their source as it was.
std::string WithChainHooks(const RowProblem& p, std::string op_code) {
  if (p.chain.empty()) return op_code;
  op_code = absl::StrReplaceAll(op_code, {{"KfOutParams", "KfOpOutParams"},
                                          {"void kf_out_params(", "void kf_op_out_params("},
                                          {"void kf_out_vec(", "void kf_op_out_vec("},
                                          {"void kf_add(", "void kf_op_add("}});
  return absl::StrCat(op_code, R"(
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
)",
                      p.chain.EpilogueReadsStreamedInput() ? kEpilogueFromRow
                                                           : "  kf_epilogue_apply<V>(p.epi, o);\n",
                      R"(}
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
)");
}

// The hooks kRegisterCacheAccesses and kSmemAfterPrologueAccesses call (see there), after the
// op's and the chain's. `exp_once`: a two-pass softmax's second pass leaves exp(x - max) in
// the values it is given, and the output pass multiplies them.
std::string CacheHooks(const RowProblem& p, bool exp_once) {
  const bool chain = !p.chain.empty();
  const std::string op_add = chain ? "kf_op_add" : "kf_add";
  std::string src = R"(
template <int V>
__device__ __forceinline__ void kf_cache_in(float (&v)[V], kf_i64 c, const KfRowCtx& ctx) {
)";
  if (p.chain.has_prologue()) {
    src += "  KfProOperands<V> pro;\n  kf_prologue_load<V>(ctx.chain, c, pro);\n"
           "  kf_prologue_apply<V>(pro, v);\n";
  }
  absl::StrAppend(&src, R"(}
template <int P, int V>
__device__ __forceinline__ void kf_cached_add(KfStat& st, )",
                  exp_once ? "" : "const ", R"(float (&v)[V], kf_i64 c,
                                              const KfRowCtx& ctx) {
)");
  if (exp_once) {
    src += R"(  if (P == 1) {
#pragma unroll
    for (int i = 0; i < V; ++i) {
      v[i] = kf_exp(v[i], ctx);
      st.s += v[i];
    }
    return;
  }
)";
  }
  absl::StrAppend(&src, "  ", op_add, R"(<P, V>(st, v, c, ctx);
}
template <int V>
__device__ __forceinline__ void kf_cached_out_params(kf_i64 c, const KfRowCtx& ctx,
                                                     KfOutParams<V>& p) {
)");
  src += chain ? "  kf_op_out_params<V>(c, ctx, p.op);\n"
                 "  kf_epilogue_load<V>(ctx.chain, c, p.epi);\n"
               : "  kf_out_params<V>(c, ctx, p);\n";
  absl::StrAppend(&src, R"(}
template <int V>
__device__ __forceinline__ void kf_cached_out_vec(const float (&v)[V], kf_i64 c,
                                                  const KfOutParams<V>& p, const KfRowCtx& ctx,
                                                  float (&o)[V]) {
)");
  if (exp_once) {
    src += "#pragma unroll\n  for (int i = 0; i < V; ++i) o[i] = v[i] * ctx.b;\n";
  } else {
    src += chain ? "  kf_op_out_vec<V>(v, c, p.op, ctx, o);\n"
                 : "  kf_out_vec<V>(v, c, p, ctx, o);\n";
  }
  if (chain) src += "  kf_epilogue_apply<V>(p.epi, o);\n";
  return src + "}\n";
}

std::string ContextCode(const RowProblem& p) {
  std::string init = AffinePointers(p);
  if (p.op == RowOp::kGroupNorm) {
    // Channels of group g are [g * C/G, (g+1) * C/G); each holds cols / (C/G) elements.
    absl::StrAppend(&init, absl::StrFormat(R"(  const kf_i64 cg = args.inputs[0].sizes[1] / %d;
  ctx.c_first = (row %% %d) * cg;
  ctx.hw = cg > 0 ? cols / cg : 1;
  if (ctx.hw == 0) ctx.hw = 1;
  // col / hw as a multiply-shift (exact for col, hw < 2^31); wider rows through a double
  // reciprocal. A 64-bit integer division here made the output pass ~50 registers heavier.
  ctx.div32 = cols < (1ll << 31);
  if (ctx.div32) {
    ctx.hw_divisor = kf_divisor((unsigned long long)ctx.hw);
  } else {
    ctx.inv_hw = 1.0 / (double)ctx.hw;
  }
)",
                                           p.groups, p.groups));
  }
  return absl::StrCat(R"(
struct KfRowCtx {
  kf_i64 row;
  kf_i64 cols;
  float a;
  float b;
  float scale, shift;  // a two-pass softmax's exp(x - max) as ex2(x * scale + shift)
  const TW* w;
  const TB* bias;
  kf_i64 c_first;
  kf_i64 hw;
  KfDivisor hw_divisor;
  bool div32;
  double inv_hw;
)", p.chain.empty() ? "" : "  KfChain chain;\n", R"(};
__device__ __forceinline__ void kf_init_ctx(KfRowCtx& ctx, const KfArgs& args, kf_i64 row,
                                            kf_i64 cols) {
  ctx.row = row;
  ctx.cols = cols;
  ctx.a = 0.f;
  ctx.b = 0.f;
  ctx.scale = 0.f;
  ctx.shift = 0.f;
  ctx.w = nullptr;
  ctx.bias = nullptr;
  ctx.c_first = 0;
  ctx.hw = 1;
  ctx.hw_divisor = kf_divisor(1);
  ctx.div32 = false;
  ctx.inv_hw = 1.0;
)",
                      init, "}\n", p.op != RowOp::kGroupNorm ? "" : R"(
// The channel offset of column `col` within the group's row.
__device__ __forceinline__ kf_i64 kf_channel(kf_i64 col, const KfRowCtx& ctx) {
  if (ctx.div32) return (kf_i64)kf_divide((unsigned)col, ctx.hw_divisor);
  // The double quotient is within one of the exact one (col < 2^53): corrected.
  kf_i64 q = (kf_i64)((double)col * ctx.inv_hw);
  if (q * ctx.hw > col) {
    --q;
  } else if ((q + 1) * ctx.hw <= col) {
    ++q;
  }
  return q;
}
)");
}

constexpr char kNegInf[] = "__int_as_float(0xff800000)";

// A reduction's value of its statistics `s` over `count` elements, as a float expression; `f32`:
// a sum accumulated in fp32 (ReduceStatCode), whose mean scales it as eager's does.
std::string ReduceValue(RowOp op, bool f32) {
  if (op == RowOp::kSum) return "(float)s.s";
  if (op == RowOp::kMean) {
    return f32 ? "s.s * (1.f / (float)count)" : "(float)(s.s * (1.0 / (double)count))";
  }
  return "s.v";
}

// A sum or mean of terms of one sign, in fp32. Such a sum is well-conditioned: its error stays
// within about (terms per thread + log2 threads) ulps of it, as eager's fp32 accumulation's
// does, where fp64 cost each term a conversion at 16 per clock per SM on sm_90, in
// launch-bound rows (written-out RMSNorms' mean of x^2).
constexpr char kSumOfOneSign[] = R"(
// fp32 accumulation: every term is >= 0 (or NaN), so nothing cancels.
struct KfStat { float s; };
__device__ __forceinline__ KfStat kf_reduce_identity() { return {0.f}; }
__device__ __forceinline__ void kf_reduce_add(KfStat& st, float x, kf_i64 index) { st.s += x; }
__device__ __forceinline__ KfStat kf_reduce_merge(const KfStat& a, const KfStat& b) {
  return {a.s + b.s};
}
)";

}  // namespace

std::string ReduceStatCode(RowOp op, bool terms_non_negative) {
  constexpr char kStore[] = R"(
__device__ __forceinline__ void kf_reduce_store(TO* out, kf_i64 index, const KfStat& s,
                                                kf_i64 count) {
  out[index] = kf_from_float<TO>()";
  switch (op) {
    case RowOp::kSum:
    case RowOp::kMean:
      if (terms_non_negative) {
        return absl::StrCat(kSumOfOneSign, kStore, ReduceValue(op, true), ");\n}\n");
      }
      return absl::StrCat(R"(
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
)",
                          kStore, ReduceValue(op, false), R"();
}
)");
    case RowOp::kAmax:
    case RowOp::kAmin: {
      const bool is_max = op == RowOp::kAmax;
      const std::string fn = is_max ? "kf_max_nan" : "kf_min_nan";
      return absl::StrCat(R"(
// NaN-propagating extremum.
struct KfStat { float v; };
__device__ __forceinline__ KfStat kf_reduce_identity() { return {)",
                          is_max ? "__int_as_float(0xff800000)" : "__int_as_float(0x7f800000)",
                          R"(}; }
__device__ __forceinline__ void kf_reduce_add(KfStat& st, float x, kf_i64 index) {
  st.v = )",
                          fn, R"((st.v, x);
}
__device__ __forceinline__ KfStat kf_reduce_merge(const KfStat& a, const KfStat& b) {
  return {)",
                          fn, R"((a.v, b.v)};
}
)",
                          kStore, ReduceValue(op, false), R"();
}
)");
    }
    case RowOp::kArgmax:
      return R"(
// Value and index of the maximum; NaN wins, ties go to the lower index (as aten::argmax).
struct KfStat { float v; int pad; kf_i64 i; };
__device__ __forceinline__ KfStat kf_reduce_identity() {
  return {__int_as_float(0xff800000), 0, 0x7fffffffffffffffll};
}
__device__ __forceinline__ KfStat kf_reduce_merge(const KfStat& a, const KfStat& b) {
  const bool a_nan = a.v != a.v;
  const bool b_nan = b.v != b.v;
  if (a_nan || b_nan) {
    if (a_nan && b_nan) return a.i <= b.i ? a : b;
    return a_nan ? a : b;
  }
  if (a.v > b.v) return a;
  if (b.v > a.v) return b;
  return a.i <= b.i ? a : b;
}
__device__ __forceinline__ void kf_reduce_add(KfStat& st, float x, kf_i64 index) {
  st = kf_reduce_merge(st, KfStat{x, 0, index});
}
__device__ __forceinline__ void kf_reduce_store(TO* out, kf_i64 index, const KfStat& s,
                                                kf_i64 count) {
  out[index] = count > 0 ? s.i : 0;
}
)";
    default:
      return "";
  }
}

namespace {

// Output hooks without per-column parameters (kf_write_chunk loads a vector's KfOutParams
// with its inputs).
constexpr char kNoOutParams[] = R"(template <int V> struct KfOutParams {};
template <int V>
__device__ __forceinline__ void kf_out_params(kf_i64, const KfRowCtx&, KfOutParams<V>&) {}
)";

// kf_out_vec: the output hook of V elements from column c, element by element for ops
// without per-column parameters.
constexpr char kOutVecOfOut[] = R"(template <int V>
__device__ __forceinline__ void kf_out_vec(const float (&v)[V], kf_i64 c, const KfOutParams<V>&,
                                           const KfRowCtx& ctx, float (&o)[V]) {
#pragma unroll
  for (int i = 0; i < V; ++i) o[i] = kf_out(v[i], c + i, ctx);
}
)";

// kf_out_vec of the norms. Layer and RMS norm load V weights (and biases) as one vector when
// aligned instead of V scalar loads; group norm finds the channel once per vector (V
// divides the channel size whenever the row is vectorized and H*W % V == 0) with a
// multiply-shift division, and folds rstd * weight into one scale per vector: per element
// a subtract and an FMA instead of a 64-bit division and two scalar loads. The weight and bias
// are the norms' KfOutParams, loaded with the step's inputs (kf_write_chunk; with the register
// cache, in pass 0): loaded beside the store that used them, they waited out their latency one
// vector at a time.
// rstd * weight is formed when the vector is written, not when the weight is loaded: a use
// beside the load (as before) held each vector's next load back by the weight's latency.
std::string OutCode(const RowProblem& p) {
  const bool w = p.weight_input >= 0, b = p.bias_input >= 0;
  std::string out = R"(
// V per-column parameters from column c: one vector load when aligned.
template <int V, typename T>
__device__ __forceinline__ void kf_load_affine(const T* p, kf_i64 c, float (&out)[V]) {
  if (V > 1 && kf_aligned(p, V * (int)sizeof(T))) {
    kf_load<V>(p + c, out);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = kf_to_float(p[c + i]);
  }
}
)";
  if (p.op == RowOp::kGroupNorm) {
    // A vector never straddles two channels: the plan requires V to divide H*W.
    absl::StrAppend(
        &out, "template <int V> struct KfOutParams { float weight, shift; };\n",
        "template <int V>\n__device__ __forceinline__ void kf_out_params(kf_i64 c, ",
        "const KfRowCtx& ctx, KfOutParams<V>& p) {\n",
        "  const kf_i64 ch = ctx.c_first + kf_channel(c, ctx);\n",
        "  p.weight = ", w ? "kf_to_float(ctx.w[ch])" : "1.f", ";\n",
        "  p.shift = ", b ? "kf_to_float(ctx.bias[ch])" : "0.f", ";\n}\n",
        "template <int V>\n__device__ __forceinline__ void kf_out_vec(const float (&v)[V], ",
        "kf_i64, const KfOutParams<V>& p,\n    const KfRowCtx& ctx, float (&o)[V]) {\n",
        "  const float scale = ctx.b * p.weight;\n",
        "#pragma unroll\n  for (int i = 0; i < V; ++i) o[i] = fmaf(v[i] - ctx.a, scale, p.shift);\n",
        "}\n");
    return out;
  }
  if (!w && !b) {
    out += kNoOutParams;
  } else {
    absl::StrAppend(&out, "template <int V> struct KfOutParams {", w ? " float w[V];" : "",
                    b ? " float bb[V];" : "", " };\n",
                    "template <int V>\n__device__ __forceinline__ void kf_out_params(kf_i64 c, ",
                    "const KfRowCtx& ctx, KfOutParams<V>& p) {\n",
                    w ? "  kf_load_affine<V>(ctx.w, c, p.w);\n" : "",
                    b ? "  kf_load_affine<V>(ctx.bias, c, p.bb);\n" : "", "}\n");
  }
  const std::string expr = p.op == RowOp::kRmsNorm ? "v[i] * ctx.b" : "(v[i] - ctx.a) * ctx.b";
  absl::StrAppend(&out, R"(template <int V>
__device__ __forceinline__ void kf_out_vec(const float (&v)[V], kf_i64 c, const KfOutParams<V>& p,
                                           const KfRowCtx& ctx, float (&o)[V]) {
#pragma unroll
  for (int i = 0; i < V; ++i) o[i] = )",
                  expr, w ? " * p.w[i]" : "", b ? " + p.bb[i]" : "", ";\n}\n");
  return out;
}

// KfStat and the hooks of each op. `two_pass` picks the two-pass algorithm where the op has
// one (softmax: max then sum; norms: mean then squared deviations).
std::string OpCode(const RowProblem& p, bool two_pass) {
  const std::string eps = FloatLiteral(p.eps);
  switch (p.op) {
    case RowOp::kSoftmax:
    case RowOp::kLogSoftmax: {
      const std::string finish1 = p.op == RowOp::kSoftmax
                                      ? "ctx.b = KF_DIV(1.0f, s.s);"
                                      : "ctx.b = ctx.a + KF_LOG(s.s);";
      const std::string out = p.op == RowOp::kSoftmax ? "return KF_EXP(x - ctx.a) * ctx.b;"
                                                      : "return x - ctx.b;";
      if (!two_pass) {
        return absl::StrCat(R"(
// Online softmax statistics: running max m and sum s of exp(x - m).
struct KfStat { float m; float s; };
template <int P> __device__ __forceinline__ KfStat kf_identity() { return {)",
                            kNegInf, R"(, 0.f}; }
template <int P, int V>
__device__ __forceinline__ void kf_add(KfStat& st, const float (&v)[V], kf_i64 col,
                                       const KfRowCtx& ctx) {
  float m = st.m;
#pragma unroll
  for (int i = 0; i < V; ++i) m = fmaxf(m, v[i]);
  if (m == )",
                            kNegInf, R"() return;
  float s = st.s * KF_EXP(st.m - m);
#pragma unroll
  for (int i = 0; i < V; ++i) s += KF_EXP(v[i] - m);
  st.m = m;
  st.s = s;
}
template <int P> __device__ __forceinline__ KfStat kf_merge(const KfStat& a, const KfStat& b) {
  const float m = fmaxf(a.m, b.m);
  if (m == )",
                            kNegInf, R"() return {m, 0.f};
  return {m, a.s * KF_EXP(a.m - m) + b.s * KF_EXP(b.m - m)};
}
template <int P> __device__ __forceinline__ void kf_finish(const KfStat& s, KfRowCtx& ctx) {
  ctx.a = s.m;
  )",
                            finish1, R"(
}
__device__ __forceinline__ float kf_out(float x, kf_i64 col, const KfRowCtx& ctx) { )",
                            out, " }\n", kNoOutParams, kOutVecOfOut);
      }
      return absl::StrCat(R"(
// Two-pass softmax: pass 0 the max, pass 1 the sum of exp(x - max).
struct KfStat { float m; float s; };
template <int P> __device__ __forceinline__ KfStat kf_identity() { return {)",
                          kNegInf, R"(, 0.f}; }
// exp(x - max): with KF_SHIFTED_EXP, ex2(x * scale + shift) (device/softmax_exp.cuh).
__device__ __forceinline__ float kf_exp(float x, const KfRowCtx& ctx) {
#if KF_SHIFTED_EXP
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(fmaf(x, ctx.scale, ctx.shift)));
  return y;
#else
  return KF_EXP(x - ctx.a);
#endif
}
template <int P, int V>
__device__ __forceinline__ void kf_add(KfStat& st, const float (&v)[V], kf_i64 col,
                                       const KfRowCtx& ctx) {
  if (P == 0) {
#pragma unroll
    for (int i = 0; i < V; ++i) st.m = fmaxf(st.m, v[i]);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) st.s += kf_exp(v[i], ctx);
  }
}
template <int P> __device__ __forceinline__ KfStat kf_merge(const KfStat& a, const KfStat& b) {
  return {fmaxf(a.m, b.m), a.s + b.s};
}
template <int P> __device__ __forceinline__ void kf_finish(const KfStat& s, KfRowCtx& ctx) {
  if (P == 0) {
    ctx.a = s.m;
#if KF_SHIFTED_EXP
    const KfExpShift e = kf_exp_shift(s.m);
    ctx.scale = e.scale;
    ctx.shift = e.shift;
#endif
  } else {
    )",
                          finish1, R"(
  }
}
__device__ __forceinline__ float kf_out(float x, kf_i64 col, const KfRowCtx& ctx) { )",
                          p.op == RowOp::kSoftmax ? "return kf_exp(x, ctx) * ctx.b;" : out,
                          " }\n", kNoOutParams, kOutVecOfOut);
    }
    case RowOp::kLayerNorm:
    case RowOp::kGroupNorm: {
      const std::string out = OutCode(p);
      if (!two_pass) {
        return absl::StrCat(R"(
// Welford statistics: count, mean and M2, merged with Chan's formula. A thread folds in one
// vector at a time: the vector's own mean and M2 (exact enough in a few flops), then one
// Chan step with an approximate division, instead of an IEEE division per element (that
// made long rows compute-bound).
struct KfStat { float n; float mean; float m2; };
template <int P> __device__ __forceinline__ KfStat kf_identity() { return {0.f, 0.f, 0.f}; }
template <int P, int V>
__device__ __forceinline__ void kf_add(KfStat& st, const float (&v)[V], kf_i64 col,
                                       const KfRowCtx& ctx) {
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < V; ++i) sum += v[i];
  const float vmean = sum * (1.0f / V);
  float vm2 = 0.f;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const float d = v[i] - vmean;
    vm2 = fmaf(d, d, vm2);
  }
  const float n = st.n + (float)V;
  const float d = vmean - st.mean;
  const float f = __fdividef((float)V, n);
  st.mean = fmaf(d, f, st.mean);
  st.m2 += vm2 + d * d * st.n * f;
  st.n = n;
}
template <int P> __device__ __forceinline__ KfStat kf_merge(const KfStat& a, const KfStat& b) {
  const float n = a.n + b.n;
  if (n == 0.f) return a;
  const float d = b.mean - a.mean;
  const float fb = __fdividef(b.n, n);  // the IEEE division was most of a merge's latency
  return {n, a.mean + d * fb, a.m2 + b.m2 + d * d * a.n * fb};
}
template <int P> __device__ __forceinline__ void kf_finish(const KfStat& s, KfRowCtx& ctx) {
  ctx.a = s.mean;
  ctx.b = rsqrtf(fmaxf(s.n > 0.f ? s.m2 / s.n : 0.f, 0.f) + )",
                            eps, R"();
}
)",
                            out);
      }
      return absl::StrCat(R"(
// Two-pass statistics: pass 0 the mean, pass 1 the mean squared deviation.
struct KfStat { float s; };
template <int P> __device__ __forceinline__ KfStat kf_identity() { return {0.f}; }
template <int P, int V>
__device__ __forceinline__ void kf_add(KfStat& st, const float (&v)[V], kf_i64 col,
                                       const KfRowCtx& ctx) {
#pragma unroll
  for (int i = 0; i < V; ++i) {
    if (P == 0) {
      st.s += v[i];
    } else {
      const float d = v[i] - ctx.a;
      st.s += d * d;
    }
  }
}
template <int P> __device__ __forceinline__ KfStat kf_merge(const KfStat& a, const KfStat& b) {
  return {a.s + b.s};
}
template <int P> __device__ __forceinline__ void kf_finish(const KfStat& s, KfRowCtx& ctx) {
  const float n = ctx.cols > 0 ? (float)ctx.cols : 1.f;
  if (P == 0) {
    ctx.a = s.s / n;
  } else {
    ctx.b = rsqrtf(s.s / n + )",
                          eps, R"();
  }
}
)",
                          out);
    }
    case RowOp::kRmsNorm:
      return absl::StrCat(R"(
// RMS statistics: the sum of squares.
struct KfStat { float s; };
template <int P> __device__ __forceinline__ KfStat kf_identity() { return {0.f}; }
template <int P, int V>
__device__ __forceinline__ void kf_add(KfStat& st, const float (&v)[V], kf_i64 col,
                                       const KfRowCtx& ctx) {
#pragma unroll
  for (int i = 0; i < V; ++i) st.s += v[i] * v[i];
}
template <int P> __device__ __forceinline__ KfStat kf_merge(const KfStat& a, const KfStat& b) {
  return {a.s + b.s};
}
template <int P> __device__ __forceinline__ void kf_finish(const KfStat& s, KfRowCtx& ctx) {
  const float n = ctx.cols > 0 ? (float)ctx.cols : 1.f;
  ctx.b = rsqrtf(s.s / n + )",
                          eps, R"();
}
)",
                          OutCode(p));
    case RowOp::kSum:
    case RowOp::kMean:
    case RowOp::kAmax:
    case RowOp::kAmin:
    case RowOp::kArgmax:
      return absl::StrCat(ReduceStatCode(p.op, p.chain.PrologueIsNonNegative()), R"(
template <int P> __device__ __forceinline__ KfStat kf_identity() { return kf_reduce_identity(); }
template <int P, int V>
__device__ __forceinline__ void kf_add(KfStat& st, const float (&v)[V], kf_i64 col,
                                       const KfRowCtx& ctx) {
#pragma unroll
  for (int i = 0; i < V; ++i) kf_reduce_add(st, v[i], col + i);
}
template <int P> __device__ __forceinline__ KfStat kf_merge(const KfStat& a, const KfStat& b) {
  return kf_reduce_merge(a, b);
})",
                          p.broadcast ? R"(
// The row's value broadcast back: every element of the output pass is it, before the
// chain's epilogue.
template <int P> __device__ __forceinline__ void kf_finish(const KfStat& s, KfRowCtx& ctx) {
  const kf_i64 count = ctx.cols;
  ctx.a = )" + ReduceValue(p.op, p.chain.PrologueIsNonNegative()) + R"(;
}
__device__ __forceinline__ float kf_out(float, kf_i64, const KfRowCtx& ctx) { return ctx.a; }
)"
                                      : R"(
template <int P> __device__ __forceinline__ void kf_finish(const KfStat& s, KfRowCtx& ctx) {}
__device__ __forceinline__ void kf_write_row(const KfStat& s, const KfRowCtx& ctx,
                                             const KfArgs& args) {
  kf_reduce_store(reinterpret_cast<TO*>(args.outputs[0].data), kf_out_row(args, ctx.row, 1), s,
                  ctx.cols);
}
)",
                          kNoOutParams, p.broadcast ? kOutVecOfOut : "");
  }
  return "";
}

int StatBytes(RowOp op, bool two_pass) {
  switch (op) {
    case RowOp::kSoftmax: case RowOp::kLogSoftmax: return 8;
    case RowOp::kLayerNorm: case RowOp::kGroupNorm: return two_pass ? 4 : 12;
    case RowOp::kArgmax: return 16;
    case RowOp::kSum: case RowOp::kMean: return 8;
    default: return 4;
  }
}

int Log2(int64_t x) {
  int r = 0;
  while ((int64_t{1} << (r + 1)) <= x) ++r;
  return r;
}

class RowKernelGenerator : public KernelGenerator {
 public:
  RowKernelGenerator(const RowProblem& problem, const GpuModel& gpu)
      : p_(problem),
        gpu_(gpu),
        per_row_(WritesRows(problem)),
        chain_fast_math_calls_(problem.chain.FastMathCallsPerElement()),
        prologue_stream_bytes_(problem.chain.PrologueStreamBytesPerElement()) {
    std::vector<ParamDef> params = {
        {"row_threads", {"4", "8", "16", "32", "64", "128", "256", "512", "1024"},
         "threads that share one row"},
        {"rows_per_block", {"1", "2", "4", "8", "16", "32"}, "rows one block handles at once"},
        {"vec", {"1", "2", "4", "8"}, "elements per vector (16-byte loads at most)"},
    };
    if (HasAlgoChoice(p_.op)) {
      const bool softmax = UsesExp(p_.op);
      params.push_back({"algo",
                        {softmax ? "online" : "welford", "two_pass"},
                        "one pass with mergeable statistics, or two passes over the row"});
    }
    if (!per_row_) {
      std::vector<std::string> caches = {"none", "regs", "smem"};
      if (p_.chain.has_prologue()) caches.push_back("smem_f32");
      if (CanStashInOutput()) caches.push_back("output");
      params.push_back({"cache", caches,
                        "keep the row for the later passes in registers or shared memory "
                        "(smem_f32: as float, after the chain's prologue; output: an ordered "
                        "split's values after the prologue, in the output buffer)"});
      params.push_back({"reg_cache", {"8", "16", "32", "64"},
                        "elements per thread the register cache holds"});
    }
    // 32 to 256 are for a few very long rows (group norm: N * G rows of a million elements),
    // which need thousands of blocks to fill the GPU (on the H200, 32 rows split 64 ways left
    // the best group norm at 38% of the floor); clusters stop at 16.
    params.push_back({"split", {"1", "2", "4", "8", "16", "32", "64", "128", "256"},
                      "blocks that share one row"});
    std::vector<std::string> split_modes = {"scratch", "cluster", "sync", "sync_keep"};
    if (!per_row_) {
      split_modes.push_back("stream");
      split_modes.push_back("ordered");
    }
    params.push_back({"split_mode", split_modes,
                      "combine a split row through scratch (two launches; stream: three, the "
                      "output pass a pointwise launch in address order), through the "
                      "distributed shared memory of a thread-block cluster, or through "
                      "scratch in one cooperative launch whose blocks keep their chunks "
                      "(sync_keep: in L2, by eviction priorities), or in one launch that "
                      "takes the chunks in ticket order and writes each row block a few row "
                      "blocks after reading it, from L2 (ordered)"});
    if (!per_row_) {
      params.push_back({"lag_scale", LagScaleNames(),
                        "an ordered split's lag (row blocks read between a chunk's read and "
                        "its write) over the one a quarter of L2 holds"});
    }
    params.push_back({"unroll", {"1", "2", "4"}, "independent vectors in flight per thread"});
    if (HasFastMathChoice()) {
      params.push_back({"fast_math", {"0", "1"}, "approximate exp, log and division (PTX .ftz)"});
    }
    if (p_.chain.has_repeated_rows()) {
      params.push_back({"row_order", {"linear", "operand"},
                        "rows in order, or the rows that read one row of a chain operand the "
                        "value repeats (an attention mask over heads) side by side"});
    }
    // A sync split's grid is always the resident blocks. Fewer blocks, so that a sweep's
    // chunks stay in L2 for the output pass, measured 20-28% slower on every H200 group norm
    // row (docs/benchmarks/2026-12-01-h200-exhaustive-sweep-table.md).
    params.push_back({"grid", {"oneshot", "stride"},
                      "one block per row group, or about num_sms * occupancy blocks looping"});
    space_ = ParamSpace(std::move(params));
  }

  const ParamSpace& Space() const override { return space_; }

  Config Canonicalize(const Config& in) const override {
    Config c = in;
    if (c.GetInt("split") == 1) c.Set("split_mode", "scratch");
    // A split row's blocks each read a chunk of it: walking rows by a repeated operand's
    // rows would only move which chunks meet (and a sync split walks items of its own).
    if (c.GetInt("split") > 1 && p_.chain.has_repeated_rows()) c.Set("row_order", "linear");
    const bool scratch_split =
        (c.GetInt("split") > 1 && c.Get("split_mode") == "scratch") || Stream(c);
    const bool one_pass_split = scratch_split || Sync(c) || InTicketOrder(c);
    if (!per_row_) {
      if (scratch_split || (InTicketOrder(c) && c.Get("cache") != "output")) {
        c.Set("cache", "none");
      }
      if (c.Get("cache") != "regs") c.Set("reg_cache", "8");
    }
    if (!per_row_) c.Set("lag_scale", CanonicalLagScale(c));
    if (one_pass_split && HasAlgoChoice(p_.op)) {
      c.Set("algo", UsesExp(p_.op) ? "online" : "welford");
    }
    // A sync or ordered split's grid is always the resident blocks.
    if (Sync(c) || InTicketOrder(c)) c.Set("grid", "oneshot");
    // The register cache loop is fully unrolled already.
    if (!per_row_ && c.Get("cache") == "regs") c.Set("unroll", "1");
    return c;
  }

  // Whether fast math is a parameter: the op takes exps (softmax) or a stage of its chain an
  // exp, a tanh or a division (a group norm's SiLU).
  bool HasFastMathChoice() const { return UsesExp(p_.op) || chain_fast_math_calls_ > 0; }

  // Elements per vector: loads of at most 16 bytes. An output of a wider type than the input
  // (a bf16 softmax into float32) may store two 16-byte halves per vector, so that its loads
  // stay 16 bytes wide.
  int MaxVec() const {
    const int in_size = ElementSize(p_.in_dtype);
    const int out_size = per_row_ ? 0 : ElementSize(p_.out_dtype);
    const int max_store = out_size > in_size ? 32 : 16;
    return std::min(16 / in_size, out_size > 0 ? max_store / out_size : 16);
  }

  // Strided rows: the gcd of the captured call's strides between rows of input 0 and (written
  // by vectors) output 0, which a vector width must divide for every row to start aligned.
  int64_t OuterStrideMultiple() const {
    int64_t g = 0;
    auto add = [&](const KfTensor& t) {
      for (int d = 0; d < t.ndim - p_.row_dims; ++d) {
        if (t.sizes[d] > 1) g = std::gcd(g, t.strides[d]);
      }
    };
    add(p_.captured_call.inputs[0]);
    if (!per_row_) add(p_.captured_call.outputs[0]);
    return g;
  }

  // The run of columns a vector must not straddle: a row, or a group norm channel's H*W.
  int64_t VectorSpan() const {
    if (p_.op != RowOp::kGroupNorm) return p_.cols;
    const int64_t channels_per_group = std::max<int64_t>(1, p_.channels / p_.groups);
    return p_.cols / channels_per_group;
  }

  std::string Check(const Config& c) const override {
    const int rt = c.GetInt("row_threads"), rpb = c.GetInt("rows_per_block");
    const int vec = c.GetInt("vec"), split = c.GetInt("split");
    const int block = rt * rpb;
    if (block < 32 || block > 1024) {
      return absl::StrCat("block of ", block, " threads (row_threads * rows_per_block) is "
                          "outside [32, 1024]");
    }
    if (vec > MaxVec()) {
      return absl::StrCat("vec ", vec, " is over ", MaxVec(), " for these types: loads of at "
                          "most 16 bytes, stores of at most 16 (32 into a wider output type)");
    }
    if (vec > 1 && VectorSpan() % vec != 0) {
      return absl::StrCat("vec ", vec, " does not divide the ", VectorSpan(), " ",
                          p_.op == RowOp::kGroupNorm ? "elements of a channel" : "columns of a row",
                          kNoPerElementPath);
    }
    if (p_.strided_rows && split > 1) {
      return "rows read through their tensors' strides (a view) take one launch, unsplit";
    }
    if (p_.strided_rows && vec > 1 && OuterStrideMultiple() % vec != 0) {
      return absl::StrCat("vec ", vec, " does not divide ", OuterStrideMultiple(),
                          ", the strides between rows' starts", kNoPerElementPath);
    }
    const bool cluster = split > 1 && c.Get("split_mode") == "cluster";
    if (cluster && !gpu_.SupportsClusters()) {
      return absl::StrCat("thread-block clusters need sm_90 or newer; the GPU is ", gpu_.arch);
    }
    // 16 is a non-portable size (sm_90 allows it; the launcher opts in).
    if (cluster && split > 16) return "clusters of more than 16 blocks";
    if (split > 1 && c.Get("split_mode") != "cluster" && TwoPass(c)) {
      return "a row split through scratch needs one-pass statistics";
    }
    if (InTicketOrder(c) && per_row_) {
      return "an ordered split interleaves each row block's output pass with later reads: an "
             "op with an output pass";
    }
    // Every item of an ordered split pays a ticket, the block's barriers, the wait for its row
    // block and the merge of the row's partials, over one chunk of the block's: blocks of 32-128
    // threads ran 1.3-1.4x the best 256-thread config on each of the H100's three VAE group
    // norms, however split or unrolled (sessions 41-42), while the prior put them first, so
    // the models' searches measured them, marked the mode slow and never tried larger blocks.
    if (InTicketOrder(c) && block < 256) {
      return absl::StrCat("an ordered split's items need blocks of at least 256 threads (", block,
                          " here)");
    }
    // A block of several row chunks holds rows_per_block times the bytes between a chunk's read
    // and its write (the lag counts row blocks) and splits each chunk over fewer threads: 64
    // threads x 4 rows ran 1.3-1.5x 256 threads x 1 on the H100's VAE group norms (session 43's
    // searches against session 42's sweep), while the prior rated them alike.
    if (InTicketOrder(c) && c.GetInt("rows_per_block") > 1) {
      return "an ordered split's items are one row's chunks: rows_per_block 1";
    }
    if (Stream(c) && per_row_) {
      return "a stream split writes the output in a launch of its own: an op with an output "
             "pass";
    }
    if (!per_row_ && c.Get("cache") == "output" && !InTicketOrder(c)) {
      return "cache output holds the values between an ordered split's read and its write: "
             "split_mode ordered";
    }
    if (L2Keep(c) && (per_row_ || (c.Get("cache") != "none" && c.Get("cache") != "output"))) {
      return "sync_keep and ordered keep the chunks a split re-reads in L2: cache none, and an "
             "op with an output pass";
    }
    if (Sync(c) && !per_row_ && c.Get("cache") == "regs") {
      return "a sync split holds two chunks per block (one read, one written): shared memory or "
             "L2, not registers";
    }
    if (Sync(c) && split > gpu_.sm_count * ResidentBlocksPerSm(c)) {
      return absl::StrCat("a row's ", split, " blocks cannot all be resident: the GPU holds ",
                          gpu_.sm_count * ResidentBlocksPerSm(c), " blocks of ", block,
                          " threads at once");
    }
    if (cluster && block * split > 8192) {
      return "cluster of more than 8192 threads";
    }
    const int64_t chunk = Chunk(c);
    if (split > 1 && chunk < int64_t{rt} * vec) {
      return absl::StrCat("split ", split, " leaves chunks of ", chunk, " columns for ", rt,
                          " threads of ", vec, " elements");
    }
    const std::string cache = per_row_ ? "none" : c.Get("cache");
    if (cache == "regs") {
      const int cap = c.GetInt("reg_cache");
      if (cap < vec) return "register cache smaller than one vector";
      if (chunk > int64_t{rt} * cap) {
        return absl::StrCat("row chunk of ", chunk, " columns exceeds the register cache (",
                            rt, " threads x ", cap, ")");
      }
      if (cap > 4 * int64_t{chunk} / rt + 8 * vec) return "register cache far larger than the row";
    }
    if (cache == "smem_f32" && Sync(c)) {
      return "a sync split double-buffers its chunks as read (cache=smem), not as smem_f32";
    }
    if (cache == "smem" && Sync(c)) {
      if (SharedBytes(c) - StaticSharedBytes(c) > SyncSharedLimit(c)) {
        return absl::StrCat("rows of ", chunk, " columns need ", SharedBytes(c),
                            " bytes of shared memory; each of the ", ResidentBlocksPerSm(c),
                            " blocks per SM of a cooperative launch has ",
                            SyncSharedLimit(c) + StaticSharedBytes(c));
      }
    } else if (SmemCache(c)) {
      if (SharedBytes(c) > gpu_.shared_bytes_per_block_optin) {
        return absl::StrCat("rows of ", chunk, " columns need ", SharedBytes(c),
                            " bytes of shared memory; the GPU allows ",
                            gpu_.shared_bytes_per_block_optin);
      }
    }
    return "";
  }

  // The reduction scratchpads: independent of the shape.
  int64_t StaticSharedBytes(const Config& c) const {
    const int rpb = c.GetInt("rows_per_block"), rt = c.GetInt("row_threads");
    const int stat = StatBytes(p_.op, TwoPass(c));
    int64_t bytes = int64_t{rpb} * std::max(1, rt / 32) * stat;
    if (c.GetInt("split") > 1 && c.Get("split_mode") == "cluster") bytes += int64_t{rpb} * stat;
    return bytes;
  }

  int64_t SharedBytes(const Config& c) const override {
    const int rpb = c.GetInt("rows_per_block");
    int64_t bytes = StaticSharedBytes(c);
    if (SmemCache(c)) {
      // A sync split double-buffers: the chunk being read and the one being written.
      bytes += (Sync(c) ? 2 : 1) * int64_t{rpb} * Chunk(c) * SmemElementSize(c);
    }
    return bytes;
  }

  // Whether the row is kept in shared memory, and the bytes of an element there.
  bool SmemCache(const Config& c) const {
    return !per_row_ && (c.Get("cache") == "smem" || c.Get("cache") == "smem_f32");
  }
  int SmemElementSize(const Config& c) const {
    return c.Get("cache") == "smem_f32" ? 4 : ElementSize(p_.in_dtype);
  }

  double MinBytes() const override {
    const double elems = static_cast<double>(p_.rows) * p_.cols;
    double bytes = elems * ElementSize(p_.in_dtype);
    bytes += per_row_ ? p_.rows * double(ElementSize(p_.out_dtype)) : elems * ElementSize(p_.out_dtype);
    return bytes + p_.chain.OperandBytes();
  }

  double EstimateSeconds(const Config& c) const override {
    const int rt = c.GetInt("row_threads"), rpb = c.GetInt("rows_per_block");
    const int vec = c.GetInt("vec"), split = c.GetInt("split"), unroll = c.GetInt("unroll");
    const bool cluster = split > 1 && c.Get("split_mode") == "cluster";
    const bool sync = Sync(c);
    const bool scratch = split > 1 && !cluster && !sync;
    const bool two_pass = TwoPass(c);
    const std::string cache = per_row_ ? "none" : c.Get("cache");
    const int in_size = ElementSize(p_.in_dtype), out_size = ElementSize(p_.out_dtype);
    const double rows = static_cast<double>(std::max<int64_t>(1, p_.rows));
    const double cols = static_cast<double>(std::max<int64_t>(1, p_.cols));
    const double elems = rows * cols;
    const int64_t chunk = Chunk(c);
    const double row_blocks = std::ceil(rows / rpb);
    const int block = rt * rpb;
    const RegisterUse regs = EstimatedRegisters(c);
    const int64_t smem = SharedBytes(c);
    const int per_sm = std::max(1, BlocksPerSm(gpu_, block, smem, regs.allocated));
    const bool stride = c.Get("grid") == "stride";
    const double grid_x = stride ? std::min(row_blocks, double(gpu_.sm_count) *
                                                            ResidentBlocksPerSm(c))
                                 : row_blocks;
    const double iterations = std::ceil(row_blocks / grid_x);

    // Elements one thread handles per pass; idle lanes carry nothing in flight. An explicit
    // unroll of u keeps u vectors in flight; left at 1, the compiler unrolls the loop itself
    // and keeps about six (H200 sweep, 2026-12-01: unroll 1 beat 2 and 4 on the near-best
    // group norms, the opposite of what u vectors for unroll 1 predicted). A register cache's
    // fully unrolled loop interleaves its loads with the statistics: about six vectors too,
    // not the whole cache. An ordered split's item loop gets no such unroll: unroll 1 ran
    // 1.08-1.24x unroll 4 at the same split (H100, VAE group norms, 256-thread blocks,
    // 2026-12-06).
    const double per_thread = std::ceil(static_cast<double>(chunk) / rt);
    constexpr double kCompilerUnroll = 6;
    const bool compiler_unrolls = unroll == 1 && !InTicketOrder(c);
    const double flight_elems =
        cache == "regs"
            ? std::min({per_thread, double(c.GetInt("reg_cache")), kCompilerUnroll * vec})
            : std::min(per_thread, double(vec) * (compiler_unrolls ? kCompilerUnroll : unroll));
    // Re-reads of the row: hit L1/L2 while the rows in flight are small.
    // Passes that read the row (RereadsRow: a broadcast reduction's output pass may not).
    const int data_passes = (two_pass ? 2 : 1) + (RereadsRow() ? 1 : 0);
    const bool cached = cache != "none";
    // A cache after the prologue (CacheHooks) holds no raw values for an epilogue that reads
    // the row input: its output pass loads them again.
    const bool after_prologue = AfterPrologue(c);
    double rereads = cached ? 0 : data_passes - 1;
    if (after_prologue && p_.chain.EpilogueReadsStreamedInput()) rereads = 1;
    const double in_bytes = elems * in_size;
    // A pass over the row reads the input and the prologue's operands of its shape again,
    // but where a cache holds the values after the prologue: there the epilogue loads the raw
    // input alone.
    const double reread_bytes = elems * (after_prologue ? in_size : ReadBytesPerElement());
    const double out_bytes = per_row_ ? rows * out_size : elems * out_size;
    const double weight_bytes = (p_.weight_input >= 0 ? cols * ElementSize(p_.weight_dtype) : 0) +
                                (p_.bias_input >= 0 ? cols * ElementSize(p_.bias_dtype) : 0) +
                                p_.chain.OperandBytes();
    const double resident_row_bytes =
        std::min(row_blocks * split, double(gpu_.sm_count) * per_sm) * rpb * chunk * in_size;
    const double reread_in_dram = resident_row_bytes > gpu_.l2_bytes * 0.5 ? 1.0 : 0.0;

    // Instruction cost per element; exp is ~20 instructions accurate, 3 fast (kernel_source.cc).
    const bool fast = c.GetInt("fast_math") == 1;
    double per_elem_ops = 3;
    // A two-pass softmax over its register or float shared-memory cache takes one exp an
    // element (CacheHooks).
    const double exps = p_.op != RowOp::kSoftmax ? 1.2 : ExpOnce(c) ? 1 : 2;
    if (UsesExp(p_.op)) per_elem_ops += (fast ? 3 : 22) * exps;
    // The chain's exps, tanhs and divisions: ~20 instructions accurate, 3 fast (an exp's
    // ex2.approx and its scale; a division's div.approx), once an element.
    per_elem_ops += (fast ? 3 : 20) * chain_fast_math_calls_;
    // The chain's prologue runs again in each pass over the row, but where the cache holds
    // its results.
    per_elem_ops += p_.chain.PrologueOpsPerElement() * (after_prologue ? 1 : data_passes);
    // Norm statistics: an add, a subtract and an FMA per element either way; one pass adds a
    // Chan merge per vector.
    if (p_.op == RowOp::kLayerNorm || p_.op == RowOp::kGroupNorm) {
      per_elem_ops += two_pass ? 4 : 3 + 12.0 / vec;
    }
    if (p_.op == RowOp::kArgmax) per_elem_ops += 6;
    // Scalar code pays address math and a load instruction per element; affine parameters
    // are one more load each.
    per_elem_ops += vec == 1 ? 10 : vec == 2 ? 4 : 1;
    const int affine_inputs = (p_.weight_input >= 0 ? 1 : 0) + (p_.bias_input >= 0 ? 1 : 0);
    if (p_.op == RowOp::kGroupNorm) {
      // The channel and its scale once per vector when H*W is a multiple of it, else per
      // element (a multiply-shift division and the scalar loads).
      const int64_t cg = p_.channels > 0 ? std::max<int64_t>(1, p_.channels / p_.groups) : 1;
      const int64_t hw = std::max<int64_t>(1, p_.cols / cg);
      per_elem_ops += hw % vec == 0 ? (6.0 + 3 * affine_inputs) / vec : 6.0 + 3 * affine_inputs;
    } else if (!per_row_) {
      // Per-column weight and bias: one vector load each per vector.
      per_elem_ops += affine_inputs * (vec == 1 ? 3 : 1 + 2.0 / vec);
    }

    const int shuffle_steps = Log2(std::min(rt, 32));
    double reduce_cycles = 40.0 * shuffle_steps + (rt > 32 ? 120 + 4.0 * (rt / 32) : 0);
    if (cluster) reduce_cycles += 1200 + 60.0 * split;
    const double passes = two_pass ? 2 : 1;
    // A pass costs at least one DRAM round trip plus the chained loads of a long row.
    const double pass_cycles =
        900 + 500 * std::max(0.0, std::ceil(per_thread / std::max(1.0, flight_elems)) - 1);
    // Passes over a cached row wait on no DRAM round trip: the second statistics pass is a
    // few flops and a reduction, the output pass stores and L2-resident affine loads.
    const double repass_cycles = cached ? 200 : pass_cycles;
    const double out_cycles = per_row_ ? 0 : cached ? 400 : pass_cycles;
    const double block_latency =
        iterations * (pass_cycles + (passes - 1) * repass_cycles + passes * reduce_cycles +
                      out_cycles);

    if (sync) {
      return regs.SpillFactor() * SyncSeconds(c, regs.allocated, pass_cycles, reduce_cycles,
                                              per_elem_ops, flight_elems, in_bytes, out_bytes,
                                              weight_bytes);
    }
    if (InTicketOrder(c)) {
      return regs.SpillFactor() * OrderedSeconds(c, regs.allocated, pass_cycles, reduce_cycles,
                                                 per_elem_ops, flight_elems, in_bytes,
                                                 out_bytes, weight_bytes);
    }
    std::vector<LaunchCost> launches;
    LaunchCost main;
    main.blocks = grid_x * split;
    main.threads = block;
    main.shared_bytes = smem;
    main.registers = regs.allocated;
    main.bytes_in_flight_per_thread = flight_elems * in_size;
    main.ops = elems * per_elem_ops + rows * reduce_cycles * rt * passes / 8;
    main.block_latency_cycles = block_latency;
    if (cluster) {
      // A cluster's blocks meet at its barriers together: no other resident block hides their
      // wait. A second round of clusters costs a full cluster start-up and drain (two-round
      // group norm clusters ran 50-60 us where one round ran 36, H200 2026-12-01).
      main.lockstep = true;
      main.cycles_per_extra_round = 5000;
    }
    if (scratch) {
      LaunchCost partial = main;
      partial.dram_bytes = in_bytes + rows * split * 16;
      partial.ops = elems * 4;
      partial.block_latency_cycles = iterations * (pass_cycles + reduce_cycles);
      launches.push_back(partial);
      // The finishing launch re-reads the row in reverse block order: what the partial launch
      // read last is still in L2: about half of it while the output's writes evicted the
      // rest; its re-read and stores under evict_first keep more (H200, 2026-12-02: 1-7% off
      // the group norm rows' finishing launches; the prior still counts half).
      const double reread = RereadsRow() ? reread_bytes : 0;
      const double warm = std::min(reread, 0.5 * double(gpu_.l2_bytes));
      main.dram_bytes = out_bytes + rows * split * 16 + weight_bytes + reread - warm;
      main.l2_bytes = warm;
      main.block_latency_cycles = iterations * pass_cycles;
      if (per_row_) main.blocks = grid_x;
      if (Stream(c)) {
        // Each row's partials merged in a small launch, then the output pass over the tensor
        // in address order from its end: every vector a thread's own, its loads all issued at
        // once, and a few registers (no statistics, no reduction).
        LaunchCost stats = main;
        stats.blocks = grid_x;
        stats.dram_bytes = rows * split * 16 + rows * 8;
        stats.l2_bytes = 0;
        stats.ops = rows * split * 8;
        // A row's lanes load its partials, a few each (not a pass over a chunk).
        stats.block_latency_cycles =
            iterations * (900 + 200 * std::ceil(double(split) / rt) + reduce_cycles);
        launches.push_back(stats);
        main.blocks = std::ceil(elems / (double(block) * vec * unroll));
        main.registers = 32 + 2 * vec * unroll;
        main.bytes_in_flight_per_thread = double(vec) * unroll * in_size;
        main.block_latency_cycles = 700;  // a pointwise block, as the elementwise family's
      }
    } else {
      main.dram_bytes =
          in_bytes + out_bytes + weight_bytes + rereads * reread_bytes * reread_in_dram;
      main.l2_bytes = rereads * reread_bytes * (1 - reread_in_dram);
    }
    launches.push_back(main);
    for (LaunchCost& launch : launches) launch.dram_bytes *= WidthFactor(vec);
    double seconds = synth::EstimateSeconds(gpu_, launches);
    // Cluster scheduling granularity; 16 blocks (non-portable) must fit in one GPC.
    if (cluster) seconds *= split > 8 ? 1.10 : 1.03;
    // A pointwise output pass streams nearer DRAM's peak than a finishing loop, which the
    // bytes do not show. With the output pass on the captured geometry, measured / prior (at
    // a former 0.935) over 12 twins per group norm row ran 0.81-1.02 for stream, 0.99-1.21
    // for scratch: 0.84-0.93 stream over scratch on the fp32 rows (H200, 2026-12-02;
    // prior_ranking.py on docs/benchmarks/2026-12-02-captured-apply/call1-captured-apply-ab.tgz).
    if (Stream(c)) seconds *= 0.84;
    return regs.SpillFactor() * seconds;
  }

  // The prior of a sync split: a clearing launch, then one cooperative launch of sweeps of
  // resident blocks, each block reading one item while it writes the one before (from shared
  // memory, or from L2 while two sweeps' chunks fit in half of it). The wait for a row's last
  // block mostly hides behind the next item's reads.
  double SyncSeconds(const Config& c, int registers, double pass_cycles, double reduce_cycles,
                     double per_elem_ops, double flight_elems, double in_bytes,
                     double out_bytes, double weight_bytes) const {
    const int rt = c.GetInt("row_threads");
    const int split = c.GetInt("split"), vec = c.GetInt("vec");
    const double rows = static_cast<double>(std::max<int64_t>(1, p_.rows));
    const double elems = rows * std::max<int64_t>(1, p_.cols);
    const double items = static_cast<double>(SyncItems(c));
    const double grid = static_cast<double>(SyncGrid(c));
    const double sweeps = std::ceil(items / std::max(1.0, grid));
    const bool held = SmemCache(c);
    const double reread = RereadsRow() && !held ? elems * RereadBytesPerElement(c) : 0;
    const bool reread_in_l2 = grid * SyncItemBytes(c) <= kSyncSweepL2Share * gpu_.l2_bytes;
    constexpr double kMeetCycles = 800;  // fence, atomic, polling, the partials from L2

    LaunchCost main = ResidentLaunch(c, grid, registers, flight_elems);
    main.ops = elems * per_elem_ops + rows * split * reduce_cycles * rt / 4;
    main.lockstep = true;  // every block waits for its row's others: none hides another
    // sync_keep marks the first read's lines evict_last: where a sweep outgrows L2, a share of
    // it still is there for the re-read (H200, VAE group norms: sync_keep / sync 0.957-0.984
    // over 80 config pairs; a quarter of L2 gives the prior about twice that gain).
    const double kept = !reread_in_l2 && L2Keep(c)
                            ? std::min(reread, kSyncSweepL2Share * double(gpu_.l2_bytes))
                            : 0;
    main.dram_bytes = in_bytes + out_bytes + weight_bytes + (reread_in_l2 ? 0 : reread - kept);
    main.l2_bytes = reread_in_l2 ? reread : kept;
    main.block_latency_cycles =
        sweeps * (pass_cycles + (held ? 400 : pass_cycles) + 2 * reduce_cycles + kMeetCycles);
    main.dram_bytes *= WidthFactor(vec);
    // A sync split that holds its chunk in shared memory ran 1.2-1.4x what the model gives
    // (H200 exhaustive sweep, 2026-12-01): double-buffered chunks cost occupancy the bytes do
    // not show. One that holds nothing ran as estimated.
    const double calibration = held ? 1.3 : 1.0;
    return calibration * synth::EstimateSeconds(gpu_, {ClearLaunch(c), main});
  }

  // The prior of an ordered split: a clearing launch, then about the resident blocks taking
  // twice the items (each a chunk's read or its write) in ticket order. A write re-reads its
  // chunk from L2 where what was read since still fits: the lag's row blocks and the items
  // the other resident blocks took meanwhile (OrderedRereadInL2).
  double OrderedSeconds(const Config& c, int registers, double pass_cycles,
                        double reduce_cycles, double per_elem_ops, double flight_elems,
                        double in_bytes, double out_bytes, double weight_bytes) const {
    const int rt = c.GetInt("row_threads");
    const int split = c.GetInt("split");
    const double rows = static_cast<double>(std::max<int64_t>(1, p_.rows));
    const double elems = rows * std::max<int64_t>(1, p_.cols);
    const double tickets = 2.0 * SyncItems(c);
    const double grid = std::min(tickets, double(gpu_.sm_count) * ResidentBlocksPerSm(c));
    // The partials' fence and arrival, the write's wait and its merge of the row's partials
    // (the next ticket is fetched while an item runs), and a cost per warp of the block: an
    // item ends at barriers that wait for its slowest warp. (H100, VAE group norms, 2026-12-06:
    // blocks of 1024 threads, one an SM, ran 2.6-3.9x the prior's estimate without it; 100
    // cycles a warp ranked the three rows' 59 measured configs each best, Spearman 0.62-0.65
    // -> 0.83-0.87 with the terms below.)
    constexpr double kItemCycles = 800, kItemCyclesPerWarp = 100;
    const double warps = std::ceil(rt * c.GetInt("rows_per_block") / 32.0);

    LaunchCost main = ResidentLaunch(c, grid, registers, flight_elems);
    main.ops = elems * per_elem_ops + 2 * rows * split * reduce_cycles * rt / 4;
    // A write re-reads its input and the prologue's operands of its shape, or with
    // cache=output the values its read stored in the output buffer: from L2 as far as the
    // window fits, else from DRAM (and a stored value that left L2 first was written back).
    // Those stores' values are read only after the write's wait: an L2 round trip (~600
    // cycles) no longer hidden behind it, on every other item.
    const bool stash = c.Get("cache") == "output";
    const double reread = RereadsRow() ? elems * RereadBytesPerElement(c) : 0;
    const double in_l2 = reread * OrderedRereadInL2(c, grid);
    main.dram_bytes = in_bytes + out_bytes + weight_bytes + (reread - in_l2) * (stash ? 2 : 1);
    main.l2_bytes = in_l2 + (stash ? reread : 0);
    main.block_latency_cycles =
        std::ceil(tickets / std::max(1.0, grid)) * (pass_cycles + reduce_cycles + kItemCycles +
                                                    kItemCyclesPerWarp * warps + (stash ? 300 : 0));
    main.dram_bytes *= WidthFactor(c.GetInt("vec"));
    return OrderedWaitFactor(c, grid) * synth::EstimateSeconds(gpu_, {ClearLaunch(c), main});
  }

  // A write's row block was read about 2 * lag * split tickets before it: where that is not
  // well over the items the grid holds, writes wait for reads still in flight. H100, VAE
  // group norms at 256 threads, unroll 4 (the prior's grid 396), lag_scale swept (session 45):
  // a distance of 0.32x the grid ran 18% over the best lag, 0.48x 20%, 0.65x 7-11%, 0.97x
  // 5-18%; 1.29x and more within 1% where the window fits L2.
  static constexpr double kOrderedWaitShare = 0.3, kOrderedWaitDistance = 1.25;
  double OrderedWaitFactor(const Config& c, double grid) const {
    const double distance = 2 * OrderedLag(c) * c.GetInt("split");
    return 1 + kOrderedWaitShare *
                   std::max(0.0, 1 - distance / (kOrderedWaitDistance * std::max(1.0, grid)));
  }

  // The share of an ordered split's re-reads that L2 serves. Between a chunk's read and its
  // write come the reads and the writes of `lag` row blocks (kf_ticket_lag) and the items the
  // `grid` resident blocks hold: a grid of many small blocks holds a window of tickets that
  // outgrows L2 however short the lag. H100, VAE group norm 1x128x512x512 fp32 (2026-12-06):
  // every config of 32-128 threads a block ran 195-370 us (their windows 1.1-5.4x L2), the
  // hand-written kernel of 264 blocks of 512 threads and 64 KB items 121 us; the prior had put
  // the small blocks first. The writes pass through L2 as the reads do (but for cache=output,
  // whose write overwrites the line it re-read): Nsight Compute on the H100 (session 45) had
  // the 8 MB rows at a lag of two (a 57 MB window so counted) re-read 81% of their input from
  // DRAM, the 2 and 4 MB rows (37 MB) 7% and 16%. The window's share beyond
  // kOrderedWindowL2Share of L2 goes to DRAM.
  static constexpr double kOrderedWindowL2Share = 0.75;
  double OrderedRereadInL2(const Config& c, double grid) const {
    const double row_block_writes =
        double(RowBlockElements(c)) * (c.Get("cache") == "output" ? 0 : ElementSize(p_.out_dtype));
    const double window = OrderedLag(c) * (double(OrderedRowBlockBytes(c)) + row_block_writes) +
                          grid * double(OrderedItemBytes(c));
    return std::min(1.0, kOrderedWindowL2Share * double(gpu_.l2_bytes) / std::max(1.0, window));
  }
  int64_t RowBlockElements(const Config& c) const {
    return c.GetInt("rows_per_block") * std::max<int64_t>(1, p_.cols);
  }
  int64_t OrderedRowBlockBytes(const Config& c) const {
    return RowBlockElements(c) * RereadBytesPerElement(c);
  }
  int64_t OrderedItemBytes(const Config& c) const {
    return c.GetInt("rows_per_block") * Chunk(c) * RereadBytesPerElement(c);
  }
  // The bytes an element's write re-reads from L2 (KF_ORDERED_ELEM_BYTES): its input, and the
  // prologue's operands of its shape (a residual added before the norm), which the lag and
  // the window count: counting the input alone, the lag of a VAE's add -> div -> group norm
  // held twice the bytes it is sized for. With cache=output, the output's value alone.
  int64_t RereadBytesPerElement(const Config& c) const {
    if (!per_row_ && c.Get("cache") == "output") return ElementSize(p_.out_dtype);
    return ReadBytesPerElement();
  }
  // What a pass that applies the prologue loads an element: the input and the prologue's
  // operands of its shape (a residual added before the norm).
  int64_t ReadBytesPerElement() const { return ElementSize(p_.in_dtype) + prologue_stream_bytes_; }
  // The lag the kernel takes (kOrderedEntry), in row blocks.
  double OrderedLag(const Config& c) const {
    return static_cast<double>(OrderedLagRowBlocks(c, LagHalves(c.Get("lag_scale"))));
  }
  int64_t OrderedLagRowBlocks(const Config& c, int lag_halves) const {
    return kf_ticket_lag(SyncItems(c) / c.GetInt("split"), OrderedRowBlockBytes(c),
                         OrderedLagBytes(), lag_halves);
  }
  // The scale nearest 1 in kLagScales that gives the captured rows this config's lag (scales
  // that round to one lag, or clamp to all row blocks, are one kernel there), and 1 outside
  // an ordered split.
  const char* CanonicalLagScale(const Config& c) const {
    if (!InTicketOrder(c)) return kLagScales[kDefaultLagScale].name;
    const int64_t lag = OrderedLagRowBlocks(c, LagHalves(c.Get("lag_scale")));
    int best = -1;
    for (int i = 0; i < static_cast<int>(std::size(kLagScales)); ++i) {
      if (OrderedLagRowBlocks(c, kLagScales[i].halves) != lag) continue;
      if (best < 0 || std::abs(i - kDefaultLagScale) < std::abs(best - kDefaultLagScale)) best = i;
    }
    return kLagScales[best].name;
  }

  // A sync or ordered split's launch of `grid` resident blocks, before its bytes and work.
  LaunchCost ResidentLaunch(const Config& c, double grid, int registers,
                            double flight_elems) const {
    LaunchCost launch;
    launch.blocks = grid;
    launch.threads = c.GetInt("row_threads") * c.GetInt("rows_per_block");
    launch.shared_bytes = SharedBytes(c);
    launch.registers = registers;
    launch.bytes_in_flight_per_thread = flight_elems * ElementSize(p_.in_dtype);
    return launch;
  }

  // The launch that zeroes a sync or ordered split's counters, one per row block.
  LaunchCost ClearLaunch(const Config& c) const {
    const double row_blocks = static_cast<double>(SyncItems(c) / c.GetInt("split"));
    LaunchCost clear;
    clear.blocks = std::ceil(row_blocks / 256);
    clear.threads = 256;
    clear.dram_bytes = row_blocks * 4;
    return clear;
  }

  std::string StrategyParam() const override { return "split_mode"; }

  std::vector<Config> Seeds() const override {
    // A warp per short row, a block per long row, and a cluster for very long rows.
    std::vector<Config> seeds;
    const int max_vec = MaxVec();
    for (int rt : {32, 256, 1024}) {
      Config c;
      c.SetInt("row_threads", rt);
      c.SetInt("rows_per_block", rt >= 128 ? 1 : 4);
      c.SetInt("vec", std::min(max_vec, 8));
      if (HasAlgoChoice(p_.op)) c.Set("algo", UsesExp(p_.op) ? "online" : "welford");
      const int split = rt == 1024 ? 8 : 1;
      if (!per_row_) {
        c.Set("cache", "regs");
        c.SetInt("reg_cache", RegCacheFor(rt, split));
      }
      c.SetInt("split", split);
      c.Set("split_mode", rt == 1024 ? "cluster" : "scratch");
      c.Set("unroll", "2");
      if (HasFastMathChoice()) c.Set("fast_math", "0");
      c.Set("grid", "oneshot");
      seeds.push_back(Ordered(c));
    }
    // A softmax after a prologue (the attention chain's scale and mask): a warp a row over float
    // shared memory with fast exps, as its winners were (H200, 2026-12-04), two-pass so that its
    // exps stay there for the output pass (kSmemExpOnceAccesses).
    if (p_.op == RowOp::kSoftmax && p_.chain.has_prologue()) {
      Config c;
      c.SetInt("row_threads", 32);
      c.SetInt("rows_per_block", 1);
      c.SetInt("vec", std::min(max_vec, 8));
      c.Set("algo", "two_pass");
      c.Set("cache", "smem_f32");
      c.Set("reg_cache", "8");
      c.SetInt("split", 1);
      c.Set("split_mode", "scratch");
      c.Set("unroll", "1");
      c.Set("fast_math", "1");
      c.Set("grid", "oneshot");
      if (Check(c).empty()) seeds.push_back(Ordered(c));
    }
    if (p_.op == RowOp::kLayerNorm || p_.op == RowOp::kRmsNorm || p_.op == RowOp::kGroupNorm) {
      for (Config& c : NormSeeds(max_vec)) {
        if (Check(c).empty()) seeds.push_back(Ordered(c));
      }
    }
    if (gpu_.sm_count > 0 && p_.rows < gpu_.sm_count) {
      for (Config& c : SyncSeeds(max_vec)) {
        if (Check(c).empty()) seeds.push_back(Ordered(c));
      }
    }
    return seeds;
  }

  // Few long rows in one cooperative launch: each row split into the fewest chunks that fill
  // the GPU and fit a block's share of shared memory (then the output pass reads nothing from
  // DRAM), and the same split re-reading its chunks from L2 under eviction priorities
  // (sync_keep: faster than plain sync in 77 of 80 config pairs on the SD VAE's group norms,
  // docs/benchmarks/2026-12-02-h200-sync-keep.md).
  std::vector<Config> SyncSeeds(int max_vec) const {
    std::vector<Config> seeds;
    for (int rt : {256, 512}) {
      Config c;
      c.SetInt("row_threads", rt);
      c.SetInt("rows_per_block", 1);
      c.SetInt("vec", std::min(max_vec, 8));
      if (HasAlgoChoice(p_.op)) c.Set("algo", UsesExp(p_.op) ? "online" : "welford");
      c.Set("cache", per_row_ ? "none" : "smem");
      c.Set("reg_cache", "8");
      c.Set("split_mode", "sync");
      c.Set("unroll", "4");
      if (HasFastMathChoice()) c.Set("fast_math", "0");
      c.Set("grid", "oneshot");
      int split = 2;
      while (split < 256 && (p_.rows * split < gpu_.sm_count ||
                             (!per_row_ && !Check(WithSplit(c, split)).empty()))) {
        split *= 2;
      }
      c.SetInt("split", split);
      seeds.push_back(c);
      if (!per_row_) {
        c.Set("cache", "none");
        c.Set("split_mode", "sync_keep");
        seeds.push_back(c);
      }
    }
    // The chunks in ticket order, 32 KB each (with the prologue's operands that a write
    // re-reads beside them), blocks of 256 threads with 4 vectors a thread in flight: the
    // engine's fastest on the H100's VAE group norms (120.8 us on 1x128x512x512, 64.5 on
    // 1x256x256x256, as fast as the hand-written ticket kernel; 512-thread blocks 123.0 and
    // 67.1; docs/benchmarks/2026-12-06-session42.md). The lag the prior rates best: the
    // shortest not waited for. The 8 MB rows of 1x256x512x512 ran 251.8 us so (256 chunks, a
    // lag of one row block), 261.3 in 128 chunks at two, 287.0 in 256 at two (with the SiLU
    // after, session 45); the 2 and 4 MB rows' seeds ran their rows' best lags. After a
    // prologue with operands of the value's shape, the values after it kept in the output
    // (cache=output): the VAE's residual -> group norm -> SiLU ran 206.9 us so against the
    // stream split's 230.9 (H100, docs/benchmarks/2026-12-06-session44.md), and the searches'
    // neighbour moves do not reach that value from cache=none. Fast math where the chain has a
    // choice: the ordered configs of the VAE's group norm -> SiLU ran 0.92x their twins without
    // it (median of 10, session 44), and session 45's search of 1x256x512x512 never moved its
    // seed's fast_math=0 (271.1 us; the seed's shape with it 262.5). The 32 KB and the 4
    // vectors are the read's, which loads the prologue's operands of the value's shape beside
    // the input: a residual's chain reads 8 bytes an element, in 256 chunks of its 4 MB rows
    // with 2 vectors of each a step (188.8 us on the H100, quick pass 187.2), where 128 chunks
    // of 4 vectors, the input's sizes alone, ran 210.6 in the same sweep and the search that
    // began there ended at 205.1 (session 48).
    if (!per_row_) {
      Config c = seeds.front();
      c.SetInt("row_threads", 256);
      c.Set("cache", CanStashInOutput() ? "output" : "none");
      c.Set("split_mode", "ordered");
      const int64_t read_bytes = ReadBytesPerElement();
      c.SetInt("unroll", read_bytes >= 4 * ElementSize(p_.in_dtype)   ? 1
                         : read_bytes >= 2 * ElementSize(p_.in_dtype) ? 2
                                                                      : 4);
      if (HasFastMathChoice()) c.Set("fast_math", "1");
      int split = 2;
      const int64_t row_bytes = std::max<int64_t>(1, p_.cols) * read_bytes;
      while (split < 256 && row_bytes / split > (32 << 10)) split *= 2;
      c.SetInt("split", split);
      c.Set("lag_scale", BestLagScale(c));
      seeds.push_back(c);
    }
    return seeds;
  }

  // The lag_scale the prior rates best for `c`, the shortest of equals: the shortest lag whose
  // reads are far enough ahead of their writes not to be waited for. Scales that are one
  // kernel for the captured rows count once, by their canonical value.
  const char* BestLagScale(Config c) const {
    const char* best = kLagScales[kDefaultLagScale].name;
    double best_seconds = std::numeric_limits<double>::infinity();
    for (const LagScale& lag_scale : kLagScales) {
      const char* scale = lag_scale.name;
      c.Set("lag_scale", scale);
      if (Canonicalize(c).Get("lag_scale") != scale) continue;
      const double seconds = EstimateSeconds(c);
      if (seconds < best_seconds) {
        best = scale;
        best_seconds = seconds;
      }
    }
    return best;
  }

  static Config WithSplit(Config c, int split) {
    c.SetInt("split", split);
    return c;
  }

  // The smallest register cache that holds a thread's share of a row chunk (the largest when
  // none does: the row is then read twice).
  int RegCacheFor(int row_threads, int split) const {
    const int64_t share = (std::max<int64_t>(1, p_.cols) + int64_t{row_threads} * split - 1) /
                          (int64_t{row_threads} * split);
    for (int cap : {8, 16, 32}) {
      if (share <= cap) return cap;
    }
    return 64;
  }

  // Norm starting points for the captured shape: a row of up to ~16k elements whole in the
  // registers of one to a few warps (16-byte loads, one shuffle reduction, x read once); a
  // few long rows split over a cluster with the slices in shared memory (x read once); or,
  // when the slices do not fit on chip, split through scratch into enough blocks to fill
  // every SM several times.
  std::vector<Config> NormSeeds(int max_vec) const {
    std::vector<Config> seeds;
    const int vec = std::min(max_vec, 8);
    const bool algo = HasAlgoChoice(p_.op);
    auto base = [&](int rt, int rpb) {
      Config c;
      c.SetInt("row_threads", rt);
      c.SetInt("rows_per_block", rpb);
      c.SetInt("vec", vec);
      if (algo) c.Set("algo", "welford");
      c.Set("cache", "none");
      c.Set("reg_cache", "8");
      c.Set("split", "1");
      c.Set("split_mode", "scratch");
      c.Set("unroll", "4");
      c.Set("grid", "oneshot");
      return c;
    };
    const int64_t cols = std::max<int64_t>(1, p_.cols);
    for (int per_thread : {32, 16}) {
      int rt = 32;
      while (rt < 1024 && int64_t{rt} * per_thread < cols) rt *= 2;
      if (int64_t{rt} * per_thread < cols) break;
      Config c = base(rt, std::max(1, 128 / rt));
      c.Set("cache", "regs");
      c.SetInt("reg_cache", per_thread);
      c.Set("unroll", "1");
      seeds.push_back(c);
      if (algo) {
        c.Set("algo", "two_pass");  // exact, and the second pass is from registers
        seeds.push_back(c);
      }
    }
    const double row_blocks_wanted = 4.0 * gpu_.sm_count;
    if (p_.rows < gpu_.sm_count) {
      for (int split : {8, 16}) {
        for (int rt : {1024, 512}) {
          Config c = base(rt, 1);
          c.SetInt("split", split);
          c.Set("split_mode", "cluster");
          c.Set("cache", "smem");
          if (algo) c.Set("algo", "two_pass");
          seeds.push_back(c);
        }
      }
      int split = 1;
      while (split < 256 && p_.rows * split < row_blocks_wanted) split *= 2;
      for (int rt : {256, 512}) {
        Config c = base(rt, 1);
        c.SetInt("split", split);
        seeds.push_back(c);
      }
      // The output pass as a launch of its own, over short partial blocks: the fastest stream
      // configs of the VAE group norms had two rows of 64 threads, unroll 2, and eight
      // partials per SM (H200, 2026-12-02; 0.97x their scratch twins on 1x128x512x512).
      while (split < 256 && p_.rows * split < 2 * row_blocks_wanted) split *= 2;
      Config c = base(64, 2);
      c.SetInt("split", split);
      c.Set("split_mode", "stream");
      c.Set("unroll", "2");
      seeds.push_back(c);
    }
    return seeds;
  }

  absl::StatusOr<GeneratedKernel> Generate(const Config& c) const override {
    if (std::string why = Check(c); !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("config ", c.ToString(), ": ", why));
    }
    const int rt = c.GetInt("row_threads"), rpb = c.GetInt("rows_per_block");
    const int vec = c.GetInt("vec"), split = c.GetInt("split"), unroll = c.GetInt("unroll");
    const bool cluster = split > 1 && c.Get("split_mode") == "cluster";
    const bool sync = Sync(c);
    const bool stream = Stream(c);
    const bool ordered = InTicketOrder(c);
    const bool scratch = split > 1 && !cluster && !sync && !stream && !ordered;
    const bool two_pass = TwoPass(c);
    const std::string cache = per_row_ ? "none" : c.Get("cache");
    const int cache_code = SmemCache(c) ? 1 : cache == "regs" ? 2 : 0;
    const int cap = cache == "regs" ? c.GetInt("reg_cache") : 1;

    std::string src = SourceHeader(absl::StrCat(
        p_.chain.empty() ? RowOpName(p_.op) : p_.chain.Describe(RowOpName(p_.op)), " rows"));
    src += DevicePreamble({.fast_math = c.GetInt("fast_math") == 1, .clusters = cluster});
    absl::StrAppend(&src, "\ntypedef ", CudaType(p_.in_dtype), " TI;\n",
                    "typedef ", per_row_ && p_.op == RowOp::kArgmax ? "long long" : CudaType(p_.out_dtype), " TO;\n",
                    "typedef ", CudaType(p_.weight_input >= 0 ? p_.weight_dtype : v1::FLOAT32), " TW;\n",
                    "typedef ", CudaType(p_.bias_input >= 0 ? p_.bias_dtype : v1::FLOAT32), " TB;\n");
    absl::StrAppend(&src, "#define KF_RT ", rt, "\n#define KF_RPB ", rpb, "\n#define KF_BLOCK ",
                    rt * rpb, "\n#define KF_WARPS ", std::max(1, rt / 32), "\n#define KF_VEC ",
                    vec, "\n#define KF_CACHE ", cache_code, "\n#define KF_CAP ", cap,
                    "\n#define KF_SPLIT ", split, "\n#define KF_CLUSTER ", cluster ? 1 : 0,
                    "\n#define KF_UNROLL ", unroll, "\n#define KF_PASSES ", two_pass ? 2 : 1,
                    "\n#define KF_PER_ROW ", per_row_ ? 1 : 0,
                    "\n#define KF_MIN_BLOCKS ", sync || ordered ? ResidentBlocksPerSm(c) : 1,
                    "\n#define KF_SPLIT_MIN_BLOCKS ",
                    scratch || stream ? SplitBlocksPerSm(c) : 1, "\n#define KF_SHIFTED_EXP ",
                    ShiftedExp(c) ? 1 : 0, "\n");
    src += FastDivideSource();  // group norm's channel lookup (KfRowCtx holds a KfDivisor)
    if (ShiftedExp(c)) src += SoftmaxExpSource();  // kf_exp_shift
    if (p_.strided_rows) src += BroadcastGroupsSource();  // kf_outer_offset
    src += GeometryCode(p_);
    if (!p_.chain.empty()) src += p_.chain.DeviceCode();
    src += ContextCode(p_);
    src += WithChainHooks(p_, OpCode(p_, two_pass));
    const bool after_prologue = AfterPrologue(c);
    if (after_prologue) {
      src += CacheHooks(p_, ExpOnce(c));
    }
    const bool operand_order = c.Get("row_order") == "operand";
    if (operand_order) src += kOperandRowOrder;
    const std::string entries =
        scratch   ? kSplitEntries
        : sync    ? absl::StrCat(kSyncItems, kSyncSweepBody, kSyncClear, kSyncSweepEntry)
        : ordered ? absl::StrCat(kSyncItems, Rewritten(kSyncClear, kOrderedClearAccesses),
                                 kOrderedEntry)
                  : kSingleEntry;
    if (ordered) {
      absl::StrAppend(&src, "#define KF_ORDERED_LAG_BYTES ", OrderedLagBytes(),
                      "ll\n#define KF_ORDERED_LAG_HALVES ", LagHalves(c.Get("lag_scale")),
                      "\n#define KF_ORDERED_ELEM_BYTES ", RereadBytesPerElement(c), "ll\n");
      src += kProgrammaticLaunch;
      src += TicketOrderSource();
    }
    if (L2Keep(c)) {
      src += kL2CacheHints;
      src += Rewritten(absl::StrCat(kRowEngine, entries), kL2KeepAccesses);
    } else if (stream) {
      absl::StrAppend(&src, kL2CacheHints, kProgrammaticLaunch, kStreamHelpers,
                      Rewritten(kRowEngine, kStreamAccesses),
                      StreamCapturedCode(p_, int64_t{rt} * rpb * vec * unroll), kStreamEntries);
    } else if (scratch && !per_row_) {
      absl::StrAppend(&src, kL2CacheHints, kProgrammaticLaunch,
                      Rewritten(kRowEngine, kL2FinishAccesses),
                      Rewritten(entries, kEarlyFinishEntries));
    } else if (!per_row_) {
      src += kVectorStoreHelper;
      src += Rewritten(absl::StrCat(kRowEngine, entries), kVectorStoreAccesses);
    } else {
      src += kRowEngine;
      src += entries;
    }
    if (operand_order) src = Rewritten(std::move(src), kOperandRowOrderAccesses);
    const bool regs_after_prologue = after_prologue && cache == "regs";
    if (regs_after_prologue) src = Rewritten(std::move(src), kRegisterCacheAccesses);
    if (cache == "smem_f32") src = Rewritten(std::move(src), kSmemAfterPrologueAccesses);
    if (cache == "smem_f32" && ExpOnce(c)) src = Rewritten(std::move(src), kSmemExpOnceAccesses);
    if (cache == "output") src = Rewritten(std::move(src), kOutputStashAccesses);
    const bool captured_entry = HasCapturedEntry(c) || HasOrderedCapturedEntry(c);
    if (captured_entry) {
      absl::StrAppend(&src, CapturedArgsSource(p_.captured_call),
                      ordered ? kOrderedCapturedEntry : kCapturedSingleEntry);
    }

    PlanSpec plan;
    if (p_.op == RowOp::kGroupNorm) {
      plan.let.push_back({"ROWS", absl::StrCat("in0_size0 * ", p_.groups)});
      plan.let.push_back({"COLS", "in0_numel / max(ROWS, 1)"});
    } else {
      plan.let.push_back({"COLS", SizeProduct(0, p_.ndim - p_.row_dims, p_.ndim - 1)});
      plan.let.push_back({"ROWS", "in0_numel / max(COLS, 1)"});
    }
    plan.let.push_back({"ROW_BLOCKS", absl::StrCat("max(1, ceil_div(ROWS, ", rpb, "))")});
    plan.let.push_back({"CHUNK", absl::StrCat("ceil_div(ceil_div(COLS, ", split, "), ", vec, ") * ", vec)});
    std::string grid_x = "ROW_BLOCKS";
    if (c.Get("grid") == "stride") {
      plan.let.push_back(
          {"GRID_X", absl::StrCat("min(ROW_BLOCKS, num_sms * ", ResidentBlocksPerSm(c), ")")});
      grid_x = "GRID_X";
    }
    std::string shared = "0";
    if (SmemCache(c)) {
      const int64_t limit = sync ? SyncSharedLimit(c)
                                 : gpu_.shared_bytes_per_block_optin - StaticSharedBytes(c);
      shared = absl::StrCat("min(", sync ? 2 * rpb : rpb, " * CHUNK * ", SmemElementSize(c), ", ",
                            limit, ")");
    }
    const std::vector<int> block = {rt * rpb, 1, 1};
    if (sync || ordered) {
      // Partials, then one arrival counter per row block (an ordered split's 8-byte ticket
      // counter after them), zeroed by a clearing launch.
      plan.let.push_back({"ITEMS", absl::StrCat("ROW_BLOCKS * ", split)});
      plan.scratch_bytes = absl::StrCat("ROWS * ", split, " * ", StatBytes(p_.op, false),
                                        " + ROW_BLOCKS * 4", ordered ? " + 16" : "");
      plan.launches.push_back({"kf_rows_clear",
                               {"min(ceil_div(ROW_BLOCKS, 256), 1024)", "1", "1"},
                               {256, 1, 1},
                               "0",
                               {}});
    }
    if (sync) {
      // The grid is the resident blocks, rounded down to whole rows' worth of chunks
      // (SyncGrid).
      plan.let.push_back({"GRID", absl::StrCat("min(ITEMS, num_sms * ", ResidentBlocksPerSm(c),
                                               " / ", split, " * ", split, ")")});
      PlanLaunch launch{"kf_rows_sync", {"GRID", "1", "1"}, block, shared, {}};
      launch.cooperative = true;
      plan.launches.push_back(launch);
    } else if (ordered) {
      // A grid of the resident blocks, each taking items until the tickets run out.
      PlanLaunch launch{"kf_rows_ordered",
                        {absl::StrCat("min(2 * ITEMS, num_sms * ", ResidentBlocksPerSm(c), ")"),
                         "1", "1"},
                        block,
                        "0",
                        {}};
      launch.early_start = true;
      if (captured_entry) launch.captured_entry = "kf_rows_ordered_captured";
      plan.launches.push_back(launch);
    } else if (stream) {
      // The partials (KfStat, at most 16 bytes), then each row's two floats 16-byte aligned.
      plan.scratch_bytes = absl::StrCat("ROWS * ", split, " * 16 + ROWS * 8 + 16");
      plan.launches.push_back({"kf_rows_partial", {grid_x, std::to_string(split), "1"}, block, "0", {}});
      plan.launches.push_back({"kf_rows_stats", {grid_x, "1", "1"}, block, "0", {}});
      plan.launches.push_back(
          {"kf_rows_apply",
           {absl::StrCat("max(1, ceil_div(COLS, ", int64_t{rt} * rpb * vec * unroll, "))"),
            "max(1, min(ROWS, 65535))", "1"},
           block, "0", {}});
      plan.launches[1].early_start = plan.launches[2].early_start = true;
    } else if (scratch) {
      plan.scratch_bytes = absl::StrCat("ROWS * ", split, " * ", StatBytes(p_.op, false) > 8 ? 16 : StatBytes(p_.op, false));
      plan.launches.push_back({"kf_rows_partial", {grid_x, std::to_string(split), "1"}, block, "0", {}});
      plan.launches.push_back({"kf_rows_finish",
                               {grid_x, per_row_ ? "1" : std::to_string(split), "1"}, block, "0", {}});
      plan.launches[1].early_start = !per_row_;  // per-row ops' finishing launch never waits
    } else {
      PlanLaunch launch{"kf_rows", {grid_x, std::to_string(split), "1"}, block, shared, {}};
      if (cluster) launch.cluster = {1, split, 1};
      if (captured_entry) launch.captured_entry = "kf_rows_captured";
      plan.launches.push_back(launch);
    }
    plan.contiguous = !p_.strided_rows;
    plan.alignment_bytes =
        vec > 1 ? vec * std::max({ElementSize(p_.in_dtype), per_row_ ? 0 : ElementSize(p_.out_dtype),
                                  p_.chain.MaxVectorElementSize()})
                : 0;
    if (captured_entry) {
      plan.captured = CapturedCall{p_.captured_call.shape_key, std::max(plan.alignment_bytes, 1)};
    }
    if (vec > 1) {
      plan.multiple_of.push_back({p_.op == RowOp::kGroupNorm
                                      ? "in0_numel / max(in0_size0 * in0_size1, 1)"
                                      : "COLS",
                                  vec});
    }
    if (p_.strided_rows && vec > 1) {
      // Every row starts aligned (OuterStrideMultiple): the stride of each outer dim that is
      // not of size 1 (whose stride means nothing).
      for (int d = 0; d < p_.ndim - p_.row_dims; ++d) {
        for (const char* t : {"in0", "out0"}) {
          if (per_row_ && t == std::string_view("out0")) continue;
          plan.multiple_of.push_back(
              {absl::StrCat(t, "_stride", d, " * min(", t, "_size", d, " - 1, 1)"), vec});
        }
      }
    }
    return GeneratedKernel{std::move(src), PlanJson(plan)};
  }

 private:
  bool TwoPass(const Config& c) const { return c.Get("algo") == "two_pass"; }

  // On the DRAM bytes of a launch reading `vec` elements per access: 16-byte accesses move a
  // row with half the load/store instructions of 8-byte ones; a small edge, but it breaks ties
  // between configs that differ only in vec.
  double WidthFactor(int vec) const {
    const int bytes = vec * ElementSize(p_.in_dtype);
    return AccessWidthPenalty(bytes) * (bytes < 16 ? 1.04 : 1.0);
  }

  // A cooperative split: sync, or sync_keep (L2 eviction priorities on its re-read chunks).
  bool Sync(const Config& c) const {
    return c.GetInt("split") > 1 &&
           (c.Get("split_mode") == "sync" || c.Get("split_mode") == "sync_keep");
  }
  // Chunks re-read from L2 under eviction priorities (kL2KeepAccesses): sync_keep, ordered.
  bool L2Keep(const Config& c) const {
    return (Sync(c) && c.Get("split_mode") == "sync_keep") || InTicketOrder(c);
  }
  // Whether the cache holds the values after the chain's prologue (CacheHooks): smem_f32, and
  // regs unless the epilogue reads the row input itself, whose values the register cache then
  // holds as read (a written-out RMSNorm's x, not x^2), so the row is read once.
  bool AfterPrologue(const Config& c) const {
    const std::string cache = per_row_ ? "none" : c.Get("cache");
    return cache == "smem_f32" || cache == "output" ||
           (cache == "regs" && !p_.chain.EpilogueReadsStreamedInput());
  }
  // Whether an ordered split may keep the values after the chain's prologue in the output
  // buffer (cache=output, kOutputStashAccesses): a prologue with operands of the value's shape,
  // whose values a float output holds exactly, and an epilogue that does not read the input.
  bool CanStashInOutput() const {
    return !per_row_ && prologue_stream_bytes_ > 0 && p_.out_dtype == v1::FLOAT32 &&
           !p_.chain.EpilogueReadsStreamedInput();
  }
  // Whether the output pass reads the row again: not where one value per row is written, nor
  // where a reduction is broadcast back and its epilogue does not read the row input (its
  // output pass reads the epilogue's operands only; the row's loads, unused, are dead code).
  bool RereadsRow() const {
    return !per_row_ && (!p_.broadcast || p_.chain.EpilogueReadsStreamedInput());
  }
  // A two-pass softmax whose cache holds the values after the prologue: its second pass leaves
  // exp(x - max) there and the output pass multiplies (CacheHooks, kSmemExpOnceAccesses).
  bool ExpOnce(const Config& c) const {
    return p_.op == RowOp::kSoftmax && TwoPass(c) && AfterPrologue(c);
  }
  // A fast-math two-pass softmax into a 16-bit output takes exp(x - max) as one FFMA before
  // the ex2 (kf_exp).
  bool ShiftedExp(const Config& c) const {
    return p_.op == RowOp::kSoftmax && TwoPass(c) && c.GetInt("fast_math") == 1 &&
           ElementSize(p_.out_dtype) == 2;
  }
  // A split whose blocks take the sync split's items in ticket order (kOrderedEntry).
  bool InTicketOrder(const Config& c) const {
    return c.GetInt("split") > 1 && c.Get("split_mode") == "ordered";
  }
  // A scratch split whose output pass is a pointwise launch of its own.
  bool Stream(const Config& c) const {
    return c.GetInt("split") > 1 && c.Get("split_mode") == "stream";
  }

  int Registers(const Config& c) const {
    int regs = 40 + 2 * c.GetInt("vec") * c.GetInt("unroll") + (TwoPass(c) ? 4 : 0);
    if (!per_row_ && c.Get("cache") == "regs") regs += c.GetInt("reg_cache");
    return regs;
  }

  // What the prior assumes a kernel gets: the registers it wants (a register cache costs
  // about two per entry: ptxas on the H200 gave group norm's 64-entry caches 202-255) within
  // what its __launch_bounds__ minimum of blocks per SM leaves; above that it spills, at a
  // cost in proportion.
  struct RegisterUse {
    int allocated = 0;
    int spilled = 0;
    double SpillFactor() const { return 1.0 + double(spilled) / std::max(allocated, 1); }
  };
  RegisterUse EstimatedRegisters(const Config& c) const {
    const int wanted =
        HasCapturedEntry(c)
            ? CapturedEntryRegisters(c)
            : Registers(c) + (!per_row_ && c.Get("cache") == "regs" ? c.GetInt("reg_cache") : 0);
    const int block = c.GetInt("row_threads") * c.GetInt("rows_per_block");
    const int min_blocks = Sync(c) || InTicketOrder(c)         ? ResidentBlocksPerSm(c)
                           : c.GetInt("split") > 1 && c.Get("split_mode") != "cluster"
                               ? SplitBlocksPerSm(c)
                               : 1;
    const int cap = std::min(
        255, gpu_.registers_per_sm / (std::max(1, (block + 31) / 32 * 32) * min_blocks) / 8 * 8);
    RegisterUse use;
    use.allocated = std::min(wanted, cap);
    use.spilled = std::max(0, wanted - cap);
    return use;
  }

  // Whether the kernel has an entry compiled for the captured call's geometry, which its plan
  // launches for that call: one launch without a scratch, sync, ordered or stream split.
  bool HasCapturedEntry(const Config& c) const {
    const bool one_launch = c.GetInt("split") == 1 || c.Get("split_mode") == "cluster";
    return one_launch && !Sync(c) && !InTicketOrder(c) && !Stream(c) &&
           p_.captured_call.num_inputs > 0;
  }
  // Whether an ordered split's item launch has an entry compiled for the captured call's
  // geometry (kOrderedCapturedEntry), which its plan launches for that call.
  bool HasOrderedCapturedEntry(const Config& c) const {
    return InTicketOrder(c) && p_.captured_call.num_inputs > 0;
  }

  // The registers of a captured entry, compiled for the captured row length: its loops have
  // exact trip counts, so only the elements a thread holds stay live, in its register cache
  // or its vectors in flight, about two registers each, beside fewer for the geometry. (ptxas,
  // sm_90, 70 sampled configs of five rows: 26-42 for most where the generic entry's estimate
  // said 42-112, e.g. 30 for Qwen3's q-norm at 16 threads a row, not 64, which put its fastest
  // config, one wave of 256-thread blocks, at two waves and 352nd in the prior; now 77th.
  // docs/benchmarks/2026-12-05-session39.md.)
  int CapturedEntryRegisters(const Config& c) const {
    const int64_t rt = c.GetInt("row_threads"), vec = c.GetInt("vec");
    const int64_t per_thread = (Chunk(c) + rt * vec - 1) / (rt * vec) * vec;
    const int64_t held = !per_row_ && c.Get("cache") == "regs" ? c.GetInt("reg_cache")
                                                               : vec * c.GetInt("unroll");
    return 24 + 2 * static_cast<int>(std::min(held, per_thread)) + (TwoPass(c) ? 4 : 0);
  }

  // Blocks per SM the launches of a scratch split are compiled for: registers for a step's
  // KF_UNROLL vectors and the finishing launch's output parameters, no more. Left free, ptxas
  // gave a group norm's finishing launch 80-128 registers and the SM a quarter of its
  // threads. The estimate is rough: it caps a bf16 finish of unroll 2 at 64 registers, which
  // spills (2026-12-01-h200-engine-registers-and-reuse.md).
  int SplitBlocksPerSm(const Config& c) const {
    const int block = c.GetInt("row_threads") * c.GetInt("rows_per_block");
    const int registers = (40 + c.GetInt("unroll") * (c.GetInt("vec") + 2) + 7) / 8 * 8;
    return std::clamp(gpu_.registers_per_sm / (block * std::min(registers, 255)), 1,
                      gpu_.max_threads_per_sm / block);
  }

  // Resident blocks per SM by threads, the reduction scratchpads and the register estimate,
  // without a row cache in shared memory, whose size depends on the shape (plans must not).
  // A stride grid is sized for it, by the plan and by the prior alike. A sync split is
  // compiled for it (its __launch_bounds__ minimum, so the registers cannot make it fewer)
  // and launched with it. (Capping registers at 64 to fit 1024 threads per SM made the
  // H200's best group norm sync split 1.45x slower, 2026-12-01.)
  int ResidentBlocksPerSm(const Config& c) const {
    const int block = c.GetInt("row_threads") * c.GetInt("rows_per_block");
    return std::max(1, BlocksPerSm(gpu_, block, StaticSharedBytes(c), Registers(c)));
  }

  // A sync split's items (row block, chunk), the bytes of one, and its grid: every resident
  // block, rounded down to whole rows' worth of chunks. The plan computes the same from the
  // tensor's sizes. A sweep's chunks are re-read from L2 while they fit in this share of it
  // (two sweeps' reads and the writes share it). Every resident block (rows straddling two
  // sweeps), splits of 512 and 1024 and the row's last block merging its partials once ran
  // 1-5% slower on the H200's group norms (2026-12-01-h200-sync-splits-and-models.md).
  static constexpr double kSyncSweepL2Share = 0.25;
  // An ordered split's lag, the reads and writes between a chunk's read and its re-read: this
  // share of L2 (by hand on the H200's VAE group norms, 16 MB of its 60 beat 8 and 32-64).
  static constexpr double kOrderedLagL2Share = 0.25;
  // lag_scale: the lag above, rounded to row blocks, times one of these (rounded half up).
  // The kernel takes the scale in halves (KF_ORDERED_LAG_HALVES), an integer.
  struct LagScale {
    const char* name;
    int halves;
  };
  static constexpr LagScale kLagScales[] = {{"0.5", 1}, {"1", 2}, {"1.5", 3}, {"2", 4}};
  static constexpr int kDefaultLagScale = 1;
  static std::vector<std::string> LagScaleNames() {
    std::vector<std::string> names;
    for (const LagScale& s : kLagScales) names.push_back(s.name);
    return names;
  }
  // A config's values are the space's: its name is one of kLagScales'.
  static int LagHalves(std::string_view scale) {
    for (const LagScale& s : kLagScales) {
      if (scale == s.name) return s.halves;
    }
    return kLagScales[kDefaultLagScale].halves;
  }
  int64_t OrderedLagBytes() const {
    return static_cast<int64_t>(kOrderedLagL2Share * gpu_.l2_bytes);
  }
  int64_t SyncItems(const Config& c) const {
    const int64_t rpb = c.GetInt("rows_per_block");
    return (std::max<int64_t>(1, p_.rows) + rpb - 1) / rpb * c.GetInt("split");
  }
  int64_t SyncItemBytes(const Config& c) const {
    return c.GetInt("rows_per_block") * Chunk(c) * ElementSize(p_.in_dtype);
  }
  int64_t SyncGrid(const Config& c) const {
    const int split = c.GetInt("split");
    return std::min(SyncItems(c), int64_t{gpu_.sm_count} * ResidentBlocksPerSm(c) / split * split);
  }

  // Dynamic shared memory each block of a sync split may use: its share of the SM.
  int64_t SyncSharedLimit(const Config& c) const {
    const int64_t share = gpu_.shared_bytes_per_sm / ResidentBlocksPerSm(c) - 1024;
    return std::min(share, gpu_.shared_bytes_per_block_optin) - StaticSharedBytes(c);
  }

  int64_t Chunk(const Config& c) const {
    const int64_t split = std::max(1, c.GetInt("split"));
    const int64_t vec = std::max(1, c.GetInt("vec"));
    const int64_t per = (p_.cols + split - 1) / split;
    return (per + vec - 1) / vec * vec;
  }

  // Puts a config's values in the space's parameter order.
  Config Ordered(const Config& c) const {
    std::vector<std::pair<std::string, std::string>> values;
    for (const ParamDef& param : space_.params()) values.emplace_back(param.name, c.Get(param.name));
    return Canonicalize(Config(std::move(values)));
  }

  RowProblem p_;
  GpuModel gpu_;
  bool per_row_;
  // The chain's per-element figures the prior reads for every config it scores, scanned once.
  int chain_fast_math_calls_;  // PointwiseChain::FastMathCallsPerElement
  int prologue_stream_bytes_;  // PointwiseChain::PrologueStreamBytesPerElement
  ParamSpace space_;
};

}  // namespace

bool WritesRows(const RowProblem& p) {
  const bool reduction = p.op == RowOp::kSum || p.op == RowOp::kMean || p.op == RowOp::kAmax ||
                         p.op == RowOp::kAmin || p.op == RowOp::kArgmax;
  return reduction && !p.broadcast;
}

std::string RowOpName(RowOp op) {
  switch (op) {
    case RowOp::kSoftmax: return "softmax";
    case RowOp::kLogSoftmax: return "log_softmax";
    case RowOp::kLayerNorm: return "layer_norm";
    case RowOp::kRmsNorm: return "rms_norm";
    case RowOp::kGroupNorm: return "group_norm";
    case RowOp::kSum: return "sum";
    case RowOp::kMean: return "mean";
    case RowOp::kAmax: return "amax";
    case RowOp::kAmin: return "amin";
    case RowOp::kArgmax: return "argmax";
  }
  return "?";
}

std::unique_ptr<KernelGenerator> MakeRowKernelGenerator(const RowProblem& problem,
                                                        const GpuModel& gpu) {
  return std::make_unique<RowKernelGenerator>(problem, gpu);
}

}  // namespace kforge::synth
