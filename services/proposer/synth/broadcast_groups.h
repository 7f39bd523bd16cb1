// The elementwise kernels' broadcast-offset code (device/broadcast_groups.cuh), compiled for
// the host too: the cost model counts an input's groups with it and a unit test checks it
// against per-dim offsets.
#pragma once

#include <string_view>

#include "common/kforge_device.h"

namespace kforge::synth {

typedef long long kf_i64;
#define KF_HD inline
#include "services/proposer/synth/device/broadcast_groups.cuh"
#undef KF_HD

// The .cuh's text, to embed in kernel sources after `#define KF_HD __device__ __forceinline__`.
std::string_view BroadcastGroupsSource();

}  // namespace kforge::synth
