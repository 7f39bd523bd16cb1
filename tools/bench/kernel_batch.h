// Many generated kernels in one NVRTC program. NVRTC's cost per config is mostly per-kernel
// work (NVVM and ptxas), but parsing the headers (cuda_fp16.h, cuda_bf16.h, kforge_device.h),
// starting the kforge-nvrtc child and loading NVRTC's builtins is paid once per program:
// compiling 8 configs as one program costs ~12-16% less CPU per config than 8 programs.
//
// Each member's source goes into its own namespace (kfb<i>), so helpers, typedefs and
// templates of different configs cannot collide; its extern "C" entry points (whose names are
// global whatever the namespace) are renamed NAME__kfb<i>, its macros are #undef'd after it
// and its #include lines are hoisted to the top (they are include-guarded). The member's
// launch plan is rewritten to the renamed entries. The kernels are the single compiles' kernels:
// tests/bench/kernel_batch_test.cc checks that their PTX is identical up to symbol names.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kforge::bench {

struct BatchMember {
  std::string source;
  std::string launch_plan_json;
};

struct KernelBatch {
  std::string source;              // the one program
  std::vector<std::string> plans;  // per member: its launch plan, entries renamed
  // per member: original entry name -> its name in the batch (every extern "C" __global__
  // function of the member, launched by the plan or not)
  std::vector<std::map<std::string, std::string>> entries;
  // per member: the renamed entries its plan launches (those the batch's cubin must hold; an
  // entry under a false #if is renamed but not compiled)
  std::vector<std::vector<std::string>> launched;
};

// The extern "C" __global__ function names `source` defines, in order.
std::vector<std::string> ExternEntryNames(std::string_view source);

// InvalidArgument when a member cannot be batched safely (an #include inside #if, a plan that
// does not parse or launches an entry the source does not define extern "C").
absl::StatusOr<KernelBatch> BatchKernels(const std::vector<BatchMember>& members);

// The suffix member `index`'s entries get ("__kfb3").
std::string BatchEntrySuffix(size_t index);

// For comparing a batched compile with single ones: every .entry of `ptx`, keyed by its name
// with any batch suffix removed, as text in which basic-block labels, mangled (_Z...) names and
// module-scope .shared/.global/.const symbols are renamed in order of first use. `member`:
// only entries with that member's suffix (-1: entries without a batch suffix).
std::map<std::string, std::string> CanonicalPtxEntries(std::string_view ptx, int member);

}  // namespace kforge::bench
