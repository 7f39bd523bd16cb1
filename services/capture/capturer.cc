// Capturer: LibTorch model loading, RecordFunction-based recording of top-level aten calls,
// GPU/CPU timing, the operator graph, targets and their captured inputs (see capturer.h).
#include "common/tensor_signature.h"
#include "services/capture/capturer.h"

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <c10/core/Event.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/codegen/fuser/interface.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>
#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/blob_store.h"
#include "common/digest.h"
#include "common/op_cost.h"
#include "common/tensor_io.h"
#include "nlohmann/json.hpp"

namespace kforge {
namespace {

using Clock = std::chrono::steady_clock;

// ---- Signatures -------------------------------------------------------------------------

std::string DtypeShort(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
      return "f32";
    case c10::ScalarType::Half:
      return "f16";
    case c10::ScalarType::BFloat16:
      return "bf16";
    case c10::ScalarType::Double:
      return "f64";
    case c10::ScalarType::Long:
      return "i64";
    case c10::ScalarType::Int:
      return "i32";
    case c10::ScalarType::Short:
      return "i16";
    case c10::ScalarType::Char:
      return "i8";
    case c10::ScalarType::Byte:
      return "u8";
    case c10::ScalarType::Bool:
      return "b8";
    default:
      return c10::toString(type);
  }
}

v1::DType ToProtoDtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
      return v1::FLOAT32;
    case c10::ScalarType::Half:
      return v1::FLOAT16;
    case c10::ScalarType::BFloat16:
      return v1::BFLOAT16;
    case c10::ScalarType::Double:
      return v1::FLOAT64;
    case c10::ScalarType::Long:
      return v1::INT64;
    case c10::ScalarType::Int:
      return v1::INT32;
    case c10::ScalarType::Short:
      return v1::INT16;
    case c10::ScalarType::Char:
      return v1::INT8;
    case c10::ScalarType::Byte:
      return v1::UINT8;
    case c10::ScalarType::Bool:
      return v1::BOOL;
    default:
      return v1::DTYPE_UNSPECIFIED;
  }
}

v1::TensorSignature TensorSig(const at::Tensor& t) {
  v1::TensorSignature sig;
  for (int64_t s : t.sizes()) sig.add_sizes(s);
  if (t.layout() == c10::kStrided) {
    for (int64_t s : t.strides()) sig.add_strides(s);
    sig.set_storage_offset(t.storage_offset());
  }
  sig.set_dtype(ToProtoDtype(t.scalar_type()));
  sig.set_device(t.device().str());
  return sig;
}

// "f32[1,64,56,56]", with "@[strides]" when the layout is not contiguous.
void AppendTensorText(const at::Tensor& t, std::string& out) {
  if (!t.defined()) {
    out += "undefined";
    return;
  }
  absl::StrAppend(&out, DtypeShort(t.scalar_type()), "[", absl::StrJoin(t.sizes(), ","), "]");
  if (t.layout() == c10::kStrided && !t.is_contiguous()) {
    absl::StrAppend(&out, "@[", absl::StrJoin(t.strides(), ","), "]");
  }
}

// A non-tensor argument as the proto records it.
v1::ScalarValue ToScalar(const c10::IValue& v) {
  v1::ScalarValue s;
  if (v.isNone()) {
    s.set_none(true);
  } else if (v.isBool()) {
    s.set_bool_value(v.toBool());
  } else if (v.isInt()) {
    s.set_int_value(v.toInt());
  } else if (v.isDouble()) {
    s.set_float_value(v.toDouble());
  } else if (v.isString()) {
    s.set_string_value(v.toStringRef());
  } else if (v.isIntList()) {
    for (int64_t x : v.toIntVector()) s.mutable_int_list()->add_values(x);
  } else if (v.isDoubleList()) {
    for (double x : v.toDoubleVector()) s.mutable_float_list()->add_values(x);
  } else if (v.isBoolList()) {
    for (bool x : v.toBoolList()) s.mutable_int_list()->add_values(x ? 1 : 0);
  } else if (v.isDevice()) {
    s.set_string_value(v.toDevice().str());
  } else if (v.isComplexDouble()) {
    auto c = v.toComplexDouble();
    s.set_string_value(absl::StrFormat("complex(%g,%g)", c.real(), c.imag()));
  } else {
    s.set_string_value(absl::StrCat("<", v.tagKind(), ">"));
  }
  return s;
}


// A 0-dim CPU tensor beside device or larger tensors: a traced Python number (`x * 0.125`
// traces to a constant f64[] tensor) or another host value the op reads as a scalar. Its value
// is part of the call (a kernel bakes it, the export matches it to the graph's constant), so it
// is recorded as a scalar argument, not a tensor input, and calls group by it. Reading it costs
// nothing: it lives on the host.
bool IsHostScalar(const c10::IValue& v) {
  if (!v.isTensor()) return false;
  const at::Tensor& t = v.toTensor();
  return t.defined() && t.dim() == 0 && t.device().is_cpu() && !t.is_complex();
}

v1::ScalarValue HostScalarValue(const at::Tensor& t) {
  at::RecordFunctionGuard no_recording(false);  // item() is an aten call too
  v1::ScalarValue s;
  if (t.scalar_type() == c10::kBool) {
    s.set_bool_value(t.item<bool>());
  } else if (at::isIntegralType(t.scalar_type(), /*includeBool=*/false)) {
    s.set_int_value(t.item<int64_t>());
  } else {
    s.set_float_value(t.item<double>());
  }
  return s;
}

// Which of a call's arguments are host scalars: only where some other argument is a tensor
// that is not one (an op on host scalars alone, such as item(), keeps its tensors).
std::vector<bool> HostScalarArgs(c10::ArrayRef<const c10::IValue> inputs) {
  std::vector<bool> scalar(inputs.size(), false);
  bool operand = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const c10::IValue& v = inputs[i];
    scalar[i] = IsHostScalar(v);
    operand = operand || (v.isTensor() && v.toTensor().defined() && !scalar[i]) ||
              v.isTensorList();
  }
  if (!operand) std::fill(scalar.begin(), scalar.end(), false);
  return scalar;
}

// A list argument that carries tensors (Tensor[], Tensor?[]): one slot per element.
bool IsTensorListLike(const c10::IValue& v) {
  if (v.isTensorList()) return true;
  if (!v.isList()) return false;
  for (const auto& e : v.toListRef()) {
    if (e.isTensor()) return true;
  }
  return false;
}

// The printable signature of a call's inputs: the grouping key together with the op.
// host_scalar: HostScalarArgs(inputs).
std::string InputsText(c10::ArrayRef<const c10::IValue> inputs,
                       const std::vector<bool>& host_scalar) {
  std::string out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) out += ", ";
    const c10::IValue& v = inputs[i];
    if (host_scalar[i]) {  // "f64[]=0.125"
      AppendTensorText(v.toTensor(), out);
      absl::StrAppend(&out, "=", ScalarText(HostScalarValue(v.toTensor())));
    } else if (v.isTensor()) {
      AppendTensorText(v.toTensor(), out);
    } else if (IsTensorListLike(v)) {
      out += "[";
      bool first = true;
      for (const auto& e : v.toListRef()) {
        if (!first) out += ",";
        first = false;
        if (e.isTensor()) {
          AppendTensorText(e.toTensor(), out);
        } else {
          out += "None";
        }
      }
      out += "]";
    } else {
      out += ScalarText(ToScalar(v));
    }
  }
  return out;
}

// ---- Groups -----------------------------------------------------------------------------

// One argument slot of a call: a tensor input (by index into the call's tensors) or a scalar.
struct ArgSlot {
  std::string name;
  int tensor = -1;
  v1::ScalarValue scalar;
};

// Everything recorded about one (operator, signature).
struct Group {
  v1::OpGroup proto;  // op, overload, signature, inputs, scalars
  std::string schema;
  std::vector<ArgSlot> args;
  std::vector<v1::TensorSignature> outputs;
  bool outputs_known = false;
  int num_returns = -1;  // from the schema; -1 when unknown
  int64_t input_bytes = 0;
  int64_t output_bytes = 0;
  int64_t calls = 0;   // over all profiled forwards
  double total_s = 0;  // over all profiled forwards
};

std::string OpName(const at::RecordFunction& fn) { return fn.name(); }

std::string Overload(const at::RecordFunction& fn) {
  auto name = fn.operator_name();
  return name ? name->overload_name : "";
}

// The call's own arguments. For boxed calls (the TorchScript interpreter) RecordFunction
// hands over the whole interpreter stack; the arguments are its last schema-size entries.
c10::ArrayRef<const c10::IValue> CallInputs(const at::RecordFunction& fn,
                                            const std::optional<c10::FunctionSchema>& schema) {
  c10::ArrayRef<const c10::IValue> inputs = fn.inputs();
  if (schema && schema->arguments().size() < inputs.size()) {
    inputs = inputs.slice(inputs.size() - schema->arguments().size());
  }
  return inputs;
}

void AddTensorInput(Group& g, const at::Tensor& t) {
  *g.proto.add_inputs() = TensorSig(t);
  g.input_bytes += t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

// Builds a group's description from the first call that has its signature.
Group DescribeCall(const at::RecordFunction& fn, const std::optional<c10::FunctionSchema>& schema,
                   c10::ArrayRef<const c10::IValue> inputs, const std::vector<bool>& host_scalar,
                   std::string signature) {
  Group g;
  g.proto.set_op(OpName(fn));
  g.proto.set_overload(Overload(fn));
  g.proto.set_signature(std::move(signature));
  if (schema) {
    std::ostringstream os;
    os << *schema;
    g.schema = os.str();
    g.num_returns = static_cast<int>(schema->returns().size());
  }
  int tensor_count = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name = schema && i < schema->arguments().size() ? schema->arguments()[i].name()
                                                                : absl::StrCat("arg", i);
    const c10::IValue& v = inputs[i];
    if (host_scalar[i]) {
      ArgSlot slot{name, -1, HostScalarValue(v.toTensor())};
      v1::Argument* a = g.proto.add_scalars();
      a->set_name(name);
      *a->mutable_scalar() = slot.scalar;
      g.args.push_back(std::move(slot));
    } else if (v.isTensor() && v.toTensor().defined()) {
      g.args.push_back({name, tensor_count++, {}});
      AddTensorInput(g, v.toTensor());
    } else if (IsTensorListLike(v)) {
      // A Tensor[] argument appears as consecutive slots with the same name.
      for (const auto& e : v.toListRef()) {
        if (e.isTensor()) {
          g.args.push_back({name, tensor_count++, {}});
          AddTensorInput(g, e.toTensor());
        } else {
          g.args.push_back({name, -1, ToScalar(e)});
        }
      }
    } else {
      ArgSlot slot{name, -1, v.isTensor() ? ToScalar(c10::IValue()) : ToScalar(v)};
      v1::Argument* a = g.proto.add_scalars();
      a->set_name(name);
      *a->mutable_scalar() = slot.scalar;
      g.args.push_back(std::move(slot));
    }
  }
  return g;
}

void RecordOutputs(Group& g, const at::RecordFunction& fn) {
  g.outputs_known = true;
  // Boxed calls leave their results on top of the interpreter stack, which is what
  // RecordFunction sees: the outputs are its last num_returns entries.
  c10::ArrayRef<c10::IValue> outputs = fn.outputs();
  if (g.num_returns >= 0 && static_cast<size_t>(g.num_returns) < outputs.size()) {
    outputs = outputs.slice(outputs.size() - g.num_returns);
  }
  for (const c10::IValue& v : outputs) {
    std::vector<at::Tensor> tensors;
    if (v.isTensor()) {
      tensors.push_back(v.toTensor());
    } else if (v.isTensorList()) {
      tensors = v.toTensorVector();
    } else if (v.isTuple()) {
      for (const auto& e : v.toTupleRef().elements()) {
        if (e.isTensor()) tensors.push_back(e.toTensor());
      }
    }
    for (const auto& t : tensors) {
      if (!t.defined()) continue;
      g.outputs.push_back(TensorSig(t));
      g.output_bytes += t.numel() * static_cast<int64_t>(t.element_size());
    }
  }
}

// A copy on the CPU that keeps sizes and strides exactly (stride-0 expansions included)
// while holding only the storage the view spans.
at::Tensor CompactCpuCopy(const at::Tensor& t) {
  int64_t span = 1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) == 0) {
      span = 0;
      break;
    }
    span += (t.size(d) - 1) * t.stride(d);
  }
  at::Tensor flat = t.as_strided({span}, {1}, t.storage_offset());
  at::Tensor cpu = flat.to(c10::kCPU, /*non_blocking=*/false, /*copy=*/true);
  return cpu.as_strided(t.sizes(), t.strides(), 0);
}

int64_t SpanBytes(const at::Tensor& t) {
  int64_t span = 1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) == 0) return 0;
    span += (t.size(d) - 1) * t.stride(d);
  }
  return span * static_cast<int64_t>(t.element_size());
}

// ---- Recording --------------------------------------------------------------------------

class Recorder;
thread_local Recorder* active_recorder = nullptr;

struct CallContext : at::ObserverContext {
  bool top_level = false;
  size_t call = 0;  // index into Recorder::pending_
};

// Records the top-level aten calls of the forwards run while it is installed on this thread.
class Recorder {
 public:
  // Inputs of the first call of each wanted key are copied to the CPU (capture mode); a chain
  // target's, from the calls of one of its instances (by position in the forward).
  struct Capture {
    // A call whose tensors are some of a chain target's inputs: its tensor i becomes the
    // target's input inputs[i] (-1: a value inside the chain, not an input).
    struct ChainCall {
      int target = 0;
      std::vector<int> inputs;
    };
    int64_t max_bytes = 0;
    std::unordered_map<std::string, int> wanted;  // key -> target index
    std::unordered_map<size_t, std::vector<ChainCall>> wanted_calls;  // call position -> parts
    std::vector<std::vector<NamedTensor>> tensors;
    std::vector<int64_t> bytes;          // kept so far, per target
    std::vector<int64_t> skipped_bytes;  // > 0: over the cap, not kept
    std::vector<int> parts_left;         // calls still to copy, per target
    std::vector<bool> done;
  };

  Recorder(bool cuda, c10::Device device) : cuda_(cuda), device_(device) {}

  void Install() {
    thread_ = std::this_thread::get_id();
    active_recorder = this;
    handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(&StartThunk, &EndThunk)
                                             .needsInputs(true)
                                             .needsOutputs(true)
                                             .scopes({at::RecordScope::FUNCTION}));
  }
  void Uninstall() {
    if (active_recorder != this) return;
    at::removeCallback(handle_);
    active_recorder = nullptr;
  }

  // keep_sequence: remember the order of top-level calls (the discovery forward). replay:
  // expect that order again and skip describing each call, so the callbacks cost little host
  // time and the GPU is not left idle between ops (which would lower the coverage); a call
  // that does not match falls back to describing it.
  void BeginForward(bool keep_sequence, bool replay = false) {
    depth_ = 0;
    position_ = 0;
    pending_.clear();
    next_event_ = 0;
    keep_sequence_ = keep_sequence;
    replay_ = replay;
    replay_position_ = 0;
  }

  // After the forward has finished on the device: adds each call's time to its group, unless
  // `accumulate` is false (the discovery forward, slowed by describing every call).
  void EndForward(bool accumulate = true) {
    if (!accumulate) {
      pending_.clear();
      return;
    }
    for (const Pending& p : pending_) {
      double seconds;
      if (cuda_) {
        seconds = events_[p.event].elapsedTime(events_[p.event + 1]) / 1e3;
      } else {
        seconds = std::chrono::duration<double>(p.end - p.start).count();
      }
      Group& g = groups_[p.group];
      g.calls += 1;
      g.total_s += seconds;
    }
    pending_.clear();
  }

  void set_capture(Capture* capture) { capture_ = capture; }
  std::vector<Group>& groups() { return groups_; }
  const std::vector<int>& sequence() const { return sequence_; }
  const std::unordered_map<std::string, int>& keys() const { return key_index_; }

 private:
  struct Pending {
    int group = 0;
    size_t event = 0;
    Clock::time_point start, end;
  };

  static std::unique_ptr<at::ObserverContext> StartThunk(const at::RecordFunction& fn) {
    Recorder* r = active_recorder;
    if (r == nullptr || std::this_thread::get_id() != r->thread_) return nullptr;
    return r->OnStart(fn);
  }
  static void EndThunk(const at::RecordFunction& fn, at::ObserverContext* ctx) {
    Recorder* r = active_recorder;
    if (r == nullptr || ctx == nullptr) return;
    r->OnEnd(fn, static_cast<CallContext*>(ctx));
  }

  std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
    auto ctx = std::make_unique<CallContext>();
    ctx->top_level = depth_++ == 0;
    if (!ctx->top_level) return ctx;
    const size_t position = position_++;
    if (replay_ && replay_position_ < sequence_.size() &&
        groups_[sequence_[replay_position_]].proto.op() == fn.name()) {
      StartTiming(ctx.get(), sequence_[replay_position_++]);
      return ctx;
    }
    replay_ = false;  // the order changed: describe every call from here on
    // Everything that costs time happens before the start mark, so it is not in the op.
    const std::optional<c10::FunctionSchema> schema = fn.operator_schema();
    const c10::ArrayRef<const c10::IValue> inputs = CallInputs(fn, schema);
    const std::vector<bool> host_scalar = HostScalarArgs(inputs);
    std::string signature = InputsText(inputs, host_scalar);
    std::string key = absl::StrCat(OpName(fn), ".", Overload(fn), "(", signature, ")");
    auto [it, inserted] = key_index_.try_emplace(key, static_cast<int>(groups_.size()));
    if (inserted) {
      groups_.push_back(DescribeCall(fn, schema, inputs, host_scalar, std::move(signature)));
    }
    if (capture_ != nullptr) MaybeCaptureInputs(key, position, inputs, host_scalar);
    if (keep_sequence_) sequence_.push_back(it->second);
    StartTiming(ctx.get(), it->second);
    return ctx;
  }

  void StartTiming(CallContext* ctx, int group) {
    Pending p;
    p.group = group;
    if (cuda_) {
      p.event = next_event_;
      next_event_ += 2;
      while (events_.size() < next_event_) {
        events_.emplace_back(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);
      }
      events_[p.event].record(CurrentStream());
    }
    ctx->call = pending_.size();
    pending_.push_back(p);
    if (!cuda_) pending_.back().start = Clock::now();
  }

  void OnEnd(const at::RecordFunction& fn, CallContext* ctx) {
    --depth_;
    if (!ctx->top_level) return;
    Pending& p = pending_[ctx->call];
    if (cuda_) {
      events_[p.event + 1].record(CurrentStream());
    } else {
      p.end = Clock::now();
    }
    Group& g = groups_[p.group];
    if (!g.outputs_known) RecordOutputs(g, fn);
  }

  void MaybeCaptureInputs(const std::string& key, size_t position,
                          c10::ArrayRef<const c10::IValue> inputs,
                          const std::vector<bool>& host_scalar) {
    auto single = capture_->wanted.find(key);
    auto chain = capture_->wanted_calls.find(position);
    const bool wants_single =
        single != capture_->wanted.end() && !capture_->done[single->second];
    if (!wants_single && chain == capture_->wanted_calls.end()) return;
    std::vector<at::Tensor> tensors;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const c10::IValue& v = inputs[i];
      if (host_scalar[i]) continue;  // recorded as a scalar argument
      if (v.isTensor() && v.toTensor().defined()) {
        tensors.push_back(v.toTensor());
      } else if (IsTensorListLike(v)) {
        for (const auto& e : v.toListRef()) {
          if (e.isTensor()) tensors.push_back(e.toTensor());
        }
      }
    }
    // The copies are aten calls too; they must not be recorded.
    at::RecordFunctionGuard no_recording(false);
    if (wants_single) {
      std::vector<int> all(tensors.size());
      for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
      Keep(single->second, tensors, all);
      capture_->done[single->second] = true;
    }
    if (chain != capture_->wanted_calls.end()) {
      for (const Capture::ChainCall& part : chain->second) {
        if (part.inputs.size() != tensors.size()) continue;  // another call: left not done
        Keep(part.target, tensors, part.inputs);
        if (--capture_->parts_left[part.target] == 0) capture_->done[part.target] = true;
      }
    }
  }

  // Copies `tensors[i]` as the target's input "in<inputs[i]>" (where inputs[i] >= 0 and
  // neither an earlier call of the chain nor an earlier argument kept it: a tensor the chain
  // reads twice), unless the target's inputs pass the cap.
  void Keep(int target, const std::vector<at::Tensor>& tensors, const std::vector<int>& inputs) {
    std::vector<NamedTensor>& kept = capture_->tensors[target];
    std::vector<std::pair<std::string, const at::Tensor*>> fresh;
    int64_t bytes = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (inputs[i] < 0) continue;
      std::string name = absl::StrCat("in", inputs[i]);
      const auto same = [&](const auto& t) { return t.first == name; };
      const auto kept_same = [&](const NamedTensor& t) { return t.name == name; };
      if (std::any_of(kept.begin(), kept.end(), kept_same) ||
          std::any_of(fresh.begin(), fresh.end(), same)) {
        continue;
      }
      bytes += SpanBytes(tensors[i]);
      fresh.emplace_back(std::move(name), &tensors[i]);
    }
    capture_->bytes[target] += bytes;
    if (capture_->bytes[target] > capture_->max_bytes) {
      capture_->skipped_bytes[target] = capture_->bytes[target];
      return;
    }
    for (auto& [name, tensor] : fresh) kept.push_back({std::move(name), CompactCpuCopy(*tensor)});
  }

  c10::Stream CurrentStream() const {
    return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(device_);
  }

  bool cuda_;
  c10::Device device_;
  std::thread::id thread_;
  at::CallbackHandle handle_ = 0;
  int depth_ = 0;
  size_t position_ = 0;  // of the next top-level call in this forward
  bool keep_sequence_ = false;
  bool replay_ = false;
  size_t replay_position_ = 0;
  std::vector<c10::Event> events_;
  size_t next_event_ = 0;
  std::vector<Pending> pending_;
  std::vector<Group> groups_;
  std::unordered_map<std::string, int> key_index_;
  std::vector<int> sequence_;
  Capture* capture_ = nullptr;
};

// ---- Loading and running ----------------------------------------------------------------

absl::StatusOr<std::string> ReadFileBytes(const std::string& path, const char* what) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(what, " file ", path, " does not exist"));
  }
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " path ", path, " is a directory; pass the file"));
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::PermissionDeniedError(absl::StrCat("cannot open ", what, " file ", path));
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

// The one informative line of a LibTorch error: the final "XError: message" of a
// TorchScript traceback, or the first line otherwise.
std::string BriefError(const std::string& what) {
  std::vector<std::string> lines = absl::StrSplit(what, '\n', absl::SkipWhitespace());
  std::string line = lines.empty() ? what : lines.front();
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    auto pos = it->find("Error: ");
    if (pos != std::string::npos) {
      line = it->substr(pos + 7);
      break;
    }
  }
  if (line.size() > 300) line = line.substr(0, 297) + "...";
  return line;
}

std::string DescribeInputs(const std::vector<NamedTensor>& inputs) {
  std::vector<std::string> parts;
  for (const auto& t : inputs) {
    std::string s;
    AppendTensorText(t.tensor, s);
    parts.push_back(s);
  }
  return absl::StrCat(inputs.size(), inputs.size() == 1 ? " tensor" : " tensors", " (",
                      absl::StrJoin(parts, ", "), ")");
}

// Makes the executor run the graph as written: no fusers, no profiling-based
// specialization, so the recorded aten calls are the graph's nodes.
void UseGraphAsWritten() {
  torch::jit::setGraphExecutorOptimize(false);
  torch::jit::setTensorExprFuserEnabled(false);
  torch::jit::overrideCanFuseOnCPU(false);
  torch::jit::overrideCanFuseOnGPU(false);
}

class DeviceTimer {
 public:
  DeviceTimer(bool cuda, c10::Device device) : cuda_(cuda), device_(device) {}

  template <typename F>
  double Time(F&& run) {
    if (!cuda_) {
      auto start = Clock::now();
      run();
      return std::chrono::duration<double>(Clock::now() - start).count();
    }
    c10::Event start(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);
    c10::Event end(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);
    auto stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(device_);
    start.record(stream);
    run();
    end.record(stream);
    torch::cuda::synchronize();
    return start.elapsedTime(end) / 1e3;
  }

 private:
  bool cuda_;
  c10::Device device_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// ---- Targets and graph ------------------------------------------------------------------


void AddShapeSymbols(const std::string& prefix, const v1::TensorSignature& sig,
                     v1::Target& target) {
  auto& symbols = *target.mutable_shape_symbols();
  int64_t numel = 1;
  for (int d = 0; d < sig.sizes_size(); ++d) {
    symbols[absl::StrCat(prefix, "_size", d)] = sig.sizes(d);
    numel *= sig.sizes(d);
  }
  symbols[absl::StrCat(prefix, "_ndim")] = sig.sizes_size();
  symbols[absl::StrCat(prefix, "_numel")] = numel;
}

std::string CanonicalSig(const v1::TensorSignature& sig) {
  return absl::StrCat(v1::DType_Name(sig.dtype()), "[", absl::StrJoin(sig.sizes(), ","), "]@[",
                      absl::StrJoin(sig.strides(), ","), "]+", sig.storage_offset());
}

// The id hashes the subgraph and its signatures, not the device or the timings, so the same
// ops on the same shapes have the same id everywhere.
void SetTargetId(v1::Target& t) {
  std::string canonical = "kforge-target-v1\n";
  for (const auto& n : t.nodes()) {
    absl::StrAppend(&canonical, n.op(), ".", n.overload(), "|", n.schema(), "\n");
    for (const auto& a : n.args()) {
      absl::StrAppend(&canonical, "  ", a.name(), "=",
                      a.has_scalar() ? ScalarText(a.scalar()) : a.tensor(), "\n");
    }
    absl::StrAppend(&canonical, "  -> ", absl::StrJoin(n.outputs(), ","), "\n");
  }
  for (int i = 0; i < t.inputs_size(); ++i) {
    absl::StrAppend(&canonical, t.input_names(i), ":", CanonicalSig(t.inputs(i)), "\n");
  }
  for (int i = 0; i < t.outputs_size(); ++i) {
    absl::StrAppend(&canonical, t.output_names(i), ":", CanonicalSig(t.outputs(i)), "\n");
  }
  t.set_id(Sha256Hex(canonical));
}

nlohmann::json SigJson(const v1::TensorSignature& sig) {
  return {{"sizes", std::vector<int64_t>(sig.sizes().begin(), sig.sizes().end())},
          {"strides", std::vector<int64_t>(sig.strides().begin(), sig.strides().end())},
          {"dtype", v1::DType_Name(sig.dtype())}};
}

void CollectNodes(torch::jit::Block* block, std::vector<torch::jit::Node*>& out) {
  for (torch::jit::Node* n : block->nodes()) {
    out.push_back(n);
    for (torch::jit::Block* b : n->blocks()) CollectNodes(b, out);
  }
}

// The forward graph after inlining, as JSON: nodes (kind, values, observed signatures and
// time share for aten nodes matched to recorded calls) and edges. Constants and attribute
// reads are left out: they are not operators. Recorded calls are matched to aten nodes in
// execution order (the executor runs the graph as written).
// A copy of forward's graph with every call inlined, and its nodes in order.
struct InlinedForward {
  std::shared_ptr<torch::jit::Graph> graph;
  std::vector<torch::jit::Node*> nodes;
};

InlinedForward InlineForward(torch::jit::Module& module) {
  InlinedForward f;
  f.graph = module.get_method("forward").graph()->copy();
  // With the graph executor's optimizations off, Inline() inlines one level of calls per
  // pass (callees are not pre-inlined); repeat until no call is left.
  for (int pass = 0; pass < 64; ++pass) {
    torch::jit::Inline(*f.graph);
    f.nodes.clear();
    CollectNodes(f.graph->block(), f.nodes);
    bool has_calls = std::any_of(f.nodes.begin(), f.nodes.end(), [](torch::jit::Node* n) {
      return n->kind() == c10::prim::CallMethod || n->kind() == c10::prim::CallFunction;
    });
    if (!has_calls) break;
  }
  return f;
}

// The recorded call (its position in `sequence`) of each aten node, matched in execution order
// (the executor runs the graph as written): the next call of the node's operator within a
// short look-ahead, so a node that made no call (a branch not taken) does not derail the rest.
std::unordered_map<const torch::jit::Node*, size_t> MatchCalls(
    const std::vector<torch::jit::Node*>& nodes, const std::vector<int>& sequence,
    const std::vector<Group>& groups) {
  std::unordered_map<const torch::jit::Node*, size_t> calls;
  size_t cursor = 0;
  constexpr size_t kLookahead = 64;
  for (const torch::jit::Node* n : nodes) {
    const std::string kind = n->kind().toQualString();
    if (kind.rfind("aten::", 0) != 0) continue;
    for (size_t i = cursor; i < sequence.size() && i < cursor + kLookahead; ++i) {
      if (groups[sequence[i]].proto.op() != kind) continue;
      calls[n] = i;
      cursor = i + 1;
      break;
    }
  }
  return calls;
}

std::string GraphJson(const InlinedForward& forward, const std::string& model_name,
                      const std::vector<int>& sequence, const std::vector<Group>& groups,
                      const std::vector<int>& op_rank, int64_t iterations,
                      double profiled_forward_s) {
  const std::shared_ptr<torch::jit::Graph>& graph = forward.graph;
  const std::unordered_map<const torch::jit::Node*, size_t> calls =
      MatchCalls(forward.nodes, sequence, groups);

  std::unordered_map<const torch::jit::Value*, int> producer;
  nlohmann::json jnodes = nlohmann::json::array();
  nlohmann::json jedges = nlohmann::json::array();
  auto value_name = [](const torch::jit::Value* v) { return v->debugName(); };

  int next_id = 0;
  nlohmann::json jinputs = nlohmann::json::array();
  for (const torch::jit::Value* v : graph->inputs()) {
    if (v->type()->kind() == c10::TypeKind::ClassType) continue;  // self
    int id = next_id++;
    producer[v] = id;
    jnodes.push_back({{"id", id},
                      {"kind", "prim::Param"},
                      {"inputs", nlohmann::json::array()},
                      {"outputs", {{{"name", value_name(v)}, {"type", v->type()->str()}}}}});
    jinputs.push_back(id);
  }

  for (torch::jit::Node* n : forward.nodes) {
    const std::string kind = n->kind().toQualString();
    if (kind == "prim::Constant" || kind == "prim::GetAttr") continue;
    int id = next_id++;
    nlohmann::json jn = {{"id", id}, {"kind", kind}};
    nlohmann::json ins = nlohmann::json::array();
    for (const torch::jit::Value* v : n->inputs()) {
      ins.push_back(value_name(v));
      auto it = producer.find(v);
      if (it != producer.end()) {
        jedges.push_back({{"from", it->second}, {"to", id}, {"value", value_name(v)}});
      }
    }
    jn["inputs"] = ins;
    nlohmann::json outs = nlohmann::json::array();
    for (const torch::jit::Value* v : n->outputs()) {
      producer[v] = id;
      outs.push_back({{"name", value_name(v)}, {"type", v->type()->str()}});
    }
    if (auto call = calls.find(n); call != calls.end()) {
      const Group& g = groups[sequence[call->second]];
      nlohmann::json in_sigs = nlohmann::json::array();
      for (const auto& s : g.proto.inputs()) in_sigs.push_back(SigJson(s));
      jn["observed_inputs"] = in_sigs;
      for (size_t k = 0; k < g.outputs.size() && k < outs.size(); ++k) {
        outs[k]["observed"] = SigJson(g.outputs[k]);
      }
      jn["op_index"] = op_rank[sequence[call->second]];
      jn["signature"] = g.proto.signature();
      const double mean_s = g.calls ? g.total_s / static_cast<double>(g.calls) : 0;
      jn["mean_s"] = mean_s;
      jn["share"] = profiled_forward_s > 0 ? mean_s / profiled_forward_s : 0;
    }
    jn["outputs"] = outs;
    std::string scope = n->scopeName();
    if (!scope.empty()) jn["scope"] = scope;
    jnodes.push_back(std::move(jn));
  }
  nlohmann::json joutputs = nlohmann::json::array();
  for (const torch::jit::Value* v : graph->outputs()) joutputs.push_back(value_name(v));
  nlohmann::json doc = {{"model", model_name},     {"format", "kforge-graph-v1"},
                        {"inputs", jinputs},       {"outputs", joutputs},
                        {"nodes", jnodes},         {"edges", jedges},
                        {"iterations", iterations}};
  return doc.dump();
}

// ---- Chains -------------------------------------------------------------------------------

// A tensor slot of a chain's node: (node, slot).
using SlotRef = std::pair<int, int>;

// Chains of the forward (CaptureOptions::fuse): aten nodes each of whose one output is used
// only by the next, as one target. Every node has a synthesizer family (the ops kforge writes
// kernels for) and at most one is not elementwise: an elementwise prologue and epilogue around
// at most one row-wise or normalization op (`x * scale + mask` into a softmax, a batch norm
// into its ReLU). A node that writes an argument in place joins only where what it writes is
// the previous node's output, which nothing else sees.
struct Chain {
  std::vector<int> groups;          // per node, in order
  std::vector<int> links;           // links[i]: node i+1's tensor slot that node i's output fills
  // shared[i][t]: the slot that first reads the graph value node i's slot t reads, where an
  // earlier one does ({-1, -1} otherwise): `x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)`
  // reads x twice, and the target then has one input for it.
  std::vector<std::vector<SlotRef>> shared;
  std::vector<size_t> first_calls;  // the first instance's calls (its inputs are captured)
  int64_t instances = 0;            // in one forward
};

// Which tensor slot of `group`'s calls argument `j` of `node` is (-1: none, or a tensor list).
int TensorSlot(const torch::jit::Node* node, size_t j, const Group& group) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (schema == nullptr || j >= schema->arguments().size()) return -1;
  const std::string& name = schema->arguments()[j].name();
  int slot = -1, count = 0;
  for (const ArgSlot& a : group.args) {
    if (a.name != name) continue;
    ++count;
    slot = a.tensor;
  }
  return count == 1 ? slot : -1;
}

// Whether `node` writes any argument but argument `allowed` (-1: none allowed).
bool WritesOtherThan(const torch::jit::Node* node, int allowed) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (schema == nullptr) return true;
  for (size_t j = 0; j < schema->arguments().size(); ++j) {
    const c10::AliasInfo* alias = schema->arguments()[j].alias_info();
    if (alias != nullptr && alias->isWrite() && static_cast<int>(j) != allowed) return true;
  }
  return false;
}

// Whether some family writes a chain of these groups as one kernel (one that writes single ops
// only, as the layout family does, refuses an elementwise prologue before its op).
using ChainWritten = std::function<bool(const std::vector<int>& groups,
                                        const std::vector<int>& links,
                                        const std::vector<std::vector<SlotRef>>& shared)>;

// The chains of calls whose ops families cover, each as long as a family writes it: a chain
// no family writes gives up its last nodes until one does (add -> div before an upsample stays
// an elementwise chain).
std::vector<Chain> FindChains(const InlinedForward& forward, const std::vector<int>& sequence,
                              const std::vector<Group>& groups,
                              const std::vector<std::string>& family,
                              const ChainWritten& written) {
  const std::unordered_map<const torch::jit::Node*, size_t> calls =
      MatchCalls(forward.nodes, sequence, groups);
  auto group_of = [&](const torch::jit::Node* n) {
    auto it = calls.find(n);
    return it == calls.end() ? -1 : sequence[it->second];
  };
  using ChainKey =
      std::tuple<std::vector<int>, std::vector<int>, std::vector<std::vector<SlotRef>>>;
  std::map<ChainKey, Chain> found;
  // Whether a family writes each chain tried: a model's layers repeat their chains, bound once.
  std::map<ChainKey, bool> writable;
  auto is_written = [&](const std::vector<int>& chain_groups, const std::vector<int>& links,
                        const std::vector<std::vector<SlotRef>>& shared) {
    auto [it, added] = writable.emplace(ChainKey{chain_groups, links, shared}, false);
    if (added) it->second = written(chain_groups, links, shared);
    return it->second;
  };
  std::unordered_map<const torch::jit::Node*, bool> taken;
  for (const torch::jit::Node* first : forward.nodes) {
    const int g0 = group_of(first);
    if (g0 < 0 || taken[first] || family[g0].empty() || WritesOtherThan(first, -1)) continue;
    std::vector<const torch::jit::Node*> path = {first};
    std::vector<int> path_groups = {g0}, links;
    int anchors = family[g0] == "elementwise" ? 0 : 1;
    for (const torch::jit::Node* node = first;;) {
      if (node->outputs().size() != 1 || groups[path_groups.back()].outputs.size() != 1) break;
      const torch::jit::Value* out = node->output(0);
      if (!out->type()->isSubtypeOf(*c10::TensorType::get()) || out->uses().size() != 1) break;
      const torch::jit::Use& use = out->uses()[0];
      const torch::jit::Node* next = use.user;
      const int g = group_of(next);
      if (g < 0 || taken[next] || next->owningBlock() != node->owningBlock() ||
          family[g].empty() || WritesOtherThan(next, static_cast<int>(use.offset))) {
        break;
      }
      const int next_anchors = anchors + (family[g] == "elementwise" ? 0 : 1);
      const int slot = TensorSlot(next, use.offset, groups[g]);
      if (next_anchors > 1 || slot < 0) break;
      anchors = next_anchors;
      path.push_back(next);
      path_groups.push_back(g);
      links.push_back(slot);
      node = next;
    }
    if (path.size() < 2) continue;
    // Node i's shared slots depend on nodes 0..i only: a shorter chain keeps a prefix of them.
    std::vector<std::vector<SlotRef>> shared(path.size());
    std::unordered_map<const torch::jit::Value*, SlotRef> first_reader;
    for (size_t i = 0; i < path.size(); ++i) {
      shared[i].assign(groups[path_groups[i]].proto.inputs_size(), {-1, -1});
      for (size_t j = 0; j < path[i]->inputs().size(); ++j) {
        const int slot = TensorSlot(path[i], j, groups[path_groups[i]]);
        if (slot < 0 || (i > 0 && slot == links[i - 1])) continue;
        auto [it, first] = first_reader.emplace(path[i]->input(j), SlotRef(i, slot));
        if (!first) shared[i][slot] = it->second;
      }
    }
    while (path.size() >= 2 && !is_written(path_groups, links, shared)) {
      path.pop_back();
      path_groups.pop_back();
      links.pop_back();
      shared.pop_back();
    }
    if (path.size() < 2) continue;
    for (const torch::jit::Node* n : path) taken[n] = true;
    Chain& chain = found[{path_groups, links, shared}];
    if (chain.instances++ == 0) {
      chain.groups = path_groups;
      chain.links = links;
      chain.shared = std::move(shared);
      for (const torch::jit::Node* n : path) chain.first_calls.push_back(calls.at(n));
    }
  }
  std::vector<Chain> chains;
  for (auto& [key, chain] : found) chains.push_back(std::move(chain));
  return chains;
}

// The target of a subgraph from its nodes' groups in order — one for a single op — and, for a
// chain, `links[i]`: node i+1's tensor slot that node i's output fills, and `shared` (Chain).
// Node i's output is "v<i>" inside a chain and "out<j>" at its end; the inputs "in<k>" are the
// nodes' other tensors in order, a tensor read twice once. `input_of_slot[i][t]` is the target
// input that node i's tensor slot t is (-1: the previous node's output).
v1::Target MakeSubgraphTarget(const std::vector<const Group*>& nodes,
                              const std::vector<int>& links, int64_t calls_per_forward,
                              double profiled_forward_s,
                              const std::vector<std::vector<SlotRef>>* shared = nullptr,
                              std::vector<std::vector<int>>* input_of_slot = nullptr) {
  v1::Target t;
  std::vector<std::vector<int>> slots(nodes.size());
  double mean_s = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Group& g = *nodes[i];
    mean_s += g.calls ? g.total_s / static_cast<double>(g.calls) : 0;
    slots[i].assign(g.proto.inputs_size(), -1);
    v1::SubgraphNode* node = t.add_nodes();
    node->set_op(g.proto.op());
    node->set_overload(g.proto.overload());
    node->set_schema(g.schema);
    for (const ArgSlot& slot : g.args) {
      v1::Argument* a = node->add_args();
      a->set_name(slot.name);
      if (slot.tensor < 0) {
        *a->mutable_scalar() = slot.scalar;
      } else if (i > 0 && slot.tensor == links[i - 1]) {
        a->set_tensor(absl::StrCat("v", i - 1));
      } else if (const SlotRef first = shared ? (*shared)[i][slot.tensor] : SlotRef(-1, -1);
                 first.first >= 0) {
        const int k = slots[first.first][first.second];
        slots[i][slot.tensor] = k;
        a->set_tensor(absl::StrCat("in", k));
      } else {
        const int k = t.input_names_size();
        slots[i][slot.tensor] = k;
        a->set_tensor(absl::StrCat("in", k));
        t.add_input_names(absl::StrCat("in", k));
        *t.add_inputs() = g.proto.inputs(slot.tensor);
        AddShapeSymbols(absl::StrCat("in", k), g.proto.inputs(slot.tensor), t);
      }
    }
    if (i + 1 < nodes.size()) {
      node->add_outputs(absl::StrCat("v", i));
      continue;
    }
    for (size_t j = 0; j < g.outputs.size(); ++j) {
      const std::string name = absl::StrCat("out", j);
      node->add_outputs(name);
      t.add_output_names(name);
      *t.add_outputs() = g.outputs[j];
      AddShapeSymbols(name, g.outputs[j], t);
    }
  }
  SetTargetId(t);
  t.set_eager_time_s(mean_s);
  t.set_calls_per_forward(calls_per_forward);
  t.set_share(profiled_forward_s > 0 ? mean_s * calls_per_forward / profiled_forward_s : 0);
  SetOpCost(t);
  if (input_of_slot != nullptr) *input_of_slot = std::move(slots);
  return t;
}

// A single op's target: its group's calls.
v1::Target MakeTarget(const Group& g, double profiled_forward_s, int64_t iterations) {
  return MakeSubgraphTarget({&g}, {}, std::max<int64_t>(1, g.calls / iterations),
                            profiled_forward_s);
}

std::string DefaultModelName(const std::string& path) {
  std::string name = std::filesystem::path(path).stem().string();
  // tools/kforge-export writes DIR/model.pt: the folder names the model better.
  if (name == "model") {
    std::string parent = std::filesystem::path(path).parent_path().filename().string();
    if (!parent.empty()) name = parent;
  }
  return name.empty() ? "model" : name;
}

absl::StatusOr<CaptureResult> RunCapture(const CaptureOptions& options, Store* store,
                                         const FamilyLookup& family) {
  if (options.iters < 1) return absl::InvalidArgumentError("--iters must be at least 1");
  if (options.warmup < 0) return absl::InvalidArgumentError("--warmup must be 0 or more");
  if (options.top_k < 0) return absl::InvalidArgumentError("--top must be 0 or more");

  // Device first: it is the cheapest thing to get wrong.
  bool cuda;
  if (options.device == "cuda" || options.device == "gpu") {
    if (!torch::cuda::is_available()) {
      return absl::FailedPreconditionError(
          "no CUDA device is available on this machine; use --device cpu");
    }
    cuda = true;
  } else if (options.device == "cpu") {
    cuda = false;
  } else if (options.device == "auto" || options.device.empty()) {
    cuda = torch::cuda::is_available();
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown device '", options.device, "'; use cuda, cpu or auto"));
  }
  const c10::Device device = cuda ? c10::Device(c10::DeviceType::CUDA, 0) : c10::Device("cpu");

  const std::string model_label = options.model_path.empty() ? "model" : options.model_path;
  const std::string inputs_label = options.inputs_path.empty() ? "inputs" : options.inputs_path;
  std::string model_bytes = options.model_bytes;
  if (model_bytes.empty()) {
    if (options.model_path.empty()) return absl::InvalidArgumentError("no model given");
    auto bytes = ReadFileBytes(options.model_path, "model");
    if (!bytes.ok()) return bytes.status();
    model_bytes = std::move(*bytes);
  }
  std::string inputs_bytes = options.inputs_bytes;
  if (inputs_bytes.empty()) {
    if (options.inputs_path.empty()) {
      return absl::InvalidArgumentError(
          "no inputs given; pass --inputs inputs.pt (tools/kforge-export writes one)");
    }
    auto bytes = ReadFileBytes(options.inputs_path, "inputs");
    if (!bytes.ok()) return bytes.status();
    inputs_bytes = std::move(*bytes);
  }

  torch::jit::Module module;
  try {
    std::istringstream stream(model_bytes);
    module = torch::jit::load(stream, device);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        model_label, " is not a TorchScript model (", BriefError(e.what_without_backtrace()),
        "); save one with torch.jit.save or tools/kforge-export"));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(model_label, " is not a TorchScript model (", BriefError(e.what()),
                     "); save one with torch.jit.save or tools/kforge-export"));
  }
  if (!module.find_method("forward")) {
    return absl::InvalidArgumentError(absl::StrCat(model_label, " has no forward method to run"));
  }
  module.eval();

  auto named_inputs = ParseTensors(inputs_bytes, inputs_label);
  if (!named_inputs.ok()) return named_inputs.status();

  // Argument count against forward's schema, before running anything.
  const c10::FunctionSchema& schema = module.get_method("forward").function().getSchema();
  size_t max_args = schema.arguments().size() - 1;  // minus self
  size_t min_args = 0;
  for (size_t i = 1; i < schema.arguments().size(); ++i) {
    if (!schema.arguments()[i].default_value()) min_args = i;
  }
  const size_t given = named_inputs->size();
  if (given < min_args || given > max_args) {
    std::vector<std::string> names;
    for (size_t i = 1; i < schema.arguments().size(); ++i) {
      names.push_back(schema.arguments()[i].name());
    }
    return absl::InvalidArgumentError(absl::StrCat(
        inputs_label, " holds ", DescribeInputs(*named_inputs), " but ", model_label,
        "'s forward takes ", min_args == max_args ? "" : absl::StrCat(min_args, " to "), max_args,
        " (", absl::StrJoin(names, ", "),
        "); save the inputs the model was traced with as a tuple in that order"));
  }

  std::vector<c10::IValue> inputs;
  try {
    for (const auto& t : *named_inputs) inputs.emplace_back(t.tensor.to(device));
  } catch (const c10::Error& e) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot move the inputs of ", inputs_label,
                                                     " to ", device.str(), ": ",
                                                     BriefError(e.what_without_backtrace())));
  }

  UseGraphAsWritten();
  c10::InferenceMode inference_mode;
  auto forward = [&] { module.forward(inputs); };
  DeviceTimer timer(cuda, device);

  try {
    forward();
    if (cuda) torch::cuda::synchronize();
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        model_label, " rejected the inputs in ", inputs_label, " (", DescribeInputs(*named_inputs),
        "): ", BriefError(e.what_without_backtrace()),
        ". Pass the inputs the model was traced with (tools/kforge-export writes them as "
        "inputs.pt), on the device it was traced for"));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(model_label, " rejected the inputs in ",
                                                   inputs_label, ": ", BriefError(e.what()),
                                                   ". Pass the inputs the model was traced with"));
  }

  CaptureResult result;
  v1::OperatorProfile& profile = result.profile;
  Recorder recorder(cuda, device);
  std::vector<double> profiled;
  Recorder::Capture capture;
  try {
    for (int i = 1; i < options.warmup; ++i) forward();
    if (cuda) torch::cuda::synchronize();

    std::vector<double> plain;
    for (int i = 0; i < options.iters; ++i) plain.push_back(timer.Time(forward));
    profile.set_forward_time_s(Median(plain));

    recorder.Install();
    // Discovery: describe every call once, untimed; then the timed forwards replay it.
    recorder.BeginForward(/*keep_sequence=*/true);
    forward();
    if (cuda) torch::cuda::synchronize();
    recorder.EndForward(/*accumulate=*/false);
    for (int i = 0; i < options.iters; ++i) {
      recorder.BeginForward(/*keep_sequence=*/false, /*replay=*/true);
      profiled.push_back(timer.Time(forward));
      recorder.EndForward();
    }
    recorder.Uninstall();
  } catch (const c10::Error& e) {
    recorder.Uninstall();
    return absl::InternalError(
        absl::StrCat("running ", model_label, " failed: ", BriefError(e.what_without_backtrace())));
  }
  double profiled_sum = 0;
  for (double s : profiled) profiled_sum += s;
  result.profiled_forward_s = profiled_sum / static_cast<double>(profiled.size());
  const int64_t iterations = options.iters;

  // Op table, by time.
  std::vector<Group>& groups = recorder.groups();
  std::vector<int> order(groups.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return groups[a].total_s > groups[b].total_s; });
  std::vector<int> op_rank(groups.size());
  double covered = 0;
  for (size_t rank = 0; rank < order.size(); ++rank) {
    Group& g = groups[order[rank]];
    op_rank[order[rank]] = static_cast<int>(rank);
    v1::OpGroup* op = profile.add_ops();
    *op = g.proto;
    const double per_forward = g.total_s / static_cast<double>(iterations);
    const int64_t calls = std::max<int64_t>(1, g.calls / iterations);
    op->set_calls(calls);
    op->set_total_s(per_forward);
    op->set_mean_s(per_forward / static_cast<double>(calls));
    op->set_share(per_forward / result.profiled_forward_s);
    covered += per_forward;
  }
  profile.set_coverage(covered / result.profiled_forward_s);
  profile.set_model_name(options.model_name.empty() ? DefaultModelName(model_label)
                                                    : options.model_name);
  profile.set_device(cuda ? device.str() : "cpu");
  profile.set_iterations(options.iters);
  profile.add_notes(kCoverageDefinition);
  profile.add_notes(absl::StrFormat(
      "forward: %.3f ms plain (median of %d), %.3f ms profiled (mean of %d, recording on)",
      profile.forward_time_s() * 1e3, options.iters, result.profiled_forward_s * 1e3,
      options.iters));
  if (cuda && result.profiled_forward_s > 1.25 * profile.forward_time_s()) {
    // Launch-bound models: the callbacks' host time opens gaps on the GPU between ops.
    profile.add_notes(absl::StrFormat(
        "recording made the forward %.0f%% slower: the model is launch-bound on this device, "
        "and the GPU idles between ops for that time, which lowers the coverage",
        (result.profiled_forward_s / profile.forward_time_s() - 1) * 100));
  }
  if (!cuda) {
    profile.add_notes(
        "timed on the CPU with a steady clock (CPU ops are synchronous); GPU "
        "shares will differ");
  }

  // Families for every group; targets for the top K.
  std::vector<v1::Target> singles(groups.size());
  std::vector<std::string> families(groups.size());
  for (size_t rank = 0; rank < order.size(); ++rank) {
    v1::Target& t = singles[order[rank]];
    t = MakeTarget(groups[order[rank]], result.profiled_forward_s, iterations);
    families[order[rank]] = family ? family(t) : "";
    t.set_family(families[order[rank]]);
    profile.mutable_ops(static_cast<int>(rank))
        ->set_family(families[order[rank]].empty() ? "none" : families[order[rank]]);
  }
  std::optional<InlinedForward> inlined;
  try {
    inlined = InlineForward(module);
  } catch (const c10::Error& e) {
    profile.add_notes(absl::StrCat("operator graph not available: ",
                                   BriefError(e.what_without_backtrace())));
  }
  std::vector<Chain> chains;
  const ChainWritten written = [&](const std::vector<int>& chain_groups,
                                   const std::vector<int>& links,
                                   const std::vector<std::vector<SlotRef>>& shared) {
    std::vector<const Group*> nodes;
    for (int g : chain_groups) nodes.push_back(&groups[g]);
    return family && !family(MakeSubgraphTarget(nodes, links, 1, result.profiled_forward_s,
                                                &shared)).empty();
  };
  if (options.fuse && inlined) {
    chains = FindChains(*inlined, recorder.sequence(), groups, families, written);
  }

  // A call inside a chain belongs to the chain's target: each op's target keeps its other calls.
  std::vector<int64_t> chained_calls(groups.size(), 0);
  for (const Chain& c : chains) {
    for (int g : c.groups) chained_calls[g] += c.instances;
  }
  struct Candidate {
    v1::Target target;
    double per_forward_s = 0;
    int group = -1;  // a single op's target
    int chain = -1;  // or a chain's
    std::vector<std::vector<int>> input_of_slot;
  };
  std::vector<Candidate> candidates;
  for (int g : order) {
    Candidate c;
    c.target = singles[g];
    c.group = g;
    const int64_t calls = c.target.calls_per_forward();
    const int64_t own = calls - chained_calls[g];
    if (own <= 0) continue;
    c.per_forward_s = groups[g].total_s / static_cast<double>(iterations) *
                      static_cast<double>(own) / static_cast<double>(calls);
    if (own < calls) {
      c.target.set_calls_per_forward(own);
      c.target.set_share(c.target.share() * static_cast<double>(own) / static_cast<double>(calls));
    }
    candidates.push_back(std::move(c));
  }
  for (size_t i = 0; i < chains.size(); ++i) {
    Candidate c;
    std::vector<const Group*> nodes;
    for (int g : chains[i].groups) nodes.push_back(&groups[g]);
    c.target = MakeSubgraphTarget(nodes, chains[i].links, chains[i].instances,
                                  result.profiled_forward_s, &chains[i].shared,
                                  &c.input_of_slot);
    c.target.set_family(family ? family(c.target) : "");
    c.per_forward_s = c.target.eager_time_s() * static_cast<double>(c.target.calls_per_forward());
    c.chain = static_cast<int>(i);
    candidates.push_back(std::move(c));
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.per_forward_s > b.per_forward_s;
  });
  const auto wanted_op = [&](const v1::Target& t) {
    if (options.ops.empty()) return true;
    return std::any_of(t.nodes().begin(), t.nodes().end(), [&](const v1::SubgraphNode& n) {
      return std::find(options.ops.begin(), options.ops.end(), n.op()) != options.ops.end();
    });
  };
  std::vector<v1::Target> targets;
  std::vector<std::string> labels;
  // The real inputs of one call (one instance of a chain) of each target, from one more forward.
  const std::unordered_map<std::string, int>& keys = recorder.keys();
  capture.max_bytes = options.max_target_input_bytes;
  const bool count_covered = options.uncovered_top_k >= 0 && family;
  int counted = 0, uncovered = 0;
  for (Candidate& c : candidates) {
    if (counted >= options.top_k) break;
    if (c.per_forward_s <= 0 || !wanted_op(c.target)) continue;
    if (count_covered && c.target.family().empty()) {
      if (uncovered >= options.uncovered_top_k) continue;
      ++uncovered;
    } else {
      ++counted;
    }
    const int index = static_cast<int>(targets.size());
    if (c.chain < 0) {
      for (const auto& [key, group] : keys) {
        if (group == c.group) capture.wanted[key] = index;
      }
      capture.parts_left.push_back(1);
      labels.push_back(absl::StrCat(c.target.nodes(0).op(), " ", groups[c.group].proto.signature()));
    } else {
      const Chain& chain = chains[c.chain];
      std::vector<std::string> ops;
      for (size_t n = 0; n < chain.groups.size(); ++n) {
        capture.wanted_calls[chain.first_calls[n]].push_back({index, c.input_of_slot[n]});
        ops.push_back(groups[chain.groups[n]].proto.op());
      }
      capture.parts_left.push_back(static_cast<int>(chain.groups.size()));
      labels.push_back(absl::StrCat("chain ", absl::StrJoin(ops, " -> ")));
    }
    targets.push_back(std::move(c.target));
  }
  capture.tensors.resize(targets.size());
  capture.bytes.assign(targets.size(), 0);
  capture.skipped_bytes.assign(targets.size(), 0);
  capture.done.assign(targets.size(), false);
  if (!targets.empty()) {
    try {
      recorder.set_capture(&capture);
      recorder.Install();
      recorder.BeginForward(/*keep_sequence=*/false);
      forward();
      if (cuda) torch::cuda::synchronize();
      recorder.Uninstall();
      recorder.set_capture(nullptr);
    } catch (const c10::Error& e) {
      recorder.Uninstall();
      return absl::InternalError(absl::StrCat("capturing the inputs of ", model_label,
                                              " failed: ", BriefError(e.what_without_backtrace())));
    }
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    v1::Target& t = targets[i];
    const std::string& label = labels[i];
    if (capture.skipped_bytes[i] > 0) {
      profile.add_notes(absl::StrFormat(
          "target %s (%s): its inputs are %.1f MiB, above the %.1f MiB cap per target; not "
          "kept (raise the cap to keep them)",
          t.id().substr(0, 12), label, capture.skipped_bytes[i] / 1048576.0,
          options.max_target_input_bytes / 1048576.0));
      continue;
    }
    if (!capture.done[i]) {
      profile.add_notes(absl::StrFormat(
          "target %s (%s): no call with this signature in the capture forward (or, for a "
          "chain, its calls were not where they were before); inputs not kept",
          t.id().substr(0, 12), label));
      continue;
    }
    auto bytes = SerializeTensors(capture.tensors[i], TensorContainer::kDict);
    if (!bytes.ok()) return bytes.status();
    if (store != nullptr) {
      auto digest = PutBlob(*store, *bytes);
      if (!digest.ok()) {
        return absl::Status(digest.status().code(),
                            absl::StrCat("cannot store the captured inputs in ", store->Describe(),
                                         ": ", digest.status().message()));
      }
      *t.mutable_captured_inputs() = *digest;
    } else {
      *t.mutable_captured_inputs() = MakeDigest(*bytes);
    }
    result.target_inputs[t.id()] = std::move(*bytes);
  }
  for (auto& t : targets) *profile.add_targets() = std::move(t);

  if (inlined) {
    profile.set_graph_json(GraphJson(*inlined, profile.model_name(), recorder.sequence(), groups,
                                     op_rank, iterations, result.profiled_forward_s));
  }
  return result;
}

}  // namespace

absl::StatusOr<CaptureResult> Capturer::Run(const CaptureOptions& options, Store* store,
                                            const FamilyLookup& family) {
  // LibTorch reports errors as exceptions; none may leave this module.
  try {
    return RunCapture(options, store, family);
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("capture failed: ", BriefError(e.what_without_backtrace())));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("capture failed: ", BriefError(e.what())));
  }
}

}  // namespace kforge
