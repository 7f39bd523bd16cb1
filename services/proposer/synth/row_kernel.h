// RowKernelGenerator: the row engine behind the rowwise, group_norm, reduction (over
// trailing dims) and global-pooling kernels. A "row" is a contiguous run of COLS elements;
// each op folds a row into statistics (max+sum, Welford mean/M2, sum of squares, sum, max,
// argmax...) and then writes either every element (softmax, norms) or one value per row
// (reductions). Parameters: threads per row, rows per block, vector width, one-pass vs
// two-pass, register / shared-memory row caching, splitting a row across blocks (scratch,
// two launches; or one cooperative launch whose blocks meet at a counter) or across a
// thread-block cluster (distributed shared memory), unroll, fast-math intrinsics, one-shot vs
// grid-stride grid.
#pragma once

#include <memory>
#include <string>

#include "common/kforge_device.h"
#include "kforge/v1/common.pb.h"
#include "services/proposer/synth/family.h"
#include "services/proposer/synth/pointwise_chain.h"

namespace kforge::synth {

enum class RowOp {
  kSoftmax,
  kLogSoftmax,
  kLayerNorm,
  kRmsNorm,
  kGroupNorm,
  kSum,
  kMean,
  kAmax,
  kAmin,
  kArgmax,
};

// What the row engine needs to know about one target.
struct RowProblem {
  RowOp op = RowOp::kSoftmax;
  v1::DType in_dtype = v1::FLOAT32;
  v1::DType out_dtype = v1::FLOAT32;
  int weight_input = -1;  // index into KfArgs.inputs, -1 when absent
  int bias_input = -1;
  v1::DType weight_dtype = v1::FLOAT32;
  v1::DType bias_dtype = v1::FLOAT32;
  double eps = 0;
  // Rows are the trailing `row_dims` dims of input 0 (ignored for group norm).
  int row_dims = 1;
  // Input 0 or output 0 is a view whose rows are dense but not adjacent (RequireDenseRows):
  // the kernel finds each row through the outer dims' strides, one launch, unsplit.
  bool strided_rows = false;
  int ndim = 1;
  int64_t groups = 1;  // group norm: num_groups
  int64_t channels = 0;  // group norm: C of the captured shape (the prior, the captured path)
  // The captured shape, for the prior and the checks (and a stream split's captured path).
  int64_t rows = 1;
  int64_t cols = 1;
  // The captured call (CapturedCallArgs; no inputs: none): single-launch kernels get a
  // captured entry on its shapes as constants, and a stream split's output pass tests its
  // shape key to take its fast path with the captured geometry as constants.
  KfArgs captured_call{};
  // A chain target's elementwise nodes before and after the op: applied to every value read
  // of input 0 and every value written (empty for a single op).
  PointwiseChain chain;
  // A reduction (sum, mean, amax, amin) whose result a chain broadcasts back over its row
  // (keepdim, then an epilogue of the row's shape: RMSNorm written as pow, mean, add, rsqrt,
  // mul): every element is written, the row's statistic being the epilogue's value.
  bool broadcast = false;
};

// Whether the op writes one value per row (a reduction not broadcast back), not every element.
bool WritesRows(const RowProblem& p);
std::string RowOpName(RowOp op);

// Device code of a reduction's statistics (sum, mean, amax, amin, argmax), shared by the row
// engine and the column reduction: struct KfStat, kf_reduce_identity(),
// kf_reduce_add(KfStat&, float x, kf_i64 index), kf_reduce_merge(a, b) and
// kf_reduce_store(TO* out, kf_i64 index, const KfStat&, kf_i64 count). Needs typedef TO.
// `terms_non_negative`: every term is >= 0 or NaN (PointwiseChain::PrologueIsNonNegative), so
// a sum or mean accumulates in fp32; else in fp64, which keeps the low digits of a long row of
// values that nearly cancel.
std::string ReduceStatCode(RowOp op, bool terms_non_negative);

std::unique_ptr<KernelGenerator> MakeRowKernelGenerator(const RowProblem& problem,
                                                        const GpuModel& gpu);

}  // namespace kforge::synth
