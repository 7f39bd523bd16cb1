// libFuzzer entry point for the launch-plan parser and expression evaluator: any input must
// give a value or an error, never a crash, hang or sanitizer report. Built as a real fuzzer
// with -DKFORGE_BUILD_FUZZERS=ON (clang), and replayed over a corpus by a unit test.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/expression.h"
#include "common/launch_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const kforge::SymbolTable symbols = {{"N", 4096},
                                       {"M", -7},
                                       {"ZERO", 0},
                                       {"BIG", INT64_MAX},
                                       {"SMALL", INT64_MIN},
                                       {"in0_numel", 1 << 20},
                                       {"in0_size_last", 1024},
                                       {"num_sms", 132},
                                       {"int0", 3}};

  auto value = kforge::EvaluateExpression(input, symbols);
  // Evaluation is deterministic and a syntax error is an error in both modes.
  auto again = kforge::EvaluateExpression(input, symbols);
  if (value.ok() != again.ok() || (value.ok() && *value != *again)) std::abort();
  if (value.ok() && !kforge::CheckExpressionSyntax(input).ok()) std::abort();
  if (!value.ok() && value.status().message().empty()) std::abort();

  auto plan = kforge::LaunchPlan::Parse(input);
  if (plan.ok()) {
    if (plan->EntryPoints().empty()) std::abort();
    auto resolved = plan->Resolve(symbols);
    if (resolved.ok()) {
      for (const kforge::ResolvedLaunch& launch : resolved->launches) {
        if (launch.block.Product() > 1024 || launch.grid.x < 1 || launch.shared_bytes < 0) {
          std::abort();
        }
      }
    }
  }
  return 0;
}
