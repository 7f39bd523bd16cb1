#include "services/proposer/synth/occupancy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kforge::synth {
namespace {

int MinBlocks(const GpuModel& gpu, int threads, int percent) {
  if (percent <= 0 || threads <= 0) return 0;
  const int blocks = (gpu.max_threads_per_sm * percent / 100) / threads;
  return blocks > 1 ? std::min(blocks, gpu.max_blocks_per_sm) : 0;
}

}  // namespace

ParamDef OccupancyParam() {
  return {"occupancy", {"0", "50", "100"},
          "% of the SM's threads resident: registers capped so they fit (0: the compiler's)"};
}

int MinBlocksPerSm(const GpuModel& gpu, const Config& config) {
  return MinBlocks(gpu, config.GetInt("threads"), config.GetInt("occupancy"));
}

std::string CheckOccupancy(const GpuModel& gpu, const Config& config) {
  const int percent = config.GetInt("occupancy");
  if (percent == 0 || MinBlocksPerSm(gpu, config) > 0) return "";
  return absl::StrCat("occupancy ", percent, "% of ", gpu.max_threads_per_sm,
                      " threads is one block of ", config.GetInt("threads"),
                      ": no cap beyond the block's own, the kernel of occupancy 0");
}

int OccupancyRegisters(const GpuModel& gpu, int threads, int min_blocks, int estimate) {
  const int uncapped = std::max(estimate, kUncappedRegisters);
  if (min_blocks == 0) return uncapped;
  // The compiler's cap: the register file shared by the blocks, in steps of 8.
  const int cap = std::min(255, (gpu.registers_per_sm / (min_blocks * threads)) / 8 * 8);
  return std::min(uncapped, cap);
}

double SpillFactor(int needed, int granted) {
  return 1.0 + std::max(0, needed - granted - 4) / 16.0;
}

}  // namespace kforge::synth
