// Response parser: fenced blocks, device-code-only checks, launch-plan checks.
#include "services/proposer/llm/response_parser.h"

#include <algorithm>
#include <cctype>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/launch_plan.h"
#include "nlohmann/json.hpp"
#include "services/proposer/llm/string_view_compat.h"

namespace kforge {
namespace {

constexpr char kFormatReminder[] =
    " Answer with exactly one ```cuda block holding the complete kernel source and exactly one "
    "```json block holding its launch plan, nothing else in code blocks.";

struct FencedBlock {
  std::string info;  // first word of the info string, lowercased ("cuda", "json", "")
  std::string body;
  bool terminated = false;
};

std::vector<FencedBlock> FindFencedBlocks(absl::string_view text) {
  std::vector<FencedBlock> blocks;
  FencedBlock* open = nullptr;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    absl::string_view trimmed = absl::StripLeadingAsciiWhitespace(line);
    const bool fence = absl::StartsWith(trimmed, "```");
    if (open == nullptr) {
      if (!fence) continue;
      absl::string_view info = absl::StripAsciiWhitespace(trimmed.substr(3));
      info = info.substr(0, std::min(info.find_first_of(" \t{"), info.size()));
      blocks.push_back({absl::AsciiStrToLower(info), "", false});
      open = &blocks.back();
    } else if (fence && absl::StripAsciiWhitespace(trimmed.substr(3)).empty()) {
      open->terminated = true;
      open = nullptr;
    } else {
      absl::StrAppend(&open->body, line, "\n");
    }
  }
  return blocks;
}

bool IsCodeInfo(const std::string& info) {
  static const absl::flat_hash_set<std::string> kCode = {"cuda", "cu", "cuh", "cpp", "c++",
                                                         "cxx",  "cc", "c",   "h",   "hpp"};
  return kCode.contains(info);
}

bool IsPlanInfo(const std::string& info) { return info == "json" || info == "jsonc"; }

v1::Rejection Reject(absl::string_view reason, std::string message) {
  v1::Rejection rejection;
  rejection.set_reason(std::string(reason));
  rejection.set_message(std::move(message));
  return rejection;
}

// --- a small C++ tokenizer, enough to find calls, declarations and extern "C" blocks ---

enum class TokenKind { kIdent, kString, kNumber, kPunct };

struct Token {
  TokenKind kind;
  std::string text;
  int line;
};

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Expects comments already stripped.
std::vector<Token> Tokenize(std::string_view code) {
  std::vector<Token> tokens;
  int line = 1;
  size_t i = 0;
  while (i < code.size()) {
    const char c = code[i];
    if (c == '\n') {
      ++line;
      ++i;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (IsIdentStart(c)) {
      size_t j = i;
      while (j < code.size() && IsIdentChar(code[j])) ++j;
      tokens.push_back({TokenKind::kIdent, std::string(code.substr(i, j - i)), line});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < code.size() && (IsIdentChar(code[j]) || code[j] == '.')) ++j;
      tokens.push_back({TokenKind::kNumber, std::string(code.substr(i, j - i)), line});
      i = j;
    } else if (c == '"' || c == '\'') {
      size_t j = i + 1;
      while (j < code.size() && code[j] != c && code[j] != '\n') {
        j += code[j] == '\\' ? 2 : 1;
      }
      j = std::min(j + 1, code.size());
      tokens.push_back({TokenKind::kString, std::string(code.substr(i, j - i)), line});
      i = j;
    } else if (c == ':' && i + 1 < code.size() && code[i + 1] == ':') {
      tokens.push_back({TokenKind::kPunct, "::", line});
      i += 2;
    } else {
      tokens.push_back({TokenKind::kPunct, std::string(1, c), line});
      ++i;
    }
  }
  return tokens;
}

bool Is(const std::vector<Token>& tokens, size_t i, std::string_view text) {
  return i < tokens.size() && tokens[i].text == text;
}

bool IsDunderAttribute(const std::string& name) {
  return name.size() > 4 && absl::StartsWith(name, "__") && absl::EndsWith(name, "__");
}

// Index of the ')' matching the '(' at `open`, or tokens.size().
size_t MatchingParen(const std::vector<Token>& tokens, size_t open) {
  int depth = 0;
  for (size_t i = open; i < tokens.size(); ++i) {
    if (tokens[i].text == "(") ++depth;
    if (tokens[i].text == ")" && --depth == 0) return i;
  }
  return tokens.size();
}

struct KernelDecl {
  std::string name;
  bool extern_c = false;
  std::vector<std::string> params;  // parameter token texts
  int line = 0;
};

std::vector<KernelDecl> FindKernels(const std::vector<Token>& tokens) {
  std::vector<KernelDecl> kernels;
  // One entry per open '{': whether it opened an extern "C" block.
  std::vector<bool> braces;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Token& token = tokens[i];
    if (token.text == "{") {
      const bool extern_block = i >= 2 && Is(tokens, i - 2, "extern") && Is(tokens, i - 1, "\"C\"");
      braces.push_back(extern_block);
      continue;
    }
    if (token.text == "}") {
      if (!braces.empty()) braces.pop_back();
      continue;
    }
    if (token.text != "__global__") continue;
    KernelDecl kernel;
    kernel.line = token.line;
    kernel.extern_c = std::find(braces.begin(), braces.end(), true) != braces.end();
    for (size_t j = i; j-- > 0;) {
      const std::string& text = tokens[j].text;
      if (text == ";" || text == "{" || text == "}") break;
      if (text == "extern" && Is(tokens, j + 1, "\"C\"")) kernel.extern_c = true;
    }
    // The name: the first identifier followed by '(' that is not an attribute.
    for (size_t j = i + 1; j + 1 < tokens.size(); ++j) {
      if (tokens[j].text == ";" || tokens[j].text == "{") break;
      if (tokens[j].kind != TokenKind::kIdent || tokens[j + 1].text != "(") continue;
      const size_t close = MatchingParen(tokens, j + 1);
      if (IsDunderAttribute(tokens[j].text)) {
        j = close;
        continue;
      }
      kernel.name = tokens[j].text;
      for (size_t k = j + 2; k < close && k < tokens.size(); ++k) {
        kernel.params.push_back(tokens[k].text);
      }
      i = close < tokens.size() ? close : i;
      break;
    }
    if (!kernel.name.empty()) kernels.push_back(std::move(kernel));
  }
  return kernels;
}

// Whether `kernel` takes exactly one `type` (KfArgs, or KfCapturedArgs for a captured entry)
// by value.
bool TakesOne(const KernelDecl& kernel, absl::string_view type) {
  int count = 0;
  for (const std::string& text : kernel.params) {
    if (text == type) {
      ++count;
    } else if (text == "," || text == "*" || text == "&") {
      return false;
    }
  }
  return count == 1;
}

// --- includes ---

bool IsAllowedInclude(absl::string_view path) {
  static const absl::flat_hash_set<absl::string_view> kExact = {
      "kforge_device.h",
      "cuda_fp16.h",
      "cuda_bf16.h",
      "cuda_fp8.h",
      "cuda_fp4.h",
      "cuda_fp6.h",
      "cooperative_groups.h",
      "mma.h",
      "cuda_pipeline.h",
      "cuda_pipeline_primitives.h",
      "cuda_awbarrier.h",
      "cuda_awbarrier_primitives.h",
      "cuda/barrier",
      "cuda/pipeline",
      "cuda/atomic",
      "cuda/annotated_ptr",
      "cuda/ptx",
      "cuda/memory_resource",
  };
  return kExact.contains(path) || absl::StartsWith(path, "cuda/std/") ||
         absl::StartsWith(path, "cooperative_groups/");
}

std::optional<v1::Rejection> CheckIncludes(absl::string_view code) {
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(code, '\n')) {
    ++line_number;
    absl::string_view rest = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&rest, "#")) continue;
    rest = absl::StripLeadingAsciiWhitespace(rest);
    if (!absl::ConsumePrefix(&rest, "include")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    std::string path;
    if (rest.size() >= 2 && (rest.front() == '<' || rest.front() == '"')) {
      const char close = rest.front() == '<' ? '>' : '"';
      const size_t end = rest.find(close, 1);
      if (end != std::string_view::npos) path = std::string(rest.substr(1, end - 1));
    }
    if (path.empty()) {
      return Reject(kRejectBadInclude,
                    absl::StrCat("Line ", line_number, ": `", absl::StripAsciiWhitespace(line),
                                 "` is not a plain #include of a file name."));
    }
    if (!IsAllowedInclude(path)) {
      return Reject(
          kRejectBadInclude,
          absl::StrCat("Line ", line_number, ": #include <", path,
                       "> is not allowed. The kernel is compiled by NVRTC as device code only: "
                       "include \"kforge_device.h\" (the ABI, it already brings cuda_fp16.h and "
                       "cuda_bf16.h) and only CUDA device headers (cuda_fp8.h, "
                       "cooperative_groups.h, mma.h, cuda_pipeline.h, cuda/barrier, "
                       "cuda/std/...). No host, C or C++ standard library headers; device math "
                       "functions (expf, rsqrtf, __shfl_xor_sync, ...) need no header."));
    }
  }
  return std::nullopt;
}

// --- host code ---

std::optional<v1::Rejection> HostCode(int line, std::string what) {
  return Reject(kRejectHostCode,
                absl::StrCat("Line ", line, ": ", what,
                             ". Write device code only: extern \"C\" __global__ entry points "
                             "taking KfArgs and __device__ helpers. The worker allocates "
                             "buffers and launches the kernels from the launch plan, so no host "
                             "code, no runtime API calls, no <<<...>>>, no main()."));
}

std::optional<v1::Rejection> CheckHostCode(const std::vector<Token>& tokens) {
  static const absl::flat_hash_set<absl::string_view> kHostCalls = {
      "malloc",  "calloc", "realloc", "free",   "fopen",  "fclose", "fread",  "fwrite",
      "fprintf", "fputs",  "fscanf",  "system", "popen",  "fork",   "execv",  "execvp",
      "execl",   "execlp", "execve",  "dlopen", "getenv", "exit",   "remove", "unlink"};
  static const absl::flat_hash_set<absl::string_view> kHostNames = {
      "PYBIND11_MODULE", "pybind11", "load_inline", "ofstream", "ifstream",
      "fstream",         "cout",     "cerr",        "FILE"};
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Token& token = tokens[i];
    if (token.kind == TokenKind::kPunct && token.text == "<" && Is(tokens, i + 1, "<") &&
        Is(tokens, i + 2, "<")) {
      return HostCode(token.line, "launches a kernel with <<<...>>>");
    }
    if (token.kind != TokenKind::kIdent) continue;
    const bool call = Is(tokens, i + 1, "(");
    if (token.text == "main" && call) return HostCode(token.line, "defines main()");
    if (token.text == "__host__") {
      bool also_device = false;
      for (size_t j = i >= 3 ? i - 3 : 0; j < std::min(tokens.size(), i + 4); ++j) {
        also_device = also_device || tokens[j].text == "__device__";
      }
      if (!also_device) return HostCode(token.line, "declares a __host__ function");
      continue;
    }
    if (call && kHostCalls.contains(token.text)) {
      return HostCode(token.line, absl::StrCat("calls the host function ", token.text, "()"));
    }
    if (kHostNames.contains(token.text) ||
        ((token.text == "torch" || token.text == "at" || token.text == "c10") &&
         Is(tokens, i + 1, "::"))) {
      return HostCode(token.line, absl::StrCat("uses the host library name ", token.text));
    }
    const std::string& name = token.text;
    const bool runtime_api = name.size() > 4 && absl::StartsWith(name, "cuda") &&
                             std::isupper(static_cast<unsigned char>(name[4]));
    const bool driver_api = name.size() > 2 && absl::StartsWith(name, "cu") &&
                            std::isupper(static_cast<unsigned char>(name[2]));
    if (call && (runtime_api || driver_api)) {
      return HostCode(token.line, absl::StrCat("calls the CUDA host API ", name, "()"));
    }
  }
  return std::nullopt;
}

// --- launch plan ---

std::optional<v1::Rejection> CheckPlan(const std::string& plan_text,
                                       const std::vector<KernelDecl>& kernels,
                                       std::vector<std::string>& entries) {
  nlohmann::json plan = nlohmann::json::parse(plan_text, nullptr, /*allow_exceptions=*/false);
  if (plan.is_discarded()) {
    // Parse again with exceptions to get the position of the error.
    std::string detail = "not valid JSON";
    try {
      nlohmann::json reparsed = nlohmann::json::parse(plan_text);
      (void)reparsed;
    } catch (const nlohmann::json::exception& error) {
      detail = error.what();
    }
    return Reject(kRejectBadPlanJson,
                  absl::StrCat("The ```json launch plan is not valid JSON (", detail,
                               "). Write plain JSON: no comments, no trailing commas, "
                               "expressions as strings (\"ceil_div(ROWS, 4)\")."));
  }
  if (!plan.is_object()) {
    return Reject(kRejectBadPlanJson,
                  "The ```json launch plan must be a JSON object with a "
                  "\"launches\" array.");
  }
  auto launches = plan.find("launches");
  if (launches == plan.end() || !launches->is_array() || launches->empty()) {
    return Reject(kRejectBadEntryPoint,
                  "The launch plan names no entry point: it needs \"launches\": [{\"entry\": "
                  "\"NAME\", \"grid\": [...], \"block\": [...]}] where NAME is an extern \"C\" "
                  "__global__ function of the source.");
  }
  std::vector<std::string> defined;
  for (const KernelDecl& kernel : kernels) {
    if (kernel.extern_c) defined.push_back(kernel.name);
  }
  const std::string defined_text =
      defined.empty() ? "none" : absl::StrCat("only ", absl::StrJoin(defined, ", "));
  auto find_kernel = [&](const std::string& name) {
    return std::find_if(kernels.begin(), kernels.end(),
                        [&](const KernelDecl& k) { return k.name == name; });
  };
  auto add_entry = [&](const std::string& name) {
    if (std::find(entries.begin(), entries.end(), name) == entries.end()) entries.push_back(name);
  };
  for (size_t i = 0; i < launches->size(); ++i) {
    const nlohmann::json& launch = (*launches)[i];
    if (!launch.is_object() || !launch.contains("entry") || !launch["entry"].is_string() ||
        launch["entry"].get<std::string>().empty()) {
      return Reject(kRejectBadEntryPoint,
                    absl::StrCat("launches[", i,
                                 "] names no entry point: give it \"entry\": "
                                 "the name of an extern \"C\" __global__ function of the source "
                                 "(the source defines ",
                                 defined_text, ")."));
    }
    const std::string entry = launch["entry"].get<std::string>();
    auto kernel = find_kernel(entry);
    if (kernel == kernels.end() || !kernel->extern_c) {
      return Reject(
          kRejectBadEntryPoint,
          absl::StrCat("launches[", i, "].entry is '", entry, "' but the source ",
                       kernel == kernels.end() ? "defines no __global__ function of that name"
                                               : "does not declare it extern \"C\"",
                       " (extern \"C\" __global__ functions: ", defined_text,
                       "). Declare entries as extern \"C\" __global__ void ", entry,
                       "(KfArgs args)."));
    }
    if (!TakesOne(*kernel, "KfArgs")) {
      return Reject(kRejectBadEntryPoint,
                    absl::StrCat("Entry point '", entry, "' (line ", kernel->line,
                                 ") must take exactly one KfArgs by value: extern \"C\" "
                                 "__global__ void ",
                                 entry, "(KfArgs args). Read tensors and scalars from args."));
    }
    add_entry(entry);
    if (launch.contains("captured_entry") && launch["captured_entry"].is_string()) {
      const std::string captured = launch["captured_entry"].get<std::string>();
      auto k = find_kernel(captured);
      if (k == kernels.end() || !k->extern_c || !TakesOne(*k, "KfCapturedArgs")) {
        return Reject(kRejectBadEntryPoint,
                      absl::StrCat("launches[", i, "].captured_entry is '", captured,
                                   "', which the source must define as extern \"C\" "
                                   "__global__ void ",
                                   captured, "(KfCapturedArgs args); or leave the captured "
                                   "call out."));
      }
      add_entry(captured);
    }
  }
  absl::StatusOr<LaunchPlan> parsed = LaunchPlan::Parse(plan_text);
  if (!parsed.ok()) {
    return Reject(kRejectBadPlan,
                  absl::StrCat("The launch plan is not valid: ", parsed.status().message(),
                               ". Follow the launch plan format exactly."));
  }
  return std::nullopt;
}

}  // namespace

std::string StripComments(std::string_view source) {
  std::string out(source);
  size_t i = 0;
  while (i < out.size()) {
    const char c = out[i];
    if (c == '"' || c == '\'') {
      // Skip the literal so comment markers inside it are kept.
      size_t j = i + 1;
      while (j < out.size() && out[j] != c && out[j] != '\n') j += out[j] == '\\' ? 2 : 1;
      i = j + 1;
    } else if (c == '/' && i + 1 < out.size() && out[i + 1] == '/') {
      while (i < out.size() && out[i] != '\n') out[i++] = ' ';
    } else if (c == '/' && i + 1 < out.size() && out[i + 1] == '*') {
      size_t end = out.find("*/", i + 2);
      end = end == std::string::npos ? out.size() : end + 2;
      for (; i < end; ++i) {
        if (out[i] != '\n') out[i] = ' ';
      }
    } else {
      ++i;
    }
  }
  return out;
}

std::vector<std::string> ExternCGlobalFunctions(std::string_view source) {
  std::vector<std::string> names;
  for (const KernelDecl& kernel : FindKernels(Tokenize(StripComments(source)))) {
    if (kernel.extern_c) names.push_back(kernel.name);
  }
  return names;
}

ParseResult ParseLlmAnswer(std::string_view text) {
  ParseResult result;
  std::vector<const FencedBlock*> code_blocks;
  std::vector<const FencedBlock*> plan_blocks;
  const std::vector<FencedBlock> blocks = FindFencedBlocks(Av(text));
  for (const FencedBlock& block : blocks) {
    const bool untagged = block.info.empty();
    const bool looks_like_json =
        absl::StartsWith(absl::StripLeadingAsciiWhitespace(block.body), "{");
    if (IsCodeInfo(block.info) || (untagged && !looks_like_json)) {
      code_blocks.push_back(&block);
    } else if (IsPlanInfo(block.info) || (untagged && looks_like_json)) {
      plan_blocks.push_back(&block);
    }
  }
  for (const FencedBlock* block : code_blocks) {
    if (!block->terminated) {
      result.rejection = Reject(
          kRejectUnterminatedBlock,
          absl::StrCat("The ```", block->info.empty() ? "cuda" : block->info,
                       " block is never closed (the answer was probably cut off at the token "
                       "limit): write a shorter kernel and close every block with ```.",
                       kFormatReminder));
      return result;
    }
  }
  if (code_blocks.empty()) {
    result.rejection = Reject(
        kRejectNoCodeBlock, absl::StrCat("The answer has no ```cuda code block.", kFormatReminder));
    return result;
  }
  if (code_blocks.size() > 1) {
    result.rejection = Reject(
        kRejectMultipleCodeBlocks,
        absl::StrCat("The answer has ", code_blocks.size(),
                     " code blocks; put the whole kernel (every entry point and helper) in one "
                     "```cuda block.",
                     kFormatReminder));
    return result;
  }
  if (plan_blocks.empty()) {
    result.rejection =
        Reject(kRejectNoPlanBlock,
               absl::StrCat("The answer has no ```json launch plan block.", kFormatReminder));
    return result;
  }
  if (plan_blocks.size() > 1) {
    result.rejection =
        Reject(kRejectMultiplePlanBlocks,
               absl::StrCat("The answer has ", plan_blocks.size(),
                            " ```json blocks; give one launch plan listing every launch in order.",
                            kFormatReminder));
    return result;
  }
  if (!plan_blocks.front()->terminated) {
    result.rejection =
        Reject(kRejectUnterminatedBlock,
               absl::StrCat("The ```json launch plan block is never closed.", kFormatReminder));
    return result;
  }

  const std::string& source = code_blocks.front()->body;
  const std::string code = StripComments(source);
  if (auto rejection = CheckIncludes(code)) {
    result.rejection = *std::move(rejection);
    return result;
  }
  const std::vector<Token> tokens = Tokenize(code);
  if (auto rejection = CheckHostCode(tokens)) {
    result.rejection = *std::move(rejection);
    return result;
  }
  ParsedAnswer answer;
  const std::string& plan_text = plan_blocks.front()->body;
  if (auto rejection = CheckPlan(plan_text, FindKernels(tokens), answer.entry_points)) {
    result.rejection = *std::move(rejection);
    return result;
  }
  answer.source = source;
  answer.launch_plan_json = plan_text;
  result.answer = std::move(answer);
  return result;
}

}  // namespace kforge
