// ReductionFamily: sum, mean, amax, amin and argmax along adjacent dims of a contiguous
// tensor. Reducing the trailing dims is a row reduction (the row engine, which also reads
// views whose rows are dense: heads normalized after a transpose); reducing middle
// dims is a column reduction: threads run along the kept inner dim, so loads are
// coalesced, and the reduced dim is shared by the threads of a block (and, split, by blocks).
// A chain whose reduction of the trailing dims is broadcast back over the row (RMSNorm
// written out) is the row engine's too, its output pass each element's epilogue.
#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "services/proposer/synth/family.h"
#include "services/proposer/synth/kernel_source.h"
#include "services/proposer/synth/pointwise_chain.h"
#include "services/proposer/synth/row_kernel.h"
#include "services/proposer/synth/target_args.h"

namespace kforge::synth {
namespace {

struct ColumnProblem {
  RowOp op = RowOp::kSum;
  v1::DType in_dtype = v1::FLOAT32;
  v1::DType out_dtype = v1::FLOAT32;
  int ndim = 1;
  int first = 0;  // reduced dims [first, last]
  int last = 0;
  // Captured shape, for the prior only.
  int64_t outer = 1, reduced = 1, inner = 1;
};

constexpr char kColumnEngine[] = R"(
__device__ __forceinline__ void kf_geometry(const KfArgs& args, kf_i64& outer, kf_i64& reduced,
                                            kf_i64& inner) {
  const KfTensor& x = args.inputs[0];
  outer = 1;
  reduced = 1;
  inner = 1;
  for (int d = 0; d < x.ndim; ++d) {
    if (d < KF_FIRST) {
      outer *= x.sizes[d];
    } else if (d <= KF_LAST) {
      reduced *= x.sizes[d];
    } else {
      inner *= x.sizes[d];
    }
  }
}

// One tile: KF_TX * V consecutive inner positions of one outer index; the KF_TY threads of a
// column share its reduced range (this block's chunk of it when split).
template <int V, bool PARTIAL>
__device__ __forceinline__ void kf_column_tile(const KfArgs& args, kf_i64 tile, kf_i64 outer,
                                               kf_i64 reduced, kf_i64 inner, kf_i64 tiles_inner,
                                               KfStat (*red)[KF_TX]) {
  const int tx = threadIdx.x % KF_TX;
  const int ty = threadIdx.x / KF_TX;
  const kf_i64 o = tile / tiles_inner;
  const kf_i64 i0 = (tile % tiles_inner) * (KF_TX * V) + (kf_i64)tx * V;
  const kf_i64 chunk = kf_ceil_div(reduced, KF_SPLIT);
  const kf_i64 r0 = min(reduced, (kf_i64)blockIdx.y * chunk);
  const kf_i64 r1 = min(reduced, r0 + chunk);
  const TI* x = reinterpret_cast<const TI*>(args.inputs[0].data) + o * reduced * inner;
  KfStat acc[V];
#pragma unroll
  for (int i = 0; i < V; ++i) acc[i] = kf_reduce_identity();
  if (i0 < inner) {
    for (kf_i64 base = r0 + ty; base < r1; base += (kf_i64)KF_TY * KF_UNROLL) {
#pragma unroll
      for (int u = 0; u < KF_UNROLL; ++u) {
        const kf_i64 r = base + (kf_i64)u * KF_TY;
        if (r < r1) {
          float v[V];
          kf_load<V>(x + r * inner + i0, v);
#pragma unroll
          for (int i = 0; i < V; ++i) kf_reduce_add(acc[i], v[i], r);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < V; ++i) {
    KfStat s = acc[i];
#if KF_TY > 1
    red[ty][tx] = s;
    __syncthreads();
    if (ty == 0) {
      for (int k = 1; k < KF_TY; ++k) s = kf_reduce_merge(s, red[k][tx]);
    }
    __syncthreads();
#endif
    if (ty == 0 && i0 + i < inner) {
      const kf_i64 index = o * inner + i0 + i;
      if (PARTIAL) {
        reinterpret_cast<KfStat*>(args.scratch.data)[(kf_i64)blockIdx.y * outer * inner + index] = s;
      } else {
        kf_reduce_store(reinterpret_cast<TO*>(args.outputs[0].data), index, s, reduced);
      }
    }
  }
}

template <bool PARTIAL>
__device__ __forceinline__ void kf_columns_body(const KfArgs& args) {
  __shared__ KfStat red[KF_TY][KF_TX];
  kf_i64 outer, reduced, inner;
  kf_geometry(args, outer, reduced, inner);
  // No per-element path: the plan requires KF_VEC to divide the inner run, and an aligned
  // input.
  const kf_i64 tiles_inner = kf_ceil_div(inner, (kf_i64)KF_TX * KF_VEC);
  const kf_i64 tiles = outer * tiles_inner;
  for (kf_i64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    kf_column_tile<KF_VEC, PARTIAL>(args, tile, outer, reduced, inner, tiles_inner, red);
  }
}
)";

constexpr char kColumnSingle[] = R"(
extern "C" __global__ void __launch_bounds__(KF_BLOCK) kf_columns(KfArgs args) {
  kf_columns_body<false>(args);
}
)";

constexpr char kColumnSplit[] = R"(
extern "C" __global__ void __launch_bounds__(KF_BLOCK) kf_columns_partial(KfArgs args) {
  kf_columns_body<true>(args);
}
// Merges the KF_SPLIT partials of each output in split order.
extern "C" __global__ void __launch_bounds__(256) kf_columns_finish(KfArgs args) {
  kf_i64 outer, reduced, inner;
  kf_geometry(args, outer, reduced, inner);
  const kf_i64 n = outer * inner;
  const KfStat* parts = reinterpret_cast<const KfStat*>(args.scratch.data);
  for (kf_i64 idx = (kf_i64)blockIdx.x * 256 + threadIdx.x; idx < n; idx += (kf_i64)gridDim.x * 256) {
    KfStat s = kf_reduce_identity();
#pragma unroll
    for (int q = 0; q < KF_SPLIT; ++q) s = kf_reduce_merge(s, parts[q * n + idx]);
    kf_reduce_store(reinterpret_cast<TO*>(args.outputs[0].data), idx, s, reduced);
  }
}
)";

int StatBytes(RowOp op) {
  if (op == RowOp::kArgmax) return 16;
  return op == RowOp::kSum || op == RowOp::kMean ? 8 : 4;
}

class ColumnReduceGenerator : public KernelGenerator {
 public:
  ColumnReduceGenerator(const ColumnProblem& p, const GpuModel& gpu) : p_(p), gpu_(gpu) {
    space_ = ParamSpace({
        {"tile_threads", {"8", "16", "32", "64", "128", "256", "512"},
         "threads along the kept inner dim"},
        {"reduce_threads", {"1", "2", "4", "8", "16", "32"},
         "threads of a block that share the reduced dim"},
        {"vec", {"1", "2", "4", "8"}, "inner elements per load (16 bytes at most)"},
        {"split", {"1", "2", "4", "8", "16", "32"},
         "blocks that share the reduced dim (partials in scratch, second launch merges)"},
        {"unroll", {"1", "2", "4"}, "independent loads in flight per thread"},
        {"grid", {"oneshot", "stride"}, "one block per tile, or num_sms * occupancy blocks"},
    });
  }

  const ParamSpace& Space() const override { return space_; }
  Config Canonicalize(const Config& c) const override { return c; }

  std::string Check(const Config& c) const override {
    const int tx = c.GetInt("tile_threads"), ty = c.GetInt("reduce_threads");
    const int block = tx * ty;
    if (block < 32 || block > 1024) {
      return absl::StrCat("block of ", block, " threads is outside [32, 1024]");
    }
    if (c.GetInt("vec") * ElementSize(p_.in_dtype) > 16) return "loads wider than 16 bytes";
    if (c.GetInt("vec") > 1 && p_.inner % c.GetInt("vec") != 0) {
      return absl::StrCat("vec ", c.GetInt("vec"), " does not divide the ", p_.inner,
                          " kept inner elements", kNoPerElementPath);
    }
    const int64_t chunk = (p_.reduced + c.GetInt("split") - 1) / c.GetInt("split");
    if (c.GetInt("split") > 1 && chunk < ty) {
      return absl::StrCat("split ", c.GetInt("split"), " leaves ", chunk,
                          " reduced elements per block for ", ty, " threads");
    }
    return "";
  }

  int64_t SharedBytes(const Config& c) const override {
    return int64_t{c.GetInt("tile_threads")} * c.GetInt("reduce_threads") * StatBytes(p_.op);
  }

  double MinBytes() const override {
    return static_cast<double>(p_.outer) * p_.reduced * p_.inner * ElementSize(p_.in_dtype) +
           static_cast<double>(p_.outer) * p_.inner * ElementSize(p_.out_dtype);
  }

  double EstimateSeconds(const Config& c) const override {
    const int tx = c.GetInt("tile_threads"), ty = c.GetInt("reduce_threads");
    const int vec = c.GetInt("vec"), split = c.GetInt("split"), unroll = c.GetInt("unroll");
    const int in_size = ElementSize(p_.in_dtype);
    const double outer = std::max<int64_t>(1, p_.outer), inner = std::max<int64_t>(1, p_.inner);
    const double reduced = std::max<int64_t>(1, p_.reduced);
    const double tile_width = double(tx) * vec;
    const double tiles = outer * std::ceil(inner / tile_width);
    const double active = std::min(1.0, inner / tile_width);
    // Short inner runs touch partly used 32-byte sectors, unless rows abut (inner <= tile).
    const double sector_efficiency =
        inner <= tile_width ? 1.0 : std::min(1.0, std::min(inner, tile_width) * in_size / 64.0);
    const double chunk = std::ceil(reduced / split);
    const int block = tx * ty;
    const int regs = 32 + vec * unroll * 2 + vec * (StatBytes(p_.op) / 4);
    const int per_sm = std::max(1, BlocksPerSm(gpu_, block, SharedBytes(c), regs));
    const double grid_x =
        c.Get("grid") == "stride" ? std::min(tiles, double(gpu_.sm_count) * per_sm) : tiles;
    const double iterations = std::ceil(tiles / grid_x);
    LaunchCost main;
    main.blocks = grid_x * split;
    main.threads = block;
    main.shared_bytes = SharedBytes(c);
    main.registers = regs;
    const double per_thread = std::ceil(chunk / ty);
    main.bytes_in_flight_per_thread =
        active * vec * in_size * std::min<double>(unroll, per_thread) * sector_efficiency;
    const double in_bytes = outer * reduced * inner * in_size;
    const double out_bytes = outer * inner * ElementSize(p_.out_dtype);
    main.dram_bytes = in_bytes / sector_efficiency * AccessWidthPenalty(vec * in_size) +
                      (split > 1 ? split * outer * inner * 16 : out_bytes);
    main.ops = outer * reduced * inner * (p_.op == RowOp::kArgmax ? 8 : 3) / active;
    main.block_latency_cycles =
        iterations * (800 + 40 * std::ceil(per_thread / unroll) + (ty > 1 ? vec * (80 + 8 * ty) : 0));
    std::vector<LaunchCost> launches = {main};
    if (split > 1) {
      LaunchCost finish;
      finish.blocks = std::ceil(outer * inner / 256);
      finish.threads = 256;
      finish.dram_bytes = split * outer * inner * 16 + out_bytes;
      finish.bytes_in_flight_per_thread = 16;
      finish.block_latency_cycles = 800;
      launches.push_back(finish);
    }
    return synth::EstimateSeconds(gpu_, launches);
  }

  absl::StatusOr<GeneratedKernel> Generate(const Config& c) const override {
    if (std::string why = Check(c); !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("config ", c.ToString(), ": ", why));
    }
    const int tx = c.GetInt("tile_threads"), ty = c.GetInt("reduce_threads");
    const int vec = c.GetInt("vec"), split = c.GetInt("split");
    std::string src = SourceHeader(
        absl::StrCat(RowOpName(p_.op), " over dims ", p_.first, "..", p_.last, " (columns)"));
    src += DevicePreamble({});
    absl::StrAppend(&src, "\ntypedef ", CudaType(p_.in_dtype), " TI;\ntypedef ",
                    p_.op == RowOp::kArgmax ? "long long" : CudaType(p_.out_dtype), " TO;\n");
    absl::StrAppend(&src, "#define KF_TX ", tx, "\n#define KF_TY ", ty, "\n#define KF_BLOCK ",
                    tx * ty, "\n#define KF_VEC ", vec, "\n#define KF_SPLIT ", split,
                    "\n#define KF_UNROLL ", c.GetInt("unroll"), "\n#define KF_FIRST ", p_.first,
                    "\n#define KF_LAST ", p_.last, "\n");
    src += ReduceStatCode(p_.op, false);
    src += kColumnEngine;
    src += split > 1 ? kColumnSplit : kColumnSingle;

    PlanSpec plan;
    plan.let = {{"OUTER", SizeProduct(0, 0, p_.first - 1)},
                {"REDUCED", SizeProduct(0, p_.first, p_.last)},
                {"INNER", SizeProduct(0, p_.last + 1, p_.ndim - 1)},
                {"TILES", absl::StrCat("max(1, OUTER * ceil_div(INNER, ", tx * vec, "))")}};
    std::string grid_x = "TILES";
    if (c.Get("grid") == "stride") {
      const int regs = 32 + vec * c.GetInt("unroll") * 2;
      const int per_sm = std::max(1, BlocksPerSm(gpu_, tx * ty, SharedBytes(c), regs));
      plan.let.push_back({"GRID_X", absl::StrCat("min(TILES, num_sms * ", per_sm, ")")});
      grid_x = "GRID_X";
    }
    const std::vector<int> block = {tx * ty, 1, 1};
    if (split > 1) {
      plan.scratch_bytes = absl::StrCat(split, " * OUTER * INNER * ", StatBytes(p_.op));
      plan.launches.push_back({"kf_columns_partial", {grid_x, std::to_string(split), "1"}, block, "0", {}});
      plan.launches.push_back({"kf_columns_finish", {"max(1, ceil_div(OUTER * INNER, 256))", "1", "1"},
                               {256, 1, 1}, "0", {}});
    } else {
      plan.launches.push_back({"kf_columns", {grid_x, "1", "1"}, block, "0", {}});
    }
    plan.alignment_bytes = vec > 1 ? vec * ElementSize(p_.in_dtype) : 0;
    if (vec > 1) plan.multiple_of.push_back({"INNER", vec});
    return GeneratedKernel{std::move(src), PlanJson(plan)};
  }

 private:
  ColumnProblem p_;
  GpuModel gpu_;
  ParamSpace space_;
};

class ReductionFamily : public Family {
 public:
  std::string Name() const override { return "reduction"; }
  std::vector<std::string> Ops() const override {
    return {"aten::sum", "aten::mean", "aten::amax", "aten::amin", "aten::argmax"};
  }

  absl::StatusOr<std::unique_ptr<KernelGenerator>> Bind(const v1::Target& target,
                                                        const GpuModel& gpu) const override {
    if (target.nodes_size() > 1) return BindBroadcastChain(target, gpu);
    KF_ASSIGN_OR_RETURN(TargetArgs args, TargetArgs::Create(target));
    KF_ASSIGN_OR_RETURN(const RowOp kind, Kind(args));
    KF_ASSIGN_OR_RETURN(int x, args.RequiredInput("self", 0));
    if (x != 0) return absl::UnimplementedError("the reduced tensor must be the first input");
    const v1::TensorSignature& in = args.input(0);
    const v1::TensorSignature& out = args.output(0);
    if (kind == RowOp::kArgmax) {
      if (out.dtype() != v1::INT64 || !IsContiguous(out)) {
        return absl::InvalidArgumentError("argmax output must be a contiguous int64 tensor");
      }
    }
    KF_ASSIGN_OR_RETURN(const ReducedDims dims, Reduced(args, kind));
    const int ndim = in.sizes_size();
    if (dims.last == ndim - 1) {  // rows: views whose rows are dense too
      KF_RETURN_IF_ERROR(RequireDenseRows(in, dims.last - dims.first + 1, "input"));
      if (kind != RowOp::kArgmax) KF_RETURN_IF_ERROR(RequireDenseRows(out, 0, "output"));
      RowProblem p = RowReduction(kind, in, out, dims);
      p.captured_call = CapturedCallArgs(target);
      return MakeRowKernelGenerator(p, gpu);
    }
    KF_RETURN_IF_ERROR(RequireDenseFloat(in, "input"));
    if (kind != RowOp::kArgmax) KF_RETURN_IF_ERROR(RequireDenseFloat(out, "output"));
    ColumnProblem p;
    p.op = kind;
    p.in_dtype = in.dtype();
    p.out_dtype = kind == RowOp::kArgmax ? v1::INT64 : out.dtype();
    p.ndim = ndim;
    p.first = dims.first;
    p.last = dims.last;
    p.outer = dims.outer;
    p.reduced = dims.size;
    p.inner = dims.inner;
    return std::unique_ptr<KernelGenerator>(std::make_unique<ColumnReduceGenerator>(p, gpu));
  }

 private:
  static absl::StatusOr<RowOp> Kind(const TargetArgs& args) {
    const std::string op = args.OpName();
    RowOp kind;
    if (op == "sum") {
      kind = RowOp::kSum;
    } else if (op == "mean") {
      kind = RowOp::kMean;
    } else if (op == "amax") {
      kind = RowOp::kAmax;
    } else if (op == "amin") {
      kind = RowOp::kAmin;
    } else if (op == "argmax") {
      kind = RowOp::kArgmax;
    } else {
      return absl::UnimplementedError(absl::StrCat("reduction family does not cover ", op));
    }
    return kind;
  }

  // The reduced dims [first, last] of the node's input (the target's first input's shape) and
  // the element counts before, within and after them.
  struct ReducedDims {
    int first = 0, last = 0;
    int64_t outer = 1, size = 1, inner = 1;
  };
  static absl::StatusOr<ReducedDims> Reduced(const TargetArgs& args, RowOp kind) {
    const v1::TensorSignature& in = args.input(0);
    const int ndim = in.sizes_size();
    if (ndim == 0) return absl::UnimplementedError("reduction of a 0-d tensor");
    // Reduced dims: the dim argument, or every dim when it is absent, None or empty.
    std::vector<int64_t> dims;
    const bool full_overload = args.node().overload().empty() && kind != RowOp::kArgmax &&
                               kind != RowOp::kAmax && kind != RowOp::kAmin;
    if (!full_overload && !args.IsNone("dim", 1)) {
      KF_ASSIGN_OR_RETURN(dims, args.IntList("dim", 1));
    }
    std::set<int> reduced;
    for (int64_t d : dims) {
      KF_ASSIGN_OR_RETURN(int nd, NormalizeDim(d, ndim));
      reduced.insert(nd);
    }
    if (reduced.empty()) {
      for (int d = 0; d < ndim; ++d) reduced.insert(d);
    }
    ReducedDims r;
    r.first = *reduced.begin();
    r.last = *reduced.rbegin();
    if (r.last - r.first + 1 != static_cast<int>(reduced.size())) {
      return absl::UnimplementedError(absl::StrCat(
          args.OpName(), " over dims [", absl::StrJoin(reduced, ","),
          "]: the reduction family covers adjacent dims only"));
    }
    for (int d = 0; d < ndim; ++d) {
      (d < r.first ? r.outer : d <= r.last ? r.size : r.inner) *= in.sizes(d);
    }
    return r;
  }

  // A reduction of the trailing dims as the row engine's problem.
  static RowProblem RowReduction(RowOp kind, const v1::TensorSignature& in,
                                 const v1::TensorSignature& out, const ReducedDims& dims) {
    RowProblem p;
    p.op = kind;
    p.in_dtype = in.dtype();
    p.out_dtype = out.dtype();
    p.ndim = in.sizes_size();
    p.row_dims = dims.last - dims.first + 1;
    p.strided_rows = !IsContiguous(in) || !IsContiguous(out);
    p.rows = dims.outer;
    p.cols = dims.size;
    return p;
  }

  // A chain around a reduction of the trailing dims that keeps them (keepdim=True) and whose
  // epilogue broadcasts the row's value back over the row, as RMSNorm written out does
  // (`x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)`): the row engine's output pass, each
  // element the row's value through the epilogue, which reads the other tensors.
  static absl::StatusOr<std::unique_ptr<KernelGenerator>> BindBroadcastChain(
      const v1::Target& target, const GpuModel& gpu) {
    const int anchor = ChainAnchor(target);
    KF_ASSIGN_OR_RETURN(TargetArgs args, TargetArgs::ForChainNode(target, anchor, 0));
    KF_ASSIGN_OR_RETURN(const RowOp kind, Kind(args));
    const std::string what = absl::StrCat("a chain around ", args.OpName());
    if (kind == RowOp::kArgmax) {
      return absl::UnimplementedError(absl::StrCat(what, ": an index is not broadcast back"));
    }
    KF_ASSIGN_OR_RETURN(int x, args.RequiredInput("self", 0));
    if (x != 0) {
      return absl::UnimplementedError(
          absl::StrCat(what, ": the reduction must read the value the chain streams"));
    }
    const v1::TensorSignature& in = args.input(0);
    const v1::TensorSignature& out = args.output(0);
    KF_ASSIGN_OR_RETURN(const ReducedDims dims, Reduced(args, kind));
    KF_RETURN_IF_ERROR(RequireDenseRows(in, dims.last - dims.first + 1, "input"));
    KF_RETURN_IF_ERROR(RequireDenseRows(out, dims.last - dims.first + 1, "output"));
    const int ndim = in.sizes_size();
    bool keepdim = false;
    if (!args.IsNone("keepdim", 2)) {
      KF_ASSIGN_OR_RETURN(keepdim, args.Bool("keepdim", 2));
    }
    if (dims.last != ndim - 1 || !keepdim || anchor + 1 == target.nodes_size() ||
        !std::equal(in.sizes().begin(), in.sizes().end(), out.sizes().begin(),
                    out.sizes().end())) {
      return absl::UnimplementedError(absl::StrCat(
          what, ": the reduction family writes chains whose reduction of the trailing dims "
          "(keepdim=True) is broadcast back to the input's shape by the nodes after it "
          "(an LLM proposer can write the chain)"));
    }
    RowProblem p = RowReduction(kind, in, out, dims);
    p.broadcast = true;
    // sum and mean of a float tensor are of its dtype unless `dtype` says otherwise.
    v1::DType anchor_dtype = in.dtype();
    if ((kind == RowOp::kSum || kind == RowOp::kMean) && !args.IsNone("dtype", 3)) {
      KF_ASSIGN_OR_RETURN(anchor_dtype, args.ScalarType("dtype", 3));
    }
    KF_ASSIGN_OR_RETURN(p.chain, PointwiseChain::Bind(target, anchor, p.cols, anchor_dtype));
    p.captured_call = CapturedCallArgs(target);
    return MakeRowKernelGenerator(p, gpu);
  }
};

}  // namespace

std::unique_ptr<Family> MakeReductionFamily() { return std::make_unique<ReductionFamily>(); }

}  // namespace kforge::synth
