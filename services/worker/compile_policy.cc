// Source and option policy for candidate compiles (see compile_policy.h).
#include "services/worker/compile_policy.h"

#include <cctype>
#include <filesystem>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace kforge {
namespace {

absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status Refuse(absl::string_view message) { return absl::InvalidArgumentError(message); }

// 1-based line of byte `offset`, for messages.
int LineOf(std::string_view text, size_t offset) {
  int line = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) line += text[i] == '\n';
  return line;
}

// Removes backslash-newline splices, so "#\<newline>include" is seen as "#include". Line
// numbers in messages are then those of the spliced text (they differ only where a line was
// continued).
std::string Splice(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\\' && i + 1 < source.size() && source[i + 1] == '\n') {
      ++i;
      continue;
    }
    if (source[i] == '\\' && i + 2 < source.size() && source[i + 1] == '\r' &&
        source[i + 2] == '\n') {
      i += 2;
      continue;
    }
    out.push_back(source[i]);
  }
  return out;
}

// Blanks comments (keeping newlines) and, when `blank_literals`, the contents of string and
// character literals, so later scans see only code.
std::string StripComments(std::string_view text, bool blank_literals) {
  std::string out(text);
  size_t i = 0;
  while (i < out.size()) {
    char c = out[i];
    if (c == '/' && i + 1 < out.size() && out[i + 1] == '/') {
      while (i < out.size() && out[i] != '\n') out[i++] = ' ';
    } else if (c == '/' && i + 1 < out.size() && out[i + 1] == '*') {
      out[i++] = ' ';
      out[i++] = ' ';
      while (i < out.size() && !(out[i] == '*' && i + 1 < out.size() && out[i + 1] == '/')) {
        if (out[i] != '\n') out[i] = ' ';
        ++i;
      }
      for (int k = 0; k < 2 && i < out.size(); ++k) out[i++] = ' ';
    } else if (c == '"' || c == '\'') {
      ++i;
      while (i < out.size() && out[i] != c && out[i] != '\n') {
        if (out[i] == '\\' && i + 1 < out.size()) {
          if (blank_literals) out[i] = ' ';
          ++i;
        }
        if (blank_literals) out[i] = ' ';
        ++i;
      }
      ++i;  // closing quote
    } else {
      ++i;
    }
  }
  return out;
}

bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Offset of identifier `word` as a whole token in `code`, or npos.
size_t FindIdentifier(std::string_view code, std::string_view word) {
  size_t pos = code.find(word);
  while (pos != std::string_view::npos) {
    bool starts = pos == 0 || !IsIdentChar(code[pos - 1]);
    bool ends = pos + word.size() >= code.size() || !IsIdentChar(code[pos + word.size()]);
    if (starts && ends) return pos;
    pos = code.find(word, pos + 1);
  }
  return std::string_view::npos;
}

bool IsSafeHeaderPath(std::string_view path) {
  if (path.empty() || !IsIdentChar(path[0]) || path.find("..") != std::string_view::npos) {
    return false;
  }
  for (char c : path) {
    if (!IsIdentChar(c) && c != '.' && c != '/' && c != '+' && c != '-') return false;
  }
  return true;
}

// Hand-written rather than std::regex: libstdc++'s regex recurses per character and a
// hostile 256 KiB line would overflow the worker's stack.
absl::Status CheckIncludes(std::string_view code) {
  size_t start = 0;
  int line = 0;
  while (start < code.size()) {
    size_t end = code.find('\n', start);
    if (end == std::string_view::npos) end = code.size();
    ++line;
    std::string_view text = code.substr(start, end - start);
    start = end + 1;
    size_t i = text.find_first_not_of(" \t");
    if (i == std::string_view::npos) continue;
    if (text[i] == '#') {
      i += 1;
    } else if (text.compare(i, 2, "%:") == 0) {
      i += 2;
    } else {
      continue;
    }
    i = text.find_first_not_of(" \t", i);
    if (i == std::string_view::npos) continue;
    size_t name_end = i;
    while (name_end < text.size() && IsIdentChar(text[name_end])) ++name_end;
    std::string_view name = text.substr(i, name_end - i);
    if (name != "include" && name != "include_next" && name != "import") continue;
    std::string_view operand = text.substr(name_end);
    size_t first = operand.find_first_not_of(" \t\r");
    size_t last = operand.find_last_not_of(" \t\r");
    operand = first == std::string_view::npos ? std::string_view()
                                              : operand.substr(first, last - first + 1);
    bool literal = operand.size() >= 2 && ((operand.front() == '<' && operand.back() == '>') ||
                                           (operand.front() == '"' && operand.back() == '"'));
    if (!literal) {
      return Refuse(absl::StrCat("line ", line,
                                 ": #include must name a header literally, as \"name.h\" or "
                                 "<name.h> (found '",
                                 AV(operand.substr(0, 80)), "')"));
    }
    std::string_view path = operand.substr(1, operand.size() - 2);
    if (!IsSafeHeaderPath(path)) {
      return Refuse(absl::StrCat("line ", line, ": #include \"", AV(path.substr(0, 80)),
                                 "\" is refused: only relative header names without '..' "
                                 "(kforge_device.h, cuda_fp16.h, cuda/std/...) may be included"));
    }
  }
  return absl::OkStatus();
}

bool OneOf(std::string_view flag, std::initializer_list<std::string_view> options) {
  for (std::string_view option : options) {
    if (flag == option) return true;
  }
  return false;
}

// `flag` is NAME=true|false for one of `names`.
bool IsBoolOption(std::string_view flag, std::initializer_list<std::string_view> names) {
  size_t eq = flag.find('=');
  if (eq == std::string_view::npos) return false;
  std::string_view value = flag.substr(eq + 1);
  return OneOf(flag.substr(0, eq), names) && (value == "true" || value == "false");
}

bool IsAllowedFlag(std::string_view flag) {
  if (OneOf(flag, {"-lineinfo", "--generate-line-info", "--use_fast_math", "-use_fast_math",
                   "--restrict", "-restrict", "--extra-device-vectorization",
                   "-extra-device-vectorization", "--device-as-default-execution-space",
                   "-default-device", "-std=c++17", "-std=c++20", "--std=c++17", "--std=c++20",
                   "-w", "--disable-warnings", "--device-int128", "-device-int128"})) {
    return true;
  }
  if (IsBoolOption(flag, {"--ftz", "-ftz", "--prec-div", "-prec-div", "--prec-sqrt", "-prec-sqrt",
                          "--fmad", "-fmad"})) {
    return true;
  }
  if (flag.size() > 200) return false;  // bounds the regex work below
  static const std::regex kDefine(
      R"(^(-D|--define-macro=)[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+-]*)?$)");
  static const std::regex kDiag(R"(^--diag-suppress=[0-9]+(,[0-9]+)*$)");
  std::string text(flag);
  return std::regex_match(text, kDefine) || std::regex_match(text, kDiag);
}

bool IsRdcFlag(std::string_view flag) {
  return flag == "-rdc" || flag == "-dc" || absl::StartsWith(AV(flag), "-rdc=") ||
         absl::StartsWith(AV(flag), "--relocatable-device-code") || flag == "--device-c" ||
         flag == "-dlto" || flag == "--dlink-time-opt";
}

}  // namespace

size_t FindInvalidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size(), i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int length;
    uint32_t min_value;
    uint32_t value;
    if ((c & 0xE0) == 0xC0) {
      length = 2, min_value = 0x80, value = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3, min_value = 0x800, value = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4, min_value = 0x10000, value = c & 0x07;
    } else {
      return i;
    }
    if (i + length > n) return i;
    for (int k = 1; k < length; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      value = (value << 6) | (s[i + k] & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and values past U+10FFFF are invalid.
    if (value < min_value || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return i;
    i += length;
  }
  return std::string_view::npos;
}

std::string CanonicalSource(std::string_view source) {
  std::string out;
  out.reserve(source.size() + 1);
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r' && i + 1 < source.size() && source[i + 1] == '\n') continue;
    out.push_back(source[i]);
  }
  if (out.empty() || out.back() != '\n') out.push_back('\n');
  return out;
}

absl::Status CheckSourcePolicy(std::string_view source) {
  if (source.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return Refuse("the source is empty");
  }
  if (source.size() > kMaxSourceBytes) {
    return Refuse(absl::StrCat("the source is ", source.size(), " bytes; at most ", kMaxSourceBytes,
                               " are accepted (write a smaller kernel)"));
  }
  if (size_t bad = FindInvalidUtf8(source); bad != std::string_view::npos) {
    return Refuse(absl::StrCat("the source is not valid UTF-8 (line ", LineOf(source, bad),
                               ", byte offset ", bad, ")"));
  }
  if (size_t nul = source.find('\0'); nul != std::string_view::npos) {
    return Refuse(absl::StrCat("the source contains a NUL byte (line ", LineOf(source, nul), ")"));
  }
  std::string spliced = Splice(source);
  std::string code = StripComments(spliced, /*blank_literals=*/true);
  if (size_t pos = code.find("<<<"); pos != std::string::npos) {
    return Refuse(absl::StrCat("line ", LineOf(code, pos),
                               ": device-side kernel launches (<<<...>>>, dynamic parallelism) "
                               "are refused; express every launch in the launch plan"));
  }
  for (std::string_view api : {"cudaLaunchDevice", "cudaLaunchDeviceV2", "cudaGetParameterBuffer",
                               "cudaGetParameterBufferV2", "cudaStreamTailLaunch",
                               "cudaStreamFireAndForget", "cudaLaunchKernel"}) {
    if (size_t pos = FindIdentifier(code, api); pos != std::string_view::npos) {
      return Refuse(absl::StrCat("line ", LineOf(code, pos), ": ", AV(api),
                                 " (dynamic parallelism) is refused; express every launch in "
                                 "the launch plan"));
    }
  }
  return CheckIncludes(StripComments(spliced, /*blank_literals=*/false));
}

absl::Status CheckCompileOptions(const v1::CompileOptions& options) {
  static const std::regex kArch(R"(^sm_[0-9]{2,3}[af]?$)");
  if (options.arch().size() > 16 || !std::regex_match(options.arch(), kArch)) {
    return Refuse(absl::StrCat("arch '", options.arch().substr(0, 40),
                               "' is not a real GPU architecture of the form sm_90 or sm_90a"));
  }
  if (options.max_registers() != 0 &&
      (options.max_registers() < 16 || options.max_registers() > 255)) {
    return Refuse(
        absl::StrCat("max_registers ", options.max_registers(), " is outside 16..255 (0: no cap)"));
  }
  if (options.extra_flags_size() > 64) {
    return Refuse(absl::StrCat(options.extra_flags_size(), " extra flags; at most 64"));
  }
  for (const std::string& flag : options.extra_flags()) {
    if (IsRdcFlag(flag)) {
      return Refuse(absl::StrCat("flag '", flag.substr(0, 80),
                                 "' is refused: relocatable device code and device linking are "
                                 "not supported (a candidate is one self-contained module)"));
    }
    if (!IsAllowedFlag(flag)) {
      return Refuse(absl::StrCat(
          "flag '", flag.substr(0, 80),
          "' is not allowed; allowed extra flags: -lineinfo, --use_fast_math, --restrict, "
          "--extra-device-vectorization, -default-device, -std=c++17|c++20, -w, "
          "--device-int128, --ftz/--prec-div/--prec-sqrt/--fmad=true|false, -DNAME[=VALUE], "
          "--diag-suppress=N"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> NvrtcFlags(const v1::CompileOptions& options,
                                    const std::string& cuda_include_dir) {
  std::vector<std::string> flags = {absl::StrCat("--gpu-architecture=", options.arch()),
                                    "-Xptxas=-v"};
  bool has_std = false;
  for (const std::string& flag : options.extra_flags()) {
    has_std = has_std || absl::StrContains(flag, "std=");
  }
  if (!has_std) flags.push_back("-std=c++17");
  if (options.fast_math()) flags.push_back("--use_fast_math");
  if (options.max_registers() > 0) {
    flags.push_back(absl::StrCat("--maxrregcount=", options.max_registers()));
  }
  for (const std::string& flag : options.extra_flags()) flags.push_back(flag);
  if (!cuda_include_dir.empty()) {
    flags.push_back(absl::StrCat("-I", cuda_include_dir));
    std::error_code ec;
    // CUDA 13 keeps libcu++ (cuda/std/...) under include/cccl.
    if (std::filesystem::is_directory(cuda_include_dir + "/cccl", ec)) {
      flags.push_back(absl::StrCat("-I", cuda_include_dir, "/cccl"));
    }
  }
  return flags;
}

}  // namespace kforge
