// Tests of the launch-plan expression evaluator: arithmetic, precedence, functions, and the
// errors garbage input must produce (overflow, division by zero, syntax, nesting).
#include "common/expression.h"

#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

int64_t Eval(std::string_view expr, const SymbolTable& symbols = {}) {
  auto value = EvaluateExpression(expr, symbols);
  EXPECT_TRUE(value.ok()) << expr << ": " << value.status();
  return value.ok() ? *value : -999999;
}

std::string ErrorOf(std::string_view expr, const SymbolTable& symbols = {}) {
  auto value = EvaluateExpression(expr, symbols);
  EXPECT_FALSE(value.ok()) << expr << " evaluated to " << *value;
  if (value.ok()) return "";
  EXPECT_EQ(value.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(value.status().message());
}

TEST(ExpressionTest, Arithmetic) {
  EXPECT_EQ(Eval("42"), 42);
  EXPECT_EQ(Eval("1 + 2"), 3);
  EXPECT_EQ(Eval("10 - 3 - 2"), 5);  // left associative
  EXPECT_EQ(Eval("6 * 7"), 42);
  EXPECT_EQ(Eval("100 / 7 / 2"), 7);
  EXPECT_EQ(Eval("17 % 5"), 2);
  EXPECT_EQ(Eval("-7 / 2"), -3);  // truncates toward zero
  EXPECT_EQ(Eval("-7 % 2"), -1);
  EXPECT_EQ(Eval("  \t3\n*\n4 "), 12);
}

TEST(ExpressionTest, Precedence) {
  EXPECT_EQ(Eval("2 + 3 * 4"), 14);
  EXPECT_EQ(Eval("(2 + 3) * 4"), 20);
  EXPECT_EQ(Eval("2 * 3 + 4 * 5"), 26);
  EXPECT_EQ(Eval("20 - 6 / 3"), 18);
  EXPECT_EQ(Eval("-2 * 3"), -6);
  EXPECT_EQ(Eval("-(2 + 3)"), -5);
  EXPECT_EQ(Eval("--5"), 5);
  EXPECT_EQ(Eval("2 - -3"), 5);
  EXPECT_EQ(Eval("((((1))))"), 1);
}

TEST(ExpressionTest, Functions) {
  EXPECT_EQ(Eval("ceil_div(10, 4)"), 3);
  EXPECT_EQ(Eval("ceil_div(12, 4)"), 3);
  EXPECT_EQ(Eval("ceil_div(0, 4)"), 0);
  EXPECT_EQ(Eval("ceil_div(-10, 4)"), -2);
  EXPECT_EQ(Eval("ceil_div(10, -4)"), -2);
  EXPECT_EQ(Eval("ceil_div(-10, -4)"), 3);
  EXPECT_EQ(Eval("min(3, 1, 2)"), 1);
  EXPECT_EQ(Eval("max(3, 1, 2)"), 3);
  EXPECT_EQ(Eval("max(min(5, 9), 2) * 2"), 10);
  EXPECT_EQ(Eval("ceil_div (7 , 2)"), 4);
}

TEST(ExpressionTest, Symbols) {
  SymbolTable symbols = {{"in0_numel", 4096}, {"in0_size_last", 128}, {"num_sms", 132}};
  EXPECT_EQ(Eval("in0_numel / in0_size_last", symbols), 32);
  EXPECT_EQ(Eval("ceil_div(in0_numel, 256) * num_sms", symbols), 16 * 132);
  EXPECT_THAT(ErrorOf("in1_numel + 1", symbols),
              HasSubstr("launch plan expression 'in1_numel + 1': unknown symbol 'in1_numel'"));
}

TEST(ExpressionTest, OverflowIsRefusedAndNamesTheExpression) {
  EXPECT_EQ(Eval("9223372036854775807"), std::numeric_limits<int64_t>::max());
  EXPECT_THAT(ErrorOf("9223372036854775807 + 1"),
              HasSubstr("launch plan expression '9223372036854775807 + 1': 64-bit overflow"));
  EXPECT_THAT(ErrorOf("N * N", {{"N", int64_t{1} << 40}}),
              HasSubstr("launch plan expression 'N * N': 64-bit overflow"));
  EXPECT_THAT(ErrorOf("-N - 2", {{"N", std::numeric_limits<int64_t>::max()}}),
              HasSubstr("64-bit overflow"));
  EXPECT_THAT(ErrorOf("M / -1", {{"M", std::numeric_limits<int64_t>::min()}}),
              HasSubstr("64-bit overflow"));
  EXPECT_THAT(ErrorOf("ceil_div(M, -1)", {{"M", std::numeric_limits<int64_t>::min()}}),
              HasSubstr("64-bit overflow"));
  EXPECT_THAT(ErrorOf("-M", {{"M", std::numeric_limits<int64_t>::min()}}),
              HasSubstr("64-bit overflow"));
  EXPECT_THAT(ErrorOf("99999999999999999999"), HasSubstr("does not fit in 64 bits"));
  EXPECT_EQ(Eval("M % -1", {{"M", std::numeric_limits<int64_t>::min()}}), 0);
}

TEST(ExpressionTest, DivisionByZero) {
  EXPECT_EQ(ErrorOf("ceil_div(N, 0)", {{"N", 5}}),
            "launch plan expression 'ceil_div(N, 0)': division by zero in ceil_div");
  EXPECT_THAT(ErrorOf("1 / (N - 5)", {{"N", 5}}), HasSubstr("division by zero"));
  EXPECT_THAT(ErrorOf("7 % 0"), HasSubstr("division by zero"));
}

TEST(ExpressionTest, BadSyntax) {
  EXPECT_THAT(ErrorOf(""), HasSubstr("empty expression"));
  EXPECT_THAT(ErrorOf("   "), HasSubstr("empty expression"));
  EXPECT_THAT(ErrorOf("1 +"), HasSubstr("expression ended"));
  EXPECT_THAT(ErrorOf("(1 + 2"), HasSubstr("expected ')' at column 7"));
  EXPECT_THAT(ErrorOf("1 2"), HasSubstr("unexpected '2' at column 3"));
  EXPECT_THAT(ErrorOf("2 ** 3"), HasSubstr("found '*' at column 4"));
  EXPECT_THAT(ErrorOf("pow(2, 3)"), HasSubstr("unknown function 'pow'"));
  EXPECT_THAT(ErrorOf("ceil_div(1)"), HasSubstr("ceil_div takes 2 arguments, got 1"));
  EXPECT_THAT(ErrorOf("ceil_div(1, 2, 3)"), HasSubstr("ceil_div takes 2 arguments, got 3"));
  EXPECT_THAT(ErrorOf("min(1)"), HasSubstr("min takes at least 2 arguments"));
  EXPECT_THAT(ErrorOf("max()"), HasSubstr("expected a number"));
  EXPECT_THAT(ErrorOf("12abc"), HasSubstr("after a number"));
  EXPECT_THAT(ErrorOf("1.5"), HasSubstr("unexpected '.'"));
  EXPECT_THAT(ErrorOf(std::string("1 +\x01")), HasSubstr("byte 0x01"));
  EXPECT_THAT(ErrorOf("min(1, 2"), HasSubstr("expected ',' or ')'"));
}

TEST(ExpressionTest, DeepNestingAndLongInputAreRefused) {
  std::string ok_nested =
      std::string(kMaxExpressionDepth, '(') + "1" + std::string(kMaxExpressionDepth, ')');
  EXPECT_EQ(Eval(ok_nested), 1);
  std::string deep = std::string(100000, '(') + "1" + std::string(100000, ')');
  EXPECT_THAT(ErrorOf(deep), HasSubstr("longer than"));
  std::string deep_short = std::string(1000, '(') + "1" + std::string(1000, ')');
  EXPECT_THAT(ErrorOf(deep_short), HasSubstr("nested deeper than 64 levels"));
  EXPECT_THAT(ErrorOf(std::string(1000, '-') + "1"), HasSubstr("nested deeper"));
  std::string calls;
  for (int i = 0; i < 500; ++i) calls += "min(1, ";
  EXPECT_THAT(ErrorOf(calls), HasSubstr("nested deeper"));
  // Long error inputs are cut in the message.
  std::string long_expr = "1 + " + std::string(300, '(');
  EXPECT_LT(ErrorOf(long_expr).size(), 260u);
}

TEST(ExpressionTest, SyntaxCheckIgnoresValues) {
  EXPECT_TRUE(CheckExpressionSyntax("ceil_div(UNKNOWN, 0) / 0").ok());
  EXPECT_FALSE(CheckExpressionSyntax("ceil_div(1,").ok());
  EXPECT_FALSE(CheckExpressionSyntax("foo(1)").ok());
}

TEST(ExpressionTest, Identifiers) {
  EXPECT_TRUE(IsIdentifier("kf_softmax_rows"));
  EXPECT_TRUE(IsIdentifier("_x1"));
  EXPECT_FALSE(IsIdentifier("1x"));
  EXPECT_FALSE(IsIdentifier(""));
  EXPECT_FALSE(IsIdentifier("a-b"));
}

}  // namespace
}  // namespace kforge
