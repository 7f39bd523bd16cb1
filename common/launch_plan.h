// LaunchPlan: the declarative JSON that says how to launch a candidate's entry points for any
// shape of its target (docs/launch-plan.md). Parsed and validated once; Resolve() turns it
// into concrete launches for one set of symbols, checking the CUDA launch limits.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/expression.h"
#include "kforge/v1/common.pb.h"

namespace kforge {

// Larger plans or more launches are refused (the input may be LLM output).
inline constexpr size_t kMaxLaunchPlanBytes = 64 * 1024;
inline constexpr size_t kMaxLaunches = 64;
inline constexpr size_t kMaxLetBindings = 64;

struct Dim3 {
  int64_t x = 1;
  int64_t y = 1;
  int64_t z = 1;
  int64_t Product() const { return x * y * z; }  // callers have checked each <= limits
  bool operator==(const Dim3&) const = default;
};

struct ResolvedLaunch {
  std::string entry;
  // The entry to launch instead, with KfCapturedArgs, when a call is the plan's captured one
  // (ResolvedPlan::captured); empty: `entry` runs every call.
  std::string captured_entry;
  Dim3 grid;
  Dim3 block;
  int64_t shared_bytes = 0;     // dynamic shared memory
  std::optional<Dim3> cluster;  // thread-block cluster, when the plan asks for one
  bool cooperative = false;     // all blocks co-resident, or the launch is refused
  bool early_start = false;     // may start while the launch before it drains (sm_90+)
};

// The call a kernel was specialized for: the launcher compares a call's KfArgs::shape_key
// with `shape_key` and every pointer with `alignment_bytes`, on the host, and launches the
// captured entries when both hold (docs/launch-plan.md).
struct CapturedCall {
  uint64_t shape_key = 0;
  int64_t alignment_bytes = 1;
  bool operator==(const CapturedCall&) const = default;
};

struct ResolvedPlan {
  std::vector<ResolvedLaunch> launches;
  std::optional<CapturedCall> captured;
  int64_t scratch_bytes = 0;
  SymbolTable symbols;  // the bound symbols plus the plan's `let` names
};

class LaunchPlan {
 public:
  // What the kernel assumes of its inputs and outputs; the runtime makes guards of it.
  struct Requirements {
    bool contiguous = false;
    int64_t alignment_bytes = 1;  // a power of two; 1: no assumption
    // Expressions (over the plan's symbols) that must be multiples of a number: a vector
    // kernel with no per-element path states that its vectors tile the row. Resolve checks it.
    std::vector<std::pair<std::string, int64_t>> multiple_of;
  };

  // An integer field: the plan's text of it (a JSON integer is kept as its decimal text).
  struct Launch {
    std::string entry;
    std::array<std::string, 3> grid;
    std::array<std::string, 3> block;
    std::string shared_bytes = "0";
    std::optional<std::array<std::string, 3>> cluster;
    bool cooperative = false;
    bool early_start = false;
    std::string captured_entry;  // empty: none
  };

  // Validates structure and expression syntax. Errors are InvalidArgument and name the field:
  //   launch plan: launches[0].block: expected 1 to 3 dimensions, got 4
  static absl::StatusOr<LaunchPlan> Parse(std::string_view json);

  // Distinct entry points, captured entries included, in order of first use.
  std::vector<std::string> EntryPoints() const;
  const Requirements& requirements() const { return requirements_; }
  const std::optional<CapturedCall>& captured() const { return captured_; }
  const std::vector<Launch>& launches() const { return launches_; }
  const std::vector<std::pair<std::string, std::string>>& let() const { return let_; }
  const std::string& scratch_bytes() const { return scratch_bytes_; }
  // Whitespace- and key-order-independent form of the plan, for cache keys.
  const std::string& canonical_json() const { return canonical_json_; }

  // Evaluates every field against `symbols` (see BindShapeSymbols) and checks the CUDA limits:
  // block x,y <= 1024, z <= 64, x*y*z <= 1024; grid x <= 2^31-1, y,z <= 65535; every
  // dimension >= 1; cluster product <= 16 and dividing the grid; shared and scratch bytes >= 0;
  // every requires.multiple_of holds (else FailedPrecondition: the kernel is not for the shape).
  absl::StatusOr<ResolvedPlan> Resolve(const SymbolTable& symbols) const;

 private:
  std::vector<std::pair<std::string, std::string>> let_;
  std::string scratch_bytes_ = "0";
  std::vector<Launch> launches_;
  Requirements requirements_;
  std::optional<CapturedCall> captured_;
  std::string canonical_json_;
};

// A tensor as the launch plan's symbols see it: sizes and strides in elements (strides empty:
// contiguous).
struct TensorShape {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
};

// The symbols of docs/launch-plan.md: in{i}_size{d}, in{i}_stride{d}, in{i}_ndim,
// in{i}_numel, in{i}_size_last (1 for a 0-d tensor), the same with prefix out, int{k} and
// num_sms. Strides default to contiguous when a tensor carries none; a numel that would
// overflow is left unbound (its use is then an "unknown symbol" error).
SymbolTable BindShapeSymbols(const std::vector<TensorShape>& inputs,
                             const std::vector<TensorShape>& outputs,
                             const std::vector<int64_t>& int_args, int num_sms);

// BindShapeSymbols over the protos' signatures (defined in launch_plan_proto.cc, library
// kforge_launch_plan; kforge_launch_plan_core leaves protobuf out for the runtime library).
SymbolTable BindSymbols(const std::vector<v1::TensorSignature>& inputs,
                        const std::vector<v1::TensorSignature>& outputs,
                        const std::vector<int64_t>& int_args, int num_sms);

}  // namespace kforge
