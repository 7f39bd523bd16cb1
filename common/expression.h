// The launch-plan expression language (docs/launch-plan.md): 64-bit integers, + - * / %,
// unary minus, parentheses, ceil_div/min/max and symbols. Evaluation is total and fast: the
// input may be LLM output, so length and nesting are bounded and every overflow is an error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kforge {

// Symbol name -> value ("in0_numel" -> 4096, "num_sms" -> 132, let-bound names).
using SymbolTable = absl::flat_hash_map<std::string, int64_t>;

// Longer expressions or deeper nesting (parentheses, calls, unary minus) are refused.
inline constexpr size_t kMaxExpressionLength = 4096;
inline constexpr int kMaxExpressionDepth = 64;

// Evaluates `expr`. Errors are InvalidArgument and read
//   launch plan expression 'ceil_div(N, 0)': division by zero in ceil_div
// with the column (1-based) for syntax errors.
absl::StatusOr<int64_t> EvaluateExpression(std::string_view expr, const SymbolTable& symbols);

// Checks syntax only (no symbol lookup, no arithmetic errors): for validating a plan before
// its symbols are known.
absl::Status CheckExpressionSyntax(std::string_view expr);

// True for [A-Za-z_][A-Za-z0-9_]* (symbol and entry point names).
bool IsIdentifier(std::string_view name);

}  // namespace kforge
