// PointwiseChain: the elementwise nodes of a chain target around its anchor (its one row-wise
// or normalization node), as device code the anchor's engine applies to every value it reads
// of the target's first input (the prologue) and to every value it writes (the epilogue). So
// `softmax(scores * scale + mask).to(bf16)` reads the scores once and writes once, and a batch
// norm's residual add and ReLU cost no pass of their own. Every op the elementwise family
// computes can be a stage: its arithmetic is that family's (BindPointwiseStage).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kforge/v1/common.pb.h"

namespace kforge::synth {

// One elementwise node of a chain.
struct PointwiseStage {
  std::string name;  // "mul", "relu", "to bfloat16"
  // Statements of `float f(float a, float b)` that return the node's value (OpBody).
  std::string body;
  int operand = -1;          // the target input that is the op's other tensor, -1: none
  bool value_is_b = false;   // the chained value is the body's b (the operand its a)
  v1::DType value_dtype = v1::FLOAT32;  // the value's dtype after the node
  double math_ops = 2;       // arithmetic per element, for the prior
  // Every value it yields is >= 0 or NaN, whatever it is given (x^2, |x|, exp, relu).
  bool non_negative = false;
  // A conversion: the value keeps its sign (a non-negative value stays one).
  bool keeps_sign = false;
};

// Node `index` of `target` as a stage whose chained value (the previous node's output) has
// dtype `value_dtype`; a refusal says which op or argument the family does not cover.
// Implemented by the elementwise family, which owns each op's arithmetic.
absl::StatusOr<PointwiseStage> BindPointwiseStage(const v1::Target& target, int index,
                                                  v1::DType value_dtype);

// Calls to exp, tanh or a division in `stage`'s body (KF_EXP, KF_TANH, KF_DIV), which an
// engine's fast math (kernel_source.cc's kFast) replaces with approximate instructions.
int FastMathCalls(const PointwiseStage& stage);

// `__device__ float name(float a, float b)` computing `stage` (its value's type is TO inside,
// for the bodies that round to it).
std::string StageFunction(const PointwiseStage& stage, const std::string& name);

// How a stage's operand is read at element e of the value.
enum class OperandLayout {
  kOne,   // one element: every e reads it
  kFlat,  // the value's shape: element e
  kRows,  // dense, spanning whole rows of the anchor and repeated over the leading dims: e % numel
  // dense, each element spread over the value's innermost dims where it has size 1, repeated
  // over the leading dims (a per-channel bias): (e / inner) % numel (device/spread_operand.cuh)
  kSpread,
};

struct ChainOperand {
  int input = 0;  // target input
  v1::DType dtype = v1::FLOAT32;
  OperandLayout layout = OperandLayout::kFlat;
  int64_t numel = 0;
};

class PointwiseChain {
 public:
  PointwiseChain() = default;

  // Nodes [0, anchor) of `target` as the prologue, (anchor, end] as the epilogue. The chain
  // must stream the target's input 0 into the anchor and end at its one output; every other
  // operand is a number, one element, a tensor of the value's shape, or, where the anchor has
  // rows (`row_cols` > 0 elements each), a dense tensor of whole rows repeated over the
  // leading dims (an attention mask over heads) or one whose innermost dims are 1 (a
  // per-channel bias, kSpread). `anchor_dtype`: the dtype of the anchor's output.
  static absl::StatusOr<PointwiseChain> Bind(const v1::Target& target, int anchor,
                                             int64_t row_cols, v1::DType anchor_dtype);

  bool empty() const { return prologue_.empty() && epilogue_.empty(); }
  bool has_prologue() const { return !prologue_.empty(); }
  bool has_epilogue() const { return !epilogue_.empty(); }

  // Device code, after the preamble (and fast_divide.cuh, where rows are): struct KfChain;
  // kf_chain_init(KfChain&, const KfArgs&, kf_i64 row, kf_i64 cols) (element e of column c of
  // row `row` is row * cols + c; an engine without rows passes 0, 0 and c = e);
  // KfProOperands<V> and KfEpiOperands<V>, the operands of V elements loaded by
  // kf_prologue_load / kf_epilogue_load<V>(const KfChain&, kf_i64 c, ops&) and applied by
  // kf_prologue_apply / kf_epilogue_apply<V>(const ops&, float (&v)[V]), and, where the
  // epilogue has operands that are the streamed input (EpilogueReadsStreamedInput),
  // kf_epilogue_load_from_row<V>(const float (&r)[V], ops&), which sets them from the input's
  // values r at those elements. Vector loads: the engine's V elements are contiguous and
  // V-aligned in the row, KF_VEC the widest.
  std::string DeviceCode() const;

  // Whether an operand is several whole rows that the value's rows repeat (an attention mask
  // over heads; a weight of one row, which every row reads, is not). Its device code then has
  // kf_chain_period(const KfArgs&, kf_i64 cols): the rows of the first such operand, by which
  // an engine can walk the rows that read one of its rows together.
  bool has_repeated_rows() const { return repeated_rows_ >= 0; }
  // Whether an epilogue node reads the streamed input itself (the x of a written-out RMSNorm,
  // `x * rsqrt(mean(x^2) + eps)`, which the capture names once): an engine that holds the
  // input's values where it applies the epilogue passes them (kf_epilogue_load_from_row)
  // instead of loading them again.
  bool EpilogueReadsStreamedInput() const { return epilogue_reads_streamed_input_; }
  // Whether every value the prologue hands the anchor is >= 0 or NaN (it ends in x^2, |x| or
  // exp, maybe converted after): an anchor that sums them adds terms of one sign, whose sum is
  // well-conditioned.
  bool PrologueIsNonNegative() const;
  // Bytes the operands move at least (each once), beside the anchor's own.
  double OperandBytes() const;
  // The widest operand element a vector load reads (0: none read by vectors).
  int MaxVectorElementSize() const;
  // Arithmetic per element of the stages, for the prior.
  double MathOpsPerElement() const;
  // FastMathCalls of every stage, per element of the value.
  int FastMathCallsPerElement() const;
  // Bytes per element that the prologue's operands of the value's shape add to a pass over the
  // streamed input: a pass that re-reads the input (from L2) re-reads them too.
  int PrologueStreamBytesPerElement() const;
  // Instructions per element of the prologue alone (its math, a load and a conversion per
  // tensor operand), which an engine pays again in each pass that re-reads its input.
  double PrologueOpsPerElement() const;
  // "mul -> add -> [softmax] -> to bfloat16", given the anchor's name.
  std::string Describe(const std::string& anchor) const;

 private:
  struct Part {
    PointwiseStage stage;
    int operand = -1;  // index into operands_, -1: none
  };
  static bool ReadsStreamedInput(const ChainOperand& op);
  // `from_row_hook`: the name of the side's load from the row as read, or nullptr for none.
  std::string SideCode(const std::vector<Part>& side, const char* prefix,
                       const char* ops_type, const char* load, const char* apply,
                       const char* from_row_hook) const;

  std::vector<Part> prologue_, epilogue_;
  std::vector<ChainOperand> operands_;
  int repeated_rows_ = -1;  // index into operands_ of the first repeated kRows operand
  bool epilogue_reads_streamed_input_ = false;
  bool input0_strided_ = false;  // the streamed input's rows are strided (kf_in_row)
};

// The index of a chain's anchor: its one node the elementwise family does not cover; 0 for a
// single node or a chain of elementwise nodes only.
int ChainAnchor(const v1::Target& target);

}  // namespace kforge::synth
