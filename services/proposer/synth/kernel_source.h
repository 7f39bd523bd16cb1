// Pieces every generated kernel shares: the device-side preamble (type conversion, vector
// loads, fast-math switches, cluster PTX), literal formatting, and the launch-plan JSON
// builder (format: docs/launch-plan.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/kforge_device.h"
#include "common/launch_plan.h"

namespace kforge::synth {

template <typename I>
struct KfGroups;  // device/broadcast_groups.cuh, host-compiled in device_code.h

struct PreambleOptions {
  bool fast_math = false;
  bool clusters = false;  // emits the sm_90 cluster / distributed shared memory helpers
};

// `#include "kforge_device.h"` plus helpers: kf_to_float / kf_from_float<T>, KfVec<T, N>,
// kf_load<V> / kf_store<V>, kf_aligned, KF_EXP / KF_LOG / KF_DIV / KF_TANH, and with
// clusters kf_cluster_sync / kf_cluster_rank / kf_dsmem_u32.
std::string DevicePreamble(const PreambleOptions& options);

// Device code for loads and stores under an L2 eviction policy (createpolicy +
// L2::cache_hint): kf_l2_policy(keep), kf_load_l2<T, V>(p, policy), kf_store_l2<T, V>(p, v,
// policy). Emitted only by configs that use them, after DevicePreamble.
extern const char kL2CacheHints[];
// kf_launch_dependents() and kf_wait_previous(), for the kernels of a plan's early_start
// launches (docs/launch-plan.md); no-ops before sm_90.
extern const char kProgrammaticLaunch[];

// Marks around the one span of a source that may hold the captured call's shape (constants for
// a fast path the kernel takes when a call has exactly that shape); the rest of the source is
// the same for every shape of the target.
inline constexpr char kCapturedShapeBegin[] = "// captured shape: begin";
inline constexpr char kCapturedShapeEnd[] = "// captured shape: end";

// Device code, between the captured-shape marks: kf_captured_args(KfArgs& args, const
// KfCapturedArgs& captured) fills `args` as the launcher would for the captured call `call`
// (CapturedCallArgs): the pointers from `captured` (the scratch's too, its size unset), the
// counts, sizes, strides, dtypes and shape key as constants. An engine written against KfArgs,
// inlined into a captured entry on such a local KfArgs, then folds its geometry and offsets at
// compile time, provided it indexes the struct by constants only (else the whole struct goes
// to local memory). Scalars are in no shape key, so int_args and float_args are left unset:
// only engines that never read them may use it.
std::string CapturedArgsSource(const KfArgs& call);

// kf_const_div<I, D>(e), e / D for a divisor known when the kernel is generated (a shift or a
// multiply-shift), for captured paths whose groups' sizes are constants.
extern const char kConstDivide[];
// The statements that add to `offset` the offset of element `e` (consumed) through groups `g`,
// their sizes and strides as constants (kf_group_offset's steps, unrolled, with kf_const_div),
// each line starting with `indent`.
std::string ConstGroupOffset(const KfGroups<long long>& g, const std::string& indent);

// The first line of every generated source: "// kforge synth: <what>". It names the kernel, not
// its config, so configs that differ only in their launch plan (grid sizing) generate the same
// source and share one compile; the config travels as the candidate's params.
std::string SourceHeader(const std::string& what);

// A C++ float expression with the exact double value: "((float)1.0000000000000001e-05)".
std::string FloatLiteral(double value);

struct PlanLaunch {
  std::string entry;
  std::vector<std::string> grid;   // expressions
  std::vector<int> block;
  std::string shared_bytes = "0";
  std::vector<int> cluster;  // empty: no cluster
  bool cooperative = false;  // blocks wait on each other: all must be resident
  // Programmatic dependent launch: the kernel runs kf_wait_previous() before it reads what an
  // earlier launch of the plan wrote (docs/launch-plan.md).
  bool early_start = false;
  // Launched instead of `entry`, with KfCapturedArgs, for the plan's captured call.
  std::string captured_entry{};  // empty: none
};

// Ends a generator's refusal of a vec that does not tile the shape: vector kernels carry no
// per-element fallback; their plan's requires.multiple_of states what they assume instead.
inline constexpr char kNoPerElementPath[] = " (a vector kernel has no per-element path)";

struct PlanSpec {
  std::vector<std::pair<std::string, std::string>> let;
  std::string scratch_bytes = "0";
  std::vector<PlanLaunch> launches;
  bool contiguous = true;
  int alignment_bytes = 0;  // 0: no requirement beyond the element size
  // requires.multiple_of: [expression, multiple] pairs the kernel's vectors need.
  std::vector<std::pair<std::string, int>> multiple_of;
  // The call the captured entries are specialized for (the captured span of the source).
  std::optional<CapturedCall> captured;
};

// A one-dimensional grid over the output's elements, `per_block` to a block: one block each
// (oneshot), or at most `blocks_per_sm` a SM looping (stride). Binds N, BLOCKS (and GRID) in
// `plan` and returns the grid's expression.
std::string FlatGrid(PlanSpec& plan, int64_t per_block, bool stride, int blocks_per_sm);

// Whether a one-shot (not stride) grid of `per_block` elements a block covers `numel` elements
// in whole blocks: then a captured path may drop its loop, bounds tests and tail
// (KF_CAPTURED_EXACT).
bool OneShotTilesExactly(bool stride, int64_t numel, int64_t per_block);

// `source` with its entries' __launch_bounds__(KF_THREADS) asking for `min_blocks` resident
// blocks per SM (OccupancyMinBlocks); unchanged for 0.
std::string WithMinBlocksPerSm(std::string source, int min_blocks);

// The launch plan JSON, pretty-printed with stable key order.
std::string PlanJson(const PlanSpec& plan);

// "in0_size2 * in0_size3" for dims [first, last] of input `input`; "1" when empty.
std::string SizeProduct(int input, int first, int last);

}  // namespace kforge::synth
