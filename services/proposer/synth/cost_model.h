// Cost model: the GPU the proposals are for (from ProposeRequest.gpu, H200 defaults) and a
// rough time estimate per launch — bytes moved at the achievable bandwidth, occupancy,
// parallelism in flight, wave tails, per-block latency — used as the prior that orders
// proposals. It ranks configs; it does not predict times to better than a factor of two.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kforge/v1/common.pb.h"

namespace kforge::synth {

struct GpuModel {
  std::string arch = "sm_90";
  int sm_count = 132;
  int64_t shared_bytes_per_sm = 228 * 1024;
  int64_t shared_bytes_per_block_optin = 227 * 1024;
  double bandwidth_bytes_per_s = 4.24e12;
  int64_t l2_bytes = 60ll << 20;  // the H200 has 60 MB (../shared/GPU.md)
  int max_threads_per_sm = 2048;
  int max_blocks_per_sm = 32;
  int registers_per_sm = 65536;
  double clock_hz = 1.755e9;
  double launch_overhead_s = 2.5e-6;

  // H200 defaults overridden by whatever `info` reports.
  static GpuModel FromInfo(const v1::GpuInfo& info);
  // 90 for "sm_90"; 0 when unparsable.
  int ArchNumber() const;
  bool SupportsClusters() const { return ArchNumber() >= 90; }
};

// What one launch does, as the cost model sees it.
struct LaunchCost {
  double blocks = 1;
  int threads = 128;
  int64_t shared_bytes = 0;  // static + dynamic per block
  int registers = 32;        // per thread, estimated
  double dram_bytes = 0;     // bytes that must cross DRAM
  double l2_bytes = 0;       // re-reads likely served by L2
  double bytes_in_flight_per_thread = 16;  // independent loads a thread issues at once
  double ops = 0;                   // simple instructions over all threads
  double block_latency_cycles = 0;  // serial latency of one block's work (syncs, reductions)
  // Blocks that wait for each other (a cluster, a cooperative split): resident blocks do not
  // hide one another's latency.
  bool lockstep = false;
  double cycles_per_extra_round = 0;  // start-up and drain of each wave after the first
};

// Narrow accesses reach less of the bandwidth than 8- and 16-byte ones (more requests per
// byte through the load/store units): a factor >= 1 on the bytes of a launch.
double AccessWidthPenalty(int bytes_per_access);

// Resident blocks per SM; 0 when the launch cannot run at all.
int BlocksPerSm(const GpuModel& gpu, int threads, int64_t shared_bytes, int registers);
double EstimateLaunchSeconds(const GpuModel& gpu, const LaunchCost& cost);
double EstimateSeconds(const GpuModel& gpu, const std::vector<LaunchCost>& launches);

}  // namespace kforge::synth
