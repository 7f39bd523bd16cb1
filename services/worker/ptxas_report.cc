// Parser of ptxas -v output. The lines it reads look like
//   ptxas info    : Compiling entry function 'kf_rows' for 'sm_90'
//   ptxas info    : Function properties for kf_rows
//   ptxas         .     256 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
//   ptxas info    : Used 34 registers, used 1 barriers, 1024 bytes smem, 400 bytes cmem[0]
#include "services/worker/ptxas_report.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace kforge {
namespace {

// The integer that ends (before blanks) at `pos` of `line`, or -1.
long long NumberEndingAt(std::string_view line, size_t pos) {
  size_t end = pos;
  while (end > 0 && line[end - 1] == ' ') --end;
  size_t start = end;
  while (start > 0 && line[start - 1] >= '0' && line[start - 1] <= '9') --start;
  if (start == end || end - start > 12) return -1;
  return std::strtoll(std::string(line.substr(start, end - start)).c_str(), nullptr, 10);
}

// The integer just before the first `unit` in `line` ("34 registers" -> 34), or -1.
long long NumberBefore(std::string_view line, std::string_view unit) {
  size_t pos = line.find(unit);
  return pos == std::string_view::npos ? -1 : NumberEndingAt(line, pos);
}

int Clamp(long long value) { return static_cast<int>(std::clamp<long long>(value, 0, 0x7fffffff)); }

// The text between the first pair of single quotes after `prefix`, or "" if absent.
std::string_view QuotedAfter(std::string_view line, std::string_view prefix) {
  size_t pos = line.find(prefix);
  if (pos == std::string_view::npos) return {};
  size_t open = line.find('\'', pos + prefix.size());
  if (open == std::string_view::npos) return {};
  size_t close = line.find('\'', open + 1);
  if (close == std::string_view::npos) return {};
  return line.substr(open + 1, close - open - 1);
}

}  // namespace

int MaxThreadsForRegisters(int registers) {
  if (registers <= 0) return 1024;
  int per_warp = (registers * 32 + 255) / 256 * 256;
  int warps = 65536 / per_warp;
  return std::min(1024, warps * 32);
}

std::vector<v1::KernelResources> ParsePtxasReport(std::string_view log) {
  std::vector<v1::KernelResources> kernels;
  v1::KernelResources* entry = nullptr;  // the entry function being reported
  bool properties_of_entry = false;      // the last "Function properties" names that entry
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string_view::npos) end = log.size();
    std::string_view line = log.substr(start, end - start);
    start = end + 1;
    if (line.find("ptxas") != 0) continue;

    if (std::string_view name = QuotedAfter(line, "Compiling entry function"); !name.empty()) {
      kernels.emplace_back();
      entry = &kernels.back();
      entry->set_entry_point(std::string(name));
      properties_of_entry = false;
      continue;
    }
    if (size_t pos = line.find("Function properties for "); pos != std::string_view::npos) {
      std::string_view name = line.substr(pos + 24);
      while (!name.empty() && (name.back() == ' ' || name.back() == '\r')) name.remove_suffix(1);
      properties_of_entry = entry != nullptr && name == entry->entry_point();
      continue;
    }
    if (line.find("bytes stack frame") != std::string_view::npos) {
      if (properties_of_entry) {  // device functions' frames are not the entry's
        entry->set_local_bytes(Clamp(NumberBefore(line, "bytes stack frame")));
        entry->set_spill_store_bytes(Clamp(NumberBefore(line, "bytes spill stores")));
        entry->set_spill_load_bytes(Clamp(NumberBefore(line, "bytes spill loads")));
      }
      continue;
    }
    if (entry != nullptr && line.find("Used ") != std::string_view::npos &&
        line.find(" registers") != std::string_view::npos) {
      int registers = Clamp(NumberBefore(line, "registers"));
      entry->set_registers(registers);
      entry->set_max_threads_per_block(MaxThreadsForRegisters(registers));
      if (long long smem = NumberBefore(line, "bytes smem"); smem >= 0) {
        entry->set_static_shared_bytes(Clamp(smem));
      }
      if (long long stack = NumberBefore(line, "bytes cumulative stack size");
          stack > entry->local_bytes()) {
        entry->set_local_bytes(Clamp(stack));  // includes the frames of called functions
      }
      // Constant banks: "400 bytes cmem[0], 8 bytes cmem[2]".
      long long cmem = 0;
      for (size_t at = line.find("bytes cmem["); at != std::string_view::npos;
           at = line.find("bytes cmem[", at + 1)) {
        cmem += std::max(0LL, NumberEndingAt(line, at));
      }
      entry->set_const_bytes(Clamp(cmem));
      entry = nullptr;  // the report of this entry is complete
      properties_of_entry = false;
    }
  }
  return kernels;
}

}  // namespace kforge
