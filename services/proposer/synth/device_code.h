// Device code of the synthesized kernels that the host compiles too (device/*.cuh): the same
// text is embedded in kernel sources, and compiled here for the cost model and unit tests, so
// kernels run host-tested code.
#pragma once

#include <cmath>
#include <string_view>

#include "common/kforge_device.h"

namespace kforge::synth {

typedef long long kf_i64;
#define KF_HD inline
#include "services/proposer/synth/device/fast_divide.cuh"
#include "services/proposer/synth/device/broadcast_groups.cuh"
#include "services/proposer/synth/device/elementwise_path.cuh"
#include "services/proposer/synth/device/copy_view.cuh"
#include "services/proposer/synth/device/ticket_order.cuh"
#include "services/proposer/synth/device/spread_operand.cuh"
#include "services/proposer/synth/device/softmax_exp.cuh"
#undef KF_HD

// The .cuh texts, to embed in kernel sources after DevicePreamble (which defines KF_HD for the
// device; broadcast groups need the fast division before them, elementwise paths the groups).
std::string_view FastDivideSource();
std::string_view BroadcastGroupsSource();
std::string_view ElementwisePathSource();
std::string_view CopyViewSource();  // after BroadcastGroupsSource
std::string_view TicketOrderSource();
std::string_view SpreadOperandSource();  // after FastDivideSource
std::string_view SoftmaxExpSource();

}  // namespace kforge::synth
