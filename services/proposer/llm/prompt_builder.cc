// Prompt builder for the LLM proposers.
#include "services/proposer/llm/prompt_builder.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/tensor_signature.h"
#include "services/proposer/llm/aten_op_descriptions.h"
#include "services/proposer/llm/embedded_docs.h"
#include "services/proposer/llm/string_view_compat.h"

namespace kforge {
namespace {

std::string DTypeText(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT32:
      return "float32 (float)";
    case v1::FLOAT16:
      return "float16 (__half)";
    case v1::BFLOAT16:
      return "bfloat16 (__nv_bfloat16)";
    case v1::FLOAT64:
      return "float64 (double)";
    case v1::INT64:
      return "int64 (long long)";
    case v1::INT32:
      return "int32 (int)";
    case v1::INT16:
      return "int16 (short)";
    case v1::INT8:
      return "int8 (signed char)";
    case v1::UINT8:
      return "uint8 (unsigned char)";
    case v1::BOOL:
      return "bool (1 byte)";
    default:
      return "unspecified dtype";
  }
}

std::string Micros(double seconds) { return absl::StrFormat("%.2f us", seconds * 1e6); }

std::string Bytes(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) return absl::StrFormat("%.1f GiB", bytes / double(1 << 30));
  if (bytes >= (int64_t{1} << 20)) return absl::StrFormat("%.1f MiB", bytes / double(1 << 20));
  if (bytes >= (int64_t{1} << 10)) return absl::StrFormat("%.1f KiB", bytes / double(1 << 10));
  return absl::StrCat(bytes, " B");
}


std::string DescribeTensor(const v1::TensorSignature& sig) {
  std::string text =
      absl::StrCat(DTypeText(sig.dtype()), ", sizes [", absl::StrJoin(sig.sizes(), ", "), "]");
  if (sig.strides_size() > 0) {
    absl::StrAppend(&text, ", strides [", absl::StrJoin(sig.strides(), ", "), "]");
  }
  absl::StrAppend(&text, IsContiguous(sig) ? " (contiguous)" : " (NOT contiguous)");
  if (sig.storage_offset() != 0) absl::StrAppend(&text, ", storage offset ", sig.storage_offset());
  return text;
}


std::string Head(const std::string& text, size_t max_chars) {
  if (text.size() <= max_chars) return text;
  return absl::StrCat(text.substr(0, max_chars), "\n... (", text.size() - max_chars,
                      " more characters cut)");
}

// Where each scalar lands in KfArgs, following the rule in kforge_device.h: ints, bools and
// int lists (flattened) to int_args, floats to float_args, in schema order node by node.
void AppendScalarLayout(const v1::Target& target, std::string& out) {
  int next_int = 0;
  int next_float = 0;
  std::vector<std::string> lines;
  for (const v1::SubgraphNode& node : target.nodes()) {
    for (const v1::Argument& arg : node.args()) {
      if (!arg.has_scalar()) continue;
      const v1::ScalarValue& value = arg.scalar();
      const std::string what = absl::StrCat("`", arg.name(), "` of ", node.op());
      switch (value.value_case()) {
        case v1::ScalarValue::kIntValue:
        case v1::ScalarValue::kBoolValue:
          lines.push_back(absl::StrCat("- args.int_args[", next_int++, "] = ", ScalarText(value),
                                       "  (", what, ")"));
          break;
        case v1::ScalarValue::kIntList:
          for (int64_t v : value.int_list().values()) {
            lines.push_back(
                absl::StrCat("- args.int_args[", next_int++, "] = ", v, "  (", what, ", element)"));
          }
          break;
        case v1::ScalarValue::kFloatValue:
          lines.push_back(absl::StrCat("- args.float_args[", next_float++,
                                       "] = ", ScalarText(value), "  (", what, ")"));
          break;
        case v1::ScalarValue::kFloatList:
          for (double v : value.float_list().values()) {
            lines.push_back(absl::StrCat("- args.float_args[", next_float++, "] = ", v, "  (", what,
                                         ", element)"));
          }
          break;
        case v1::ScalarValue::kStringValue:
          lines.push_back(absl::StrCat("- ", what, " = ", ScalarText(value),
                                       " is not passed: specialise the kernel for this value"));
          break;
        default:
          lines.push_back(absl::StrCat("- ", what, " = None (not passed)"));
          break;
      }
    }
  }
  if (lines.empty()) {
    absl::StrAppend(&out, "Scalar arguments: none.\n");
  } else {
    absl::StrAppend(&out, "Scalar arguments (values observed; read them from KfArgs):\n",
                    absl::StrJoin(lines, "\n"), "\n");
  }
}

void AppendTarget(const v1::Target& target, std::string& out) {
  absl::StrAppend(&out, "## Target\n");
  if (target.nodes_size() > 1) {
    absl::StrAppend(&out, "A chain of ", target.nodes_size(),
                    " ops to fuse into one kernel (intermediate values need not be written to "
                    "memory; only the target's outputs are checked):\n");
  }
  for (const v1::SubgraphNode& node : target.nodes()) {
    std::string op = node.op();
    if (!node.overload().empty()) absl::StrAppend(&op, ".", node.overload());
    absl::StrAppend(&out, "- ", op, "\n");
    if (!node.schema().empty()) absl::StrAppend(&out, "  Schema: `", node.schema(), "`\n");
    absl::StrAppend(&out, "  Semantics: ", DescribeAtenOp(node), "\n");
    std::vector<std::string> args;
    for (const v1::Argument& arg : node.args()) {
      args.push_back(absl::StrCat(arg.name(), " = ",
                                  arg.has_scalar() ? ScalarText(arg.scalar()) : arg.tensor()));
    }
    absl::StrAppend(&out, "  Arguments: ", args.empty() ? "none" : absl::StrJoin(args, ", "),
                    "\n  Results: ", absl::StrJoin(node.outputs(), ", "), "\n");
  }

  absl::StrAppend(&out, "\n## Signature\nInputs (args.inputs[i]):\n");
  for (int i = 0; i < target.inputs_size(); ++i) {
    const std::string name = i < target.input_names_size() ? target.input_names(i) : "";
    absl::StrAppend(&out, "- inputs[", i, "] `", name, "`: ", DescribeTensor(target.inputs(i)),
                    "\n");
  }
  absl::StrAppend(&out,
                  "Outputs (args.outputs[j]; poisoned with NaN before each launch, so "
                  "write every element):\n");
  for (int j = 0; j < target.outputs_size(); ++j) {
    const std::string name = j < target.output_names_size() ? target.output_names(j) : "";
    absl::StrAppend(&out, "- outputs[", j, "] `", name, "`: ", DescribeTensor(target.outputs(j)),
                    "\n");
    if (const int k = AliasedInput(target, j); k >= 0) {
      absl::StrAppend(&out, "  The op works in place: in the model outputs[", j,
                      "] is the same memory as inputs[", k, "] (it is also validated that "
                      "way), so read every element of inputs[", k, "] before any thread "
                      "writes it, and write through outputs[", j, "] only.\n");
    }
  }
  AppendScalarLayout(target, out);
  if (!target.shape_symbols().empty()) {
    std::map<std::string, int64_t> sorted(target.shape_symbols().begin(),
                                          target.shape_symbols().end());
    absl::StrAppend(&out, "Shape symbols: ", absl::StrJoin(sorted, ", ", absl::PairFormatter("=")),
                    "\n");
  }
  absl::StrAppend(
      &out, target.shape_generic()
                ? "The kernel must be shape-generic: it is also validated on a held-out shape, "
                  "so read sizes and strides from args and size the launch plan with "
                  "expressions.\n"
                : "Only this exact signature is dispatched to the kernel (guards check sizes "
                  "and strides), so it may specialise on these shapes.\n");
  if (target.eager_time_s() > 0) {
    absl::StrAppend(&out, "PyTorch eager takes ", Micros(target.eager_time_s()), " per call");
    if (target.share() > 0) {
      absl::StrAppend(&out, absl::StrFormat(" (%.1f%% of the forward pass)", target.share() * 100));
    }
    absl::StrAppend(&out, ".\n");
  }
  if (target.floor_s() > 0 || target.min_bytes_moved() > 0) {
    absl::StrAppend(
        &out, "Speed-of-light floor: ", target.floor_s() > 0 ? Micros(target.floor_s()) : "unknown",
        target.min_bytes_moved() > 0
            ? absl::StrCat(" (it must move at least ", Bytes(target.min_bytes_moved()), ")")
            : "",
        ".\n");
  }
}

void AppendGpu(const v1::GpuInfo& gpu, std::string& out) {
  absl::StrAppend(&out, "\n## GPU\n", gpu.name().empty() ? "unknown GPU" : gpu.name());
  if (!gpu.arch().empty()) absl::StrAppend(&out, ", ", gpu.arch());
  absl::StrAppend(&out, "\n");
  if (gpu.sm_count() > 0) absl::StrAppend(&out, "- SMs: ", gpu.sm_count(), "\n");
  if (gpu.memory_bytes() > 0) absl::StrAppend(&out, "- memory: ", Bytes(gpu.memory_bytes()), "\n");
  if (gpu.l2_bytes() > 0) absl::StrAppend(&out, "- L2 cache: ", Bytes(gpu.l2_bytes()), "\n");
  if (gpu.shared_memory_per_block_optin() > 0) {
    absl::StrAppend(&out, "- shared memory per block (opt-in): ",
                    Bytes(gpu.shared_memory_per_block_optin()), "\n");
  }
  if (gpu.copy_bandwidth_bytes_per_s() > 0) {
    absl::StrAppend(&out, absl::StrFormat("- measured copy bandwidth: %.0f GB/s\n",
                                          gpu.copy_bandwidth_bytes_per_s() / 1e9));
  }
  if (gpu.peak_flops() > 0) {
    absl::StrAppend(&out, absl::StrFormat("- peak: %.1f TFLOP/s\n", gpu.peak_flops() / 1e12));
  }
}

std::string VerdictText(const v1::EvaluatedCandidate& evaluated) {
  if (evaluated.has_compile() && evaluated.compile().status() != v1::COMPILE_OK &&
      evaluated.compile().status() != v1::COMPILE_STATUS_UNSPECIFIED) {
    return v1::CompileStatus_Name(evaluated.compile().status());
  }
  if (!evaluated.has_evaluation()) return "not evaluated yet";
  return v1::Verdict_Name(evaluated.evaluation().verdict());
}

// Feedback on one evaluated candidate: compile outcome and log, resources, verdict,
// diagnostics, time against eager and the floor.
void AppendFeedback(const v1::EvaluatedCandidate& evaluated, const PromptOptions& options,
                    std::string& out) {
  absl::StrAppend(&out, "Verdict: ", VerdictText(evaluated), "\n");
  if (evaluated.has_compile()) {
    const v1::CompileResult& compile = evaluated.compile();
    if (!compile.log().empty() && compile.status() != v1::COMPILE_OK) {
      absl::StrAppend(&out, "Compiler log:\n```\n", Head(compile.log(), options.max_log_chars),
                      "\n```\n");
    }
    for (const v1::KernelResources& kernel : compile.kernels()) {
      absl::StrAppend(&out, "Resources of ", kernel.entry_point(), ": ", kernel.registers(),
                      " registers, ", kernel.static_shared_bytes(), " B static shared, ",
                      kernel.local_bytes(), " B local, spills ", kernel.spill_store_bytes(),
                      " B stored / ", kernel.spill_load_bytes(), " B loaded\n");
    }
  }
  if (!evaluated.has_evaluation()) return;
  const v1::EvaluationResult& evaluation = evaluated.evaluation();
  if (evaluation.has_diagnostics() && evaluation.verdict() != v1::PASS) {
    const v1::Diagnostics& d = evaluation.diagnostics();
    if (!d.message().empty()) absl::StrAppend(&out, "Diagnostics: ", d.message(), "\n");
    if (evaluation.verdict() == v1::MISMATCH || d.max_abs_error() > 0) {
      absl::StrAppend(&out,
                      absl::StrFormat("On input set %s, output %d: first bad index %d, max abs "
                                      "error %g, max rel error %g, tolerance %g (eager's own "
                                      "error %g)\n",
                                      d.input_set().empty() ? "?" : d.input_set(), d.output_index(),
                                      d.first_bad_index(), d.max_abs_error(), d.max_rel_error(),
                                      d.tolerance(), d.eager_error()));
    }
    if (!d.log_excerpt().empty()) {
      absl::StrAppend(&out, "Log:\n```\n", Head(d.log_excerpt(), options.max_log_chars), "\n```\n");
    }
  }
  if (evaluation.has_resources() && evaluated.compile().kernels_size() == 0) {
    const v1::KernelResources& r = evaluation.resources();
    absl::StrAppend(&out, "Resources: ", r.registers(), " registers, spills ",
                    r.spill_store_bytes(), " B stored / ", r.spill_load_bytes(), " B loaded\n");
  }
  if (evaluation.verdict() == v1::PASS && evaluation.candidate().median_s() > 0) {
    absl::StrAppend(&out, "Time: ", Micros(evaluation.candidate().median_s()));
    if (evaluation.eager().median_s() > 0) {
      absl::StrAppend(&out, " vs PyTorch eager ", Micros(evaluation.eager().median_s()));
    }
    if (evaluation.speedup() > 0) {
      absl::StrAppend(&out, absl::StrFormat(" (speedup %.2fx)", evaluation.speedup()));
    }
    if (evaluation.floor_s() > 0) {
      absl::StrAppend(
          &out,
          absl::StrFormat("; floor %s, so %.0f%% of speed-of-light", Micros(evaluation.floor_s()),
                          100.0 * evaluation.floor_s() / evaluation.candidate().median_s()));
    }
    absl::StrAppend(&out, "\n");
  }
}

void AppendCandidateCode(const v1::Candidate& candidate, std::string& out) {
  absl::StrAppend(&out, "```cuda\n", candidate.source(),
                  candidate.source().ends_with('\n') ? "" : "\n", "```\n```json\n",
                  candidate.launch_plan_json(),
                  candidate.launch_plan_json().ends_with('\n') ? "" : "\n", "```\n");
}

bool Failed(const v1::EvaluatedCandidate& evaluated) {
  if (evaluated.has_compile() && evaluated.compile().status() != v1::COMPILE_OK &&
      evaluated.compile().status() != v1::COMPILE_STATUS_UNSPECIFIED) {
    return true;
  }
  return evaluated.has_evaluation() && evaluated.evaluation().verdict() != v1::PASS &&
         evaluated.evaluation().verdict() != v1::VERDICT_UNSPECIFIED &&
         evaluated.evaluation().verdict() != v1::NOT_EVALUATED;
}

}  // namespace

std::string ExampleAnswer() {
  return R"kf(```cuda
#include "kforge_device.h"

// Copies inputs[0] to outputs[0] (float32, contiguous) with a grid-stride loop.
extern "C" __global__ void kf_copy(KfArgs args) {
  const float* x = static_cast<const float*>(args.inputs[0].data);
  float* y = static_cast<float*>(args.outputs[0].data);
  const long long n = args.outputs[0].numel;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    y[i] = x[i];
  }
}
```
```json
{"launches": [{"entry": "kf_copy", "grid": ["min(ceil_div(out0_numel, 256), num_sms * 8)", 1, 1], "block": [256, 1, 1]}],
 "requires": {"contiguous": true, "alignment_bytes": 4}}
```
)kf";
}

std::string BuildSystemPrompt() {
  return absl::StrCat(
      "You are an expert CUDA performance engineer. You write one CUDA kernel at a time for a "
      "PyTorch operator (or a chain of them), to be faster than PyTorch eager on the given GPU "
      "while matching its results to within PyTorch's own rounding error.\n\n"
      "## Rules\n"
      "- Device code only. The source is compiled by NVRTC, never by a host compiler: no "
      "host code, no main(), no <<<...>>> launches, no CUDA runtime or driver API calls, no "
      "malloc/free, no file or process access, no host headers.\n"
      "- Include \"kforge_device.h\" (below) and nothing else but CUDA device headers "
      "(cuda_fp16.h, cuda_bf16.h, cuda_fp8.h, cooperative_groups.h, mma.h, cuda_pipeline.h, "
      "cuda/barrier, cuda/std/...).\n"
      "- Every entry point is `extern \"C\" __global__ void NAME(KfArgs args)`; tensors, "
      "sizes, strides and scalars come from args. Helpers are __device__ functions.\n"
      "- Launches are declared in a JSON launch plan (format below): grid, block, dynamic "
      "shared memory and scratch are integer expressions over the target's shape symbols.\n"
      "- Outputs are filled with NaN before every launch: write every output element. Never "
      "write inputs, and never write outside outputs and scratch.\n"
      "- Validation compares against a float64 reference on the captured inputs and on random "
      "inputs; two runs must agree (no races). Accumulate half/bfloat16 math in float.\n\n"
      "## Kernel ABI: kforge_device.h\n```c\n",
      Av(KernelAbiHeaderText()), "```\n\n## Launch plan format\n", Av(LaunchPlanFormatText()),
      "\n\n## Answer format\n"
      "Reply with a short explanation of the idea (a few sentences), then exactly one ```cuda "
      "code block with the complete source and exactly one ```json code block with its launch "
      "plan. No other code blocks. For example:\n\n",
      ExampleAnswer());
}

std::string BuildUserPrompt(const v1::ProposeRequest& request, const PromptOptions& options) {
  std::string out;
  AppendTarget(request.target(), out);
  AppendGpu(request.gpu(), out);

  const bool has_parent = request.has_parent() && request.parent().has_candidate() &&
                          !request.parent().candidate().source().empty();
  if (has_parent) {
    const v1::EvaluatedCandidate& parent = request.parent();
    absl::StrAppend(
        &out, "\n## Parent kernel\nThe kernel to improve on (proposed by ",
        parent.candidate().proposer().empty() ? "an earlier turn" : parent.candidate().proposer(),
        "):\n");
    AppendCandidateCode(parent.candidate(), out);
    absl::StrAppend(&out, "\n### Feedback on the parent\n");
    AppendFeedback(parent, options, out);
  }

  if (request.has_best() && request.best().has_candidate() &&
      !request.best().candidate().source().empty() &&
      (!has_parent || request.best().candidate().id() != request.parent().candidate().id())) {
    absl::StrAppend(&out, "\n## Best kernel so far\n");
    AppendCandidateCode(request.best().candidate(), out);
    AppendFeedback(request.best(), options, out);
  }

  std::vector<const v1::EvaluatedCandidate*> failed;
  std::vector<const v1::EvaluatedCandidate*> passed;
  for (const v1::EvaluatedCandidate& sibling : request.siblings()) {
    (Failed(sibling) ? failed : passed).push_back(&sibling);
  }
  if (!failed.empty()) {
    absl::StrAppend(&out,
                    "\n## Failed siblings\nOther attempts from the same parent that "
                    "failed; do not repeat their mistakes:\n");
    int shown = 0;
    for (const v1::EvaluatedCandidate* sibling : failed) {
      if (shown++ == options.max_siblings) {
        absl::StrAppend(&out, "(", failed.size() - options.max_siblings, " more not shown)\n");
        break;
      }
      absl::StrAppend(&out, "\n### Sibling ", shown, "\n");
      if (options.max_sibling_source_chars > 0) {
        std::string source = Head(sibling->candidate().source(), options.max_sibling_source_chars);
        while (!source.empty() && source.back() == '\n') source.pop_back();
        absl::StrAppend(&out, "Source (start):\n```\n", source, "\n```\n");
      }
      AppendFeedback(*sibling, options, out);
    }
  }
  if (!passed.empty()) {
    absl::StrAppend(&out, "\nSiblings that passed: ");
    std::vector<std::string> speedups;
    for (const v1::EvaluatedCandidate* sibling : passed) {
      speedups.push_back(absl::StrFormat("%.2fx", sibling->evaluation().speedup()));
    }
    absl::StrAppend(&out, absl::StrJoin(speedups, ", "), " speedup over eager.\n");
  }

  absl::StrAppend(&out, "\n## Task\n");
  if (!has_parent) {
    absl::StrAppend(&out, "Write a correct and fast first kernel for this target.");
  } else if (Failed(request.parent())) {
    absl::StrAppend(&out,
                    "The parent failed. Fix the cause shown in its feedback, keeping "
                    "what is sound; if its approach cannot work, take another.");
  } else {
    absl::StrAppend(&out,
                    "Write a faster kernel than the parent: use the feedback (time vs "
                    "floor, registers, spills) to decide what limits it, and change "
                    "that. Keep it correct.");
  }
  absl::StrAppend(&out,
                  " Answer in the format of the system prompt: one ```cuda block and "
                  "one ```json launch-plan block.\n");
  return out;
}

ChatRequest BuildProposalPrompt(const v1::ProposeRequest& request, const PromptOptions& options) {
  ChatRequest chat;
  chat.system = BuildSystemPrompt();
  chat.user = BuildUserPrompt(request, options);
  chat.seed = request.seed();
  return chat;
}

}  // namespace kforge
