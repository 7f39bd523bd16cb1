// PointwiseChain: binding a chain's elementwise nodes and their device code.
#include "services/proposer/synth/pointwise_chain.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/tensor_signature.h"
#include "services/proposer/synth/device_code.h"
#include "services/proposer/synth/family.h"
#include "services/proposer/synth/target_args.h"

namespace kforge::synth {
namespace {

bool IsElementwiseOp(const std::string& op) {
  static const std::vector<std::string>* const ops =
      new std::vector<std::string>(MakeElementwiseFamily()->Ops());
  return std::find(ops->begin(), ops->end(), op) != ops->end();
}

std::string SizesText(const v1::TensorSignature& sig) {
  return absl::StrCat("[", absl::StrJoin(sig.sizes(), ","), "]");
}

// How `operand` is read at element e of a value shaped `value` (see OperandLayout).
absl::StatusOr<OperandLayout> Layout(const v1::TensorSignature& operand,
                                     const v1::TensorSignature& value, int64_t row_cols,
                                     const std::string& what) {
  const int64_t n = Numel(operand);
  if (n == 1) {
    KF_RETURN_IF_ERROR(RequireCuda(operand, what));
    return OperandLayout::kOne;
  }
  if (operand.dtype() == v1::FLOAT64) {
    return absl::UnimplementedError(absl::StrCat(
        what, " is a float64 tensor of ", n, " elements; chains read float64 scalars only"));
  }
  KF_RETURN_IF_ERROR(RequireDense(operand, what));
  const int shift = value.sizes_size() - operand.sizes_size();
  bool same = shift >= 0, trailing = shift >= 0;
  bool leading = true;  // still among the operand's leading dims of size 1
  for (int d = 0; d < operand.sizes_size() && shift >= 0; ++d) {
    const int64_t s = operand.sizes(d), v = value.sizes(d + shift);
    if (s != v) same = false;
    if (leading && s == 1) continue;
    leading = false;
    if (s != v) trailing = false;
  }
  if (same && n == Numel(value)) return OperandLayout::kFlat;
  if (trailing && row_cols > 0 && n % row_cols == 0) return OperandLayout::kRows;
  // Spread (row engines): the value's dims where the operand's innermost are 1, the operand's
  // others its own.
  int last = operand.sizes_size() - 1;
  while (last >= 0 && operand.sizes(last) == 1) --last;
  bool spread = row_cols > 0 && shift >= 0 && last >= 0 && last < operand.sizes_size() - 1;
  leading = true;
  for (int d = 0; d <= last && spread; ++d) {
    const int64_t s = operand.sizes(d);
    if (leading && s == 1) continue;
    leading = false;
    spread = s == value.sizes(d + shift);
  }
  if (spread) return OperandLayout::kSpread;
  return absl::UnimplementedError(absl::StrCat(
      what, " ", SizesText(operand), " broadcasts over the value ", SizesText(value),
      " in a way chains do not read: an operand must be one element, the value's shape",
      row_cols > 0 ? ", dense with its innermost dims 1 (per channel), or whole rows repeated "
                     "over the leading dims"
                   : "",
      " (an LLM proposer can write the chain)"));
}

}  // namespace

int ChainAnchor(const v1::Target& target) {
  for (int i = 0; i < target.nodes_size(); ++i) {
    if (!IsElementwiseOp(target.nodes(i).op())) return i;
  }
  return 0;
}

absl::StatusOr<PointwiseChain> PointwiseChain::Bind(const v1::Target& target, int anchor,
                                                    int64_t row_cols, v1::DType anchor_dtype) {
  PointwiseChain chain;
  if (target.nodes_size() == 1) return chain;
  if (target.inputs_size() < 1 || target.outputs_size() != 1) {
    return absl::UnimplementedError(absl::StrCat(
        "a chain of ", target.outputs_size(), " outputs; chains end at one"));
  }
  if (target.nodes(anchor).outputs_size() != 1) {
    return absl::UnimplementedError(
        absl::StrCat(target.nodes(anchor).op(), " with several outputs inside a chain"));
  }
  auto bind_side = [&](int begin, int end, v1::DType dtype, const v1::TensorSignature& value,
                       std::vector<Part>& side) -> absl::Status {
    for (int i = begin; i < end; ++i) {
      KF_ASSIGN_OR_RETURN(PointwiseStage stage, BindPointwiseStage(target, i, dtype));
      Part part{stage, -1};
      if (stage.operand >= 0) {
        const v1::TensorSignature& sig = target.inputs(stage.operand);
        const std::string what =
            absl::StrCat("the operand ", target.input_names(stage.operand), " of ", stage.name);
        // The streamed input read again (x in `x * rsqrt(mean(x²))`) is read as the row
        // engine reads its rows, whose layout the family checked (RequireDenseRows).
        KF_ASSIGN_OR_RETURN(OperandLayout layout,
                            stage.operand == 0 &&
                                    std::equal(sig.sizes().begin(), sig.sizes().end(),
                                               value.sizes().begin(), value.sizes().end())
                                ? OperandLayout::kFlat
                                : Layout(sig, value, row_cols, what));
        chain.operands_.push_back({stage.operand, sig.dtype(), layout, Numel(sig)});
        part.operand = static_cast<int>(chain.operands_.size()) - 1;
        // Rows read by several of the value's: a mask over heads, not a weight (one row,
        // which every row reads, so no row order groups its readers).
        if (layout == OperandLayout::kRows && Numel(sig) < Numel(value) &&
            Numel(sig) > row_cols && chain.repeated_rows_ < 0) {
          chain.repeated_rows_ = part.operand;
        }
      }
      dtype = stage.value_dtype;
      side.push_back(std::move(part));
    }
    return absl::OkStatus();
  };
  KF_RETURN_IF_ERROR(
      bind_side(0, anchor, target.inputs(0).dtype(), target.inputs(0), chain.prologue_));
  KF_RETURN_IF_ERROR(bind_side(anchor + 1, target.nodes_size(), anchor_dtype, target.outputs(0),
                               chain.epilogue_));
  if (Numel(target.inputs(0)) != Numel(target.outputs(0))) {
    return absl::UnimplementedError(absl::StrCat(
        "the chain's output ", SizesText(target.outputs(0)), " is not the shape of its input ",
        SizesText(target.inputs(0)), ": an operand broadcasts the value larger"));
  }
  chain.input0_strided_ = !IsContiguous(target.inputs(0));
  chain.epilogue_reads_streamed_input_ =
      std::any_of(chain.epilogue_.begin(), chain.epilogue_.end(), [&](const Part& part) {
        return part.operand >= 0 && ReadsStreamedInput(chain.operands_[part.operand]);
      });
  return chain;
}

std::string StageFunction(const PointwiseStage& stage, const std::string& name) {
  // The body may round to its value's type (clamp's bounds) through TO.
  const bool uses_to = stage.body.find("TO") != std::string::npos;
  return absl::StrCat(
      "// ", stage.name, "\n__device__ __forceinline__ float ", name, "(float a, float b) {\n",
      uses_to ? absl::StrCat("  typedef ", CudaType(stage.value_dtype), " TO;\n") : "", "  ",
      stage.body, "\n}\n");
}

std::string PointwiseChain::SideCode(const std::vector<Part>& side, const char* prefix,
                                     const char* ops_type, const char* load, const char* apply,
                                     const char* from_row_hook) const {
  std::string fns, members, loads, steps, from_row;
  for (size_t s = 0; s < side.size(); ++s) {
    const Part& part = side[s];
    const std::string fn = absl::StrCat("kf_", prefix, s);
    fns += StageFunction(part.stage, fn);
    std::string b = "0.f";
    if (part.operand >= 0) {
      const ChainOperand& op = operands_[part.operand];
      const int k = part.operand;
      if (op.layout == OperandLayout::kOne) {
        absl::StrAppend(&members, "  float v", k, ";\n");
        absl::StrAppend(&loads, "  o.v", k, " = ch.one", k, ";\n");  // read by kf_chain_init
        b = absl::StrCat("o.v", k);
      } else if (op.layout == OperandLayout::kSpread) {
        // One element for a vector within one run of it, else one per element.
        absl::StrAppend(&members, "  float v", k, "[V];\n");
        absl::StrAppend(
            &loads, "  if (V == 1 || (V == KF_VEC && ch.s", k, ".whole)) {\n    const float x = ",
            "kf_to_float(ch.p", k, "[kf_spread_offset(ch.s", k, ", c)]);\n#pragma unroll\n",
            "    for (int i = 0; i < V; ++i) o.v", k, "[i] = x;\n  } else {\n#pragma unroll\n",
            "    for (int i = 0; i < V; ++i) o.v", k, "[i] = kf_to_float(ch.p", k,
            "[kf_spread_offset(ch.s", k, ", c + i)]);\n  }\n");
        b = absl::StrCat("o.v", k, "[i]");
      } else {
        absl::StrAppend(&members, "  float v", k, "[V];\n");
        absl::StrAppend(&loads, "  kf_load<V>(ch.p", k, " + ch.base", k, " + c, o.v", k, ");\n");
        b = absl::StrCat("o.v", k, "[i]");
        if (from_row_hook != nullptr && ReadsStreamedInput(op)) {
          absl::StrAppend(&from_row, "#pragma unroll\n  for (int i = 0; i < V; ++i) o.v", k,
                          "[i] = r[i];\n");
        }
      }
    }
    absl::StrAppend(&steps, "    x = ", fn, "(", part.stage.value_is_b ? b : "x", ", ",
                    part.stage.value_is_b ? "x" : b, ");\n");
  }
  return absl::StrCat(
      fns, "template <int V> struct ", ops_type, " {\n", members.empty() ? "  char none;\n" : members,
      "};\ntemplate <int V>\n__device__ __forceinline__ void ", load,
      "(const KfChain& ch, kf_i64 c, ", ops_type, "<V>& o) {\n", loads,
      "}\ntemplate <int V>\n__device__ __forceinline__ void ", apply, "(const ", ops_type,
      "<V>& o, float (&v)[V]) {\n#pragma unroll\n  for (int i = 0; i < V; ++i) {\n"
      "    float x = v[i];\n",
      steps, "    v[i] = x;\n  }\n}\n",
      // The operands that are the streamed input itself, from its values as the engine read
      // them: an engine that holds them calls this after the load, whose loads of these then
      // go unused and are left out by the compiler. (Only where there are such operands: the
      // other chains' sources stay as they were, and the kernels swept before with them.)
      from_row.empty()
          ? ""
          : absl::StrCat("template <int V>\n__device__ __forceinline__ void ", from_row_hook,
                         "(const float (&r)[V], ", ops_type, "<V>& o) {\n", from_row, "}\n"));
}

bool PointwiseChain::ReadsStreamedInput(const ChainOperand& op) {
  return op.input == 0 && op.layout == OperandLayout::kFlat;
}

std::string PointwiseChain::DeviceCode() const {
  std::string members, init;
  bool f64 = false, bytes = false, spread = false;
  for (size_t k = 0; k < operands_.size(); ++k) {
    const ChainOperand& op = operands_[k];
    const std::string type = CudaType(op.dtype);
    f64 |= op.dtype == v1::FLOAT64;
    bytes |= op.dtype == v1::BOOL;
    absl::StrAppend(&members, "  const ", type, "* p", k, ";\n");
    // The pointer from KfArgs::data, beside the shape key, where the engines read their own:
    // inputs[i].data would be one more constant-cache line per operand (kforge_device.h).
    absl::StrAppend(&init, "  ch.p", k, " = reinterpret_cast<const ", type, "*>(args.data[",
                    op.input, "]);\n");
    if (op.layout == OperandLayout::kOne) {
      // Read and converted once here, not with every vector: in a vector's loads it was one
      // more dependent round trip (a float64 divisor's load, then its conversion, before the
      // next input load issued).
      absl::StrAppend(&members, "  float one", k, ";\n");
      absl::StrAppend(&init, "  ch.one", k, " = kf_to_float(ch.p", k, "[0]);\n");
    } else if (op.layout == OperandLayout::kFlat) {
      // The streamed input where its rows are strided: as the engine finds them (kf_in_row).
      absl::StrAppend(&members, "  kf_i64 base", k, ";\n");
      absl::StrAppend(&init, "  ch.base", k, " = ",
                      op.input == 0 && input0_strided_ ? "kf_in_row(args, row, cols)" : "row * cols",
                      ";\n");
    } else if (op.layout == OperandLayout::kRows) {
      // Whole rows of the operand: the row's first element, once per row.
      absl::StrAppend(&members, "  kf_i64 base", k, ";\n");
      absl::StrAppend(&init, "  ch.base", k, " = (row * cols) % args.inputs[", op.input,
                      "].numel;\n");
    } else if (op.layout == OperandLayout::kSpread) {
      spread = true;
      absl::StrAppend(&members, "  KfSpread s", k, ";\n");
      absl::StrAppend(&init, "  ch.s", k, " = kf_spread(args.inputs[", op.input,
                      "], args.outputs[0], row * cols, KF_VEC);\n");
    }
  }
  std::string src = "\n// The chain's elementwise nodes around its anchor (pointwise_chain.h).\n";
  // Loads of the non-float operands, in chain sources only (as the elementwise family's).
  if (f64) src += "__device__ __forceinline__ float kf_to_float(double x) { return (float)x; }\n";
  if (bytes) src += "__device__ __forceinline__ float kf_to_float(unsigned char x) { return x; }\n";
  if (spread) src += SpreadOperandSource();
  absl::StrAppend(&src, "struct KfChain {\n", members.empty() ? "  char none;\n" : members,
                  "};\n__device__ __forceinline__ void kf_chain_init(KfChain& ch, const KfArgs& "
                  "args, kf_i64 row, kf_i64 cols) {\n",
                  init, "}\n");
  if (has_repeated_rows()) {
    absl::StrAppend(&src,
                    "__device__ __forceinline__ kf_i64 kf_chain_period(const KfArgs& args, "
                    "kf_i64 cols) {\n  return args.inputs[",
                    operands_[repeated_rows_].input, "].numel / max(cols, (kf_i64)1);\n}\n");
  }
  // Only the row engine's output pass holds the row as read where it applies a side (the
  // epilogue): the prologue loads its operands, input 0 too.
  src += SideCode(prologue_, "pro", "KfProOperands", "kf_prologue_load", "kf_prologue_apply",
                  nullptr);
  src += SideCode(epilogue_, "epi", "KfEpiOperands", "kf_epilogue_load", "kf_epilogue_apply",
                  "kf_epilogue_load_from_row");
  return src;
}

bool PointwiseChain::PrologueIsNonNegative() const {
  bool non_negative = false;
  for (const Part& part : prologue_) {
    non_negative = part.stage.non_negative || (part.stage.keeps_sign && non_negative);
  }
  return non_negative;
}

double PointwiseChain::OperandBytes() const {
  double bytes = 0;
  for (const ChainOperand& op : operands_) {
    if (ReadsStreamedInput(op)) continue;  // the anchor's own input
    bytes += static_cast<double>(op.numel) * ElementSize(op.dtype);
  }
  return bytes;
}

int PointwiseChain::PrologueStreamBytesPerElement() const {
  int bytes = 0;
  for (const Part& part : prologue_) {
    if (part.operand < 0) continue;
    const ChainOperand& op = operands_[part.operand];
    if (op.layout == OperandLayout::kFlat && !ReadsStreamedInput(op))
      bytes += ElementSize(op.dtype);
  }
  return bytes;
}

int PointwiseChain::MaxVectorElementSize() const {
  int size = 0;
  for (const ChainOperand& op : operands_) {
    if (op.layout == OperandLayout::kFlat || op.layout == OperandLayout::kRows) {
      size = std::max(size, ElementSize(op.dtype));
    }
  }
  return size;
}

int FastMathCalls(const PointwiseStage& stage) {
  int calls = 0;
  for (const char* macro : {"KF_EXP(", "KF_TANH(", "KF_DIV("}) {
    for (size_t at = stage.body.find(macro); at != std::string::npos;
         at = stage.body.find(macro, at + 1)) {
      ++calls;
    }
  }
  return calls;
}

int PointwiseChain::FastMathCallsPerElement() const {
  int calls = 0;
  for (const auto* side : {&prologue_, &epilogue_}) {
    for (const Part& part : *side) calls += FastMathCalls(part.stage);
  }
  return calls;
}

double PointwiseChain::MathOpsPerElement() const {
  double ops = 0;
  for (const auto* side : {&prologue_, &epilogue_}) {
    for (const Part& part : *side) ops += part.stage.math_ops;
  }
  return ops;
}

double PointwiseChain::PrologueOpsPerElement() const {
  double ops = 0;
  for (const Part& part : prologue_) {
    ops += part.stage.math_ops;
    if (part.operand < 0) continue;
    const OperandLayout layout = operands_[part.operand].layout;
    // A load and a conversion; a spread operand's offset, two multiply-shifts, too.
    if (layout != OperandLayout::kOne) ops += layout == OperandLayout::kSpread ? 8 : 2;
  }
  return ops;
}

std::string PointwiseChain::Describe(const std::string& anchor) const {
  std::vector<std::string> names;
  for (const Part& part : prologue_) names.push_back(part.stage.name);
  names.push_back(anchor);
  for (const Part& part : epilogue_) names.push_back(part.stage.name);
  return absl::StrJoin(names, " -> ");
}

}  // namespace kforge::synth
