// Recursive-descent evaluator of launch-plan expressions; evaluates while it parses, so one
// left-to-right pass does both and the work is linear in the input.
#include "common/expression.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace kforge {
namespace {

// Quoted in errors; long garbage is cut so a message stays one readable line.
std::string Excerpt(absl::string_view expr) {
  constexpr size_t kMax = 120;
  if (expr.size() <= kMax) return std::string(expr);
  return absl::StrCat(expr.substr(0, kMax), "...");
}

std::string DescribeChar(char c) {
  if (std::isprint(static_cast<unsigned char>(c))) return absl::StrFormat("'%c'", c);
  return absl::StrFormat("byte 0x%02x", static_cast<unsigned char>(c));
}

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Evaluator {
 public:
  // `symbols` null: syntax check only; values are dummies and arithmetic never fails.
  Evaluator(absl::string_view expr, const SymbolTable* symbols) : expr_(expr), symbols_(symbols) {}

  absl::StatusOr<int64_t> Run() {
    if (expr_.size() > kMaxExpressionLength) {
      return Fail(absl::StrFormat("longer than %d characters", kMaxExpressionLength));
    }
    int64_t value = 0;
    SkipSpace();
    if (pos_ == expr_.size()) return Fail("empty expression");
    if (!ParseSum(&value)) return Error();
    SkipSpace();
    if (pos_ != expr_.size()) {
      return FailAt(absl::StrCat("unexpected ", DescribeChar(expr_[pos_])));
    }
    return value;
  }

 private:
  absl::Status Error() const { return absl::InvalidArgumentError(error_); }

  absl::Status Fail(absl::string_view problem) {
    SetError(problem);
    return Error();
  }
  absl::Status FailAt(absl::string_view problem) {
    SetErrorAt(problem);
    return Error();
  }
  bool SetError(absl::string_view problem) {
    if (error_.empty()) {
      error_ = absl::StrCat("launch plan expression '", Excerpt(expr_), "': ", problem);
    }
    return false;
  }
  bool SetErrorAt(absl::string_view problem) {
    return SetError(absl::StrCat(problem, " at column ", pos_ + 1));
  }

  void SkipSpace() {
    while (pos_ < expr_.size() && std::isspace(static_cast<unsigned char>(expr_[pos_]))) ++pos_;
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < expr_.size() && expr_[pos_] == c;
  }

  // Depth counts every nested construct (parentheses, calls, unary minus) so the C++ stack
  // stays bounded whatever the input.
  bool Enter() {
    if (++depth_ > kMaxExpressionDepth) {
      return SetErrorAt(absl::StrFormat("nested deeper than %d levels", kMaxExpressionDepth));
    }
    return true;
  }
  void Leave() { --depth_; }

  bool Overflow(absl::string_view what) {
    return SetError(absl::StrCat("64-bit overflow in ", what));
  }

  bool Apply(char op, int64_t a, int64_t b, int64_t* out) {
    if (symbols_ == nullptr) {  // syntax check: no arithmetic
      *out = 1;
      return true;
    }
    switch (op) {
      case '+':
        if (__builtin_add_overflow(a, b, out)) return Overflow(absl::StrCat(a, " + ", b));
        return true;
      case '-':
        if (__builtin_sub_overflow(a, b, out)) return Overflow(absl::StrCat(a, " - ", b));
        return true;
      case '*':
        if (__builtin_mul_overflow(a, b, out)) return Overflow(absl::StrCat(a, " * ", b));
        return true;
      case '/':
        if (b == 0) return SetError(absl::StrCat("division by zero in ", a, " / 0"));
        if (a == std::numeric_limits<int64_t>::min() && b == -1) {
          return Overflow(absl::StrCat(a, " / -1"));
        }
        *out = a / b;
        return true;
      case '%':
        if (b == 0) return SetError(absl::StrCat("division by zero in ", a, " % 0"));
        *out = (b == -1) ? 0 : a % b;  // INT64_MIN % -1 traps in hardware; it is 0
        return true;
    }
    return SetError("internal: unknown operator");
  }

  // sum := product (('+' | '-') product)*
  bool ParseSum(int64_t* out) {
    if (!ParseProduct(out)) return false;
    while (true) {
      SkipSpace();
      if (pos_ >= expr_.size() || (expr_[pos_] != '+' && expr_[pos_] != '-')) return true;
      char op = expr_[pos_++];
      int64_t rhs = 0;
      if (!ParseProduct(&rhs)) return false;
      if (!Apply(op, *out, rhs, out)) return false;
    }
  }

  // product := unary (('*' | '/' | '%') unary)*
  bool ParseProduct(int64_t* out) {
    if (!ParseUnary(out)) return false;
    while (true) {
      SkipSpace();
      if (pos_ >= expr_.size() ||
          (expr_[pos_] != '*' && expr_[pos_] != '/' && expr_[pos_] != '%')) {
        return true;
      }
      char op = expr_[pos_++];
      int64_t rhs = 0;
      if (!ParseUnary(&rhs)) return false;
      if (!Apply(op, *out, rhs, out)) return false;
    }
  }

  // unary := '-' unary | '+' unary | primary
  bool ParseUnary(int64_t* out) {
    SkipSpace();
    if (pos_ < expr_.size() && (expr_[pos_] == '-' || expr_[pos_] == '+')) {
      char op = expr_[pos_++];
      if (!Enter()) return false;
      int64_t operand = 0;
      bool ok = ParseUnary(&operand);
      Leave();
      if (!ok) return false;
      if (op == '+') {
        *out = operand;
        return true;
      }
      return Apply('-', 0, operand, out);
    }
    return ParsePrimary(out);
  }

  // primary := INTEGER | NAME | NAME '(' sum (',' sum)* ')' | '(' sum ')'
  bool ParsePrimary(int64_t* out) {
    SkipSpace();
    if (pos_ >= expr_.size()) {
      return SetErrorAt("expected a number, symbol or '(' but the expression ended");
    }
    char c = expr_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c))) return ParseInteger(out);
    if (c == '(') {
      ++pos_;
      if (!Enter()) return false;
      bool ok = ParseSum(out);
      Leave();
      if (!ok) return false;
      if (!Peek(')')) return SetErrorAt("expected ')'");
      ++pos_;
      return true;
    }
    if (IsIdentStart(c)) {
      size_t start = pos_;
      while (pos_ < expr_.size() && IsIdentChar(expr_[pos_])) ++pos_;
      absl::string_view name = expr_.substr(start, pos_ - start);
      if (Peek('(')) return ParseCall(name, start, out);
      return LookUp(name, start, out);
    }
    return SetErrorAt(absl::StrCat("expected a number, symbol or '(' but found ", DescribeChar(c)));
  }

  bool ParseInteger(int64_t* out) {
    int64_t value = 0;
    size_t start = pos_;
    while (pos_ < expr_.size() && std::isdigit(static_cast<unsigned char>(expr_[pos_]))) {
      if (__builtin_mul_overflow(value, 10, &value) ||
          __builtin_add_overflow(value, expr_[pos_] - '0', &value)) {
        pos_ = start;
        return SetErrorAt("integer literal does not fit in 64 bits");
      }
      ++pos_;
    }
    if (pos_ < expr_.size() && IsIdentChar(expr_[pos_])) {
      return SetErrorAt(absl::StrCat("unexpected ", DescribeChar(expr_[pos_]), " after a number"));
    }
    *out = value;
    return true;
  }

  bool LookUp(absl::string_view name, size_t start, int64_t* out) {
    if (symbols_ == nullptr) {
      *out = 1;
      return true;
    }
    auto it = symbols_->find(name);
    if (it == symbols_->end()) {
      return SetError(absl::StrCat("unknown symbol '", name, "' at column ", start + 1));
    }
    *out = it->second;
    return true;
  }

  bool ParseCall(absl::string_view name, size_t start, int64_t* out) {
    enum class Fn { kCeilDiv, kMin, kMax } fn;
    if (name == "ceil_div") {
      fn = Fn::kCeilDiv;
    } else if (name == "min") {
      fn = Fn::kMin;
    } else if (name == "max") {
      fn = Fn::kMax;
    } else {
      return SetError(absl::StrCat("unknown function '", name, "' at column ", start + 1,
                                   " (the functions are ceil_div, min and max)"));
    }
    ++pos_;  // '('
    if (!Enter()) return false;
    // Arguments fold as they are parsed, so no list grows with the input.
    int64_t acc = 0, first = 0, second = 0;
    int count = 0;
    while (true) {
      int64_t arg = 0;
      if (!ParseSum(&arg)) return false;
      ++count;
      if (fn == Fn::kCeilDiv) {
        if (count == 1) first = arg;
        if (count == 2) second = arg;
      } else if (count == 1) {
        acc = arg;
      } else {
        acc = (fn == Fn::kMin) ? std::min(acc, arg) : std::max(acc, arg);
      }
      SkipSpace();
      if (pos_ < expr_.size() && expr_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < expr_.size() && expr_[pos_] == ')') {
        ++pos_;
        break;
      }
      return SetErrorAt(absl::StrCat("expected ',' or ')' in the arguments of ", name));
    }
    Leave();
    if (fn == Fn::kCeilDiv) {
      if (count != 2) {
        return SetError(absl::StrCat("ceil_div takes 2 arguments, got ", count));
      }
      return CeilDiv(first, second, out);
    }
    if (count < 2) {
      return SetError(absl::StrCat(name, " takes at least 2 arguments, got ", count));
    }
    *out = (symbols_ == nullptr) ? 1 : acc;
    return true;
  }

  bool CeilDiv(int64_t a, int64_t b, int64_t* out) {
    if (symbols_ == nullptr) {
      *out = 1;
      return true;
    }
    if (b == 0) return SetError("division by zero in ceil_div");
    if (a == std::numeric_limits<int64_t>::min() && b == -1) {
      return Overflow(absl::StrCat("ceil_div(", a, ", -1)"));
    }
    int64_t q = a / b;
    // Round toward +infinity: bump when there is a remainder and the exact quotient is
    // positive (remainder has the sign of a; same sign as b means a positive quotient).
    if (a % b != 0 && ((a < 0) == (b < 0))) ++q;
    *out = q;
    return true;
  }

  absl::string_view expr_;
  const SymbolTable* symbols_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::string error_;
};

}  // namespace

absl::StatusOr<int64_t> EvaluateExpression(std::string_view expr, const SymbolTable& symbols) {
  return Evaluator(absl::string_view(expr.data(), expr.size()), &symbols).Run();
}

absl::Status CheckExpressionSyntax(std::string_view expr) {
  return Evaluator(absl::string_view(expr.data(), expr.size()), nullptr).Run().status();
}

bool IsIdentifier(std::string_view name) {
  if (name.empty() || !IsIdentStart(name[0])) return false;
  for (char c : name) {
    if (!IsIdentChar(c)) return false;
  }
  return true;
}

}  // namespace kforge
