// Cost model: occupancy and a bandwidth/latency time estimate per launch.
#include "services/proposer/synth/cost_model.h"

#include <algorithm>
#include <cmath>

#include "common/gpu_arch.h"

namespace kforge::synth {

GpuModel GpuModel::FromInfo(const v1::GpuInfo& info) {
  GpuModel gpu;
  if (!info.arch().empty()) gpu.arch = info.arch();
  if (info.sm_count() > 0) gpu.sm_count = info.sm_count();
  if (info.shared_memory_per_block_optin() > 0) {
    gpu.shared_bytes_per_block_optin = info.shared_memory_per_block_optin();
    gpu.shared_bytes_per_sm =
        std::max(gpu.shared_bytes_per_sm, gpu.shared_bytes_per_block_optin + 1024);
  }
  if (info.copy_bandwidth_bytes_per_s() > 0) {
    gpu.bandwidth_bytes_per_s = info.copy_bandwidth_bytes_per_s();
  }
  if (info.l2_bytes() > 0) gpu.l2_bytes = info.l2_bytes();
  const int arch = gpu.ArchNumber();
  if (arch > 0 && arch < 80) {
    gpu.max_blocks_per_sm = 16;
    gpu.max_threads_per_sm = arch == 75 ? 1024 : 2048;
  }
  return gpu;
}

int GpuModel::ArchNumber() const { return kforge::ArchNumber(arch); }

int BlocksPerSm(const GpuModel& gpu, int threads, int64_t shared_bytes, int registers) {
  if (threads <= 0 || threads > 1024) return 0;
  if (shared_bytes > gpu.shared_bytes_per_block_optin) return 0;
  const int regs = std::clamp(registers, 16, 255);
  // Registers are allocated per warp in units of 256.
  const int regs_per_warp = ((regs * 32 + 255) / 256) * 256;
  const int warps = (threads + 31) / 32;
  int by_regs = gpu.registers_per_sm / (regs_per_warp * warps);
  int by_threads = gpu.max_threads_per_sm / (warps * 32);
  // Each block also reserves 1 KiB of shared memory for the system.
  int by_smem = static_cast<int>(gpu.shared_bytes_per_sm / (shared_bytes + 1024));
  return std::max(0, std::min({gpu.max_blocks_per_sm, by_regs, by_threads, by_smem}));
}

double EstimateLaunchSeconds(const GpuModel& gpu, const LaunchCost& cost) {
  const int per_sm = BlocksPerSm(gpu, cost.threads, cost.shared_bytes, cost.registers);
  if (per_sm == 0) return 1.0;  // cannot launch: worse than anything real
  const double slots = static_cast<double>(per_sm) * gpu.sm_count;
  const double blocks = std::max(1.0, cost.blocks);
  const double resident = std::min(blocks, slots);
  const double waves = blocks / slots;
  // The last partial wave leaves SMs idle.
  const double wave_efficiency = waves <= 1 ? 1.0 : waves / std::ceil(waves);
  // Little's law: DRAM needs about a microsecond of bandwidth in flight to be saturated.
  const double needed_in_flight = gpu.bandwidth_bytes_per_s * 0.9e-6;
  const double in_flight = resident * cost.threads * cost.bytes_in_flight_per_thread;
  const double parallel_efficiency = std::clamp(in_flight / needed_in_flight, 0.02, 1.0);
  // DRAM loses the last partial wave only when there are few: over many short blocks the
  // last ones share the bandwidth among fewer and finish sooner. Charged at every wave count,
  // the tail ranked stride grids above one-shot ones that measured faster: against 36
  // committed H200 row sweeps the prior's first pick ran 1.146x the fastest config with it and
  // 1.128x without (geometric mean; mul-scale 1.05x -> 1.00x, bf16 attention softmax 1.57x ->
  // 1.14x, no row worse; docs/benchmarks/2026-12-02-prior-ranking.md).
  constexpr double kMemoryTailWaves = 4;
  const double memory_wave_efficiency = waves >= kMemoryTailWaves ? 1.0 : wave_efficiency;
  // A launch of fewer blocks than SMs draws DRAM through the SMs it has, each at most
  // kSmBandwidthShares times its even share: without the cap the prior put 4 blocks of 1024
  // threads first on a 200 KB batch norm (measured 2.43x the fastest, 49 blocks of 256).
  constexpr double kSmBandwidthShares = 8;
  const double sm_share =
      std::min(1.0, std::min(blocks, double(gpu.sm_count)) * kSmBandwidthShares / gpu.sm_count);
  const double achievable = gpu.bandwidth_bytes_per_s * 0.92 * parallel_efficiency *
                            memory_wave_efficiency * sm_share;
  const double memory_s = cost.dram_bytes / achievable + cost.l2_bytes / (achievable * 2.5);
  // SMs with few resident threads issue less than their peak.
  const double resident_threads_per_sm =
      std::min(resident / gpu.sm_count, static_cast<double>(per_sm)) * cost.threads;
  const double issue_efficiency = std::clamp(resident_threads_per_sm / 512.0, 0.05, 1.0);
  const double compute_s =
      cost.ops / (gpu.sm_count * 128.0 * gpu.clock_hz * issue_efficiency * wave_efficiency);
  // Serial latency per block is hidden by the other blocks resident on the SM, partly.
  const double rounds = std::ceil(std::max(1.0, waves));
  const double hidden_by = cost.lockstep ? 1.0 : std::sqrt(static_cast<double>(per_sm));
  const double latency_s = rounds * cost.block_latency_cycles / gpu.clock_hz / hidden_by +
                           (rounds - 1) * cost.cycles_per_extra_round / gpu.clock_hz;
  // An SM starts (and retires) a block about every 200 cycles at best: a stream split's output
  // pass in 131k blocks of 32 threads ran 132 us where the same bytes in 65k blocks ran 112
  // (H200, group norm 1x128x512x512, 2026-12-02). Over the 36 committed row sweeps Spearman
  // 0.792 -> 0.802, every first pick as it was; over the VAE group norms' stream twins the
  // first pick 1.105x -> 1.017x the fastest (docs/benchmarks/2026-12-02-prior-ranking.md).
  constexpr double kBlockStartsPerSmPerSecond = 10e6;
  const double schedule_s = blocks / (gpu.sm_count * kBlockStartsPerSmPerSecond);
  return std::max({memory_s, compute_s, schedule_s}) + latency_s + gpu.launch_overhead_s;
}

double AccessWidthPenalty(int bytes_per_access) {
  if (bytes_per_access >= 8) return 1.0;
  if (bytes_per_access >= 4) return 1.15;
  return 1.6;
}

double EstimateSeconds(const GpuModel& gpu, const std::vector<LaunchCost>& launches) {
  double total = 0;
  for (const LaunchCost& launch : launches) total += EstimateLaunchSeconds(gpu, launch);
  return total;
}

}  // namespace kforge::synth
