// Reads the resource report ptxas prints under -v (registers, shared memory, stack, spills)
// out of an NVRTC log, one KernelResources per entry function.
#pragma once

#include <string_view>
#include <vector>

#include "kforge/v1/common.pb.h"

namespace kforge {

// Entries in the order ptxas reports them, named as ptxas prints them (extern "C" entry
// points unmangled, others mangled). max_threads_per_block is the register-file bound of
// sm_70 and later (64K registers per block, allocated per warp in units of 256), capped at
// 1024; the driver may lower it further (__launch_bounds__).
std::vector<v1::KernelResources> ParsePtxasReport(std::string_view log);

// The register-file bound on threads per block for `registers` per thread.
int MaxThreadsForRegisters(int registers);

}  // namespace kforge
