// Texts embedded at build time for LLM prompts: the kernel ABI header and the launch-plan
// format, verbatim, so the prompt always matches what the worker compiles and reads.
#pragma once

#include <string_view>

namespace kforge {

// common/kforge_device.h
std::string_view KernelAbiHeaderText();
// docs/launch-plan.md
std::string_view LaunchPlanFormatText();

}  // namespace kforge
