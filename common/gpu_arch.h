// GPU architecture names as NVRTC and the launch plans spell them.
#pragma once

#include <cctype>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace kforge {

// The compute capability of "sm_90", "sm_90a" or "compute_80" as a number (90, 90, 80); 0 for
// anything else.
inline int ArchNumber(absl::string_view arch) {
  if (!absl::ConsumePrefix(&arch, "sm_")) absl::ConsumePrefix(&arch, "compute_");
  while (!arch.empty() && !std::isdigit(static_cast<unsigned char>(arch.back()))) {
    arch.remove_suffix(1);  // "sm_90a"
  }
  int number = 0;
  if (!absl::SimpleAtoi(arch, &number)) return 0;
  return number;
}

}  // namespace kforge
