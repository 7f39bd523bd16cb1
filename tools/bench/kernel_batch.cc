// Batched NVRTC programs (see kernel_batch.h).
#include "tools/bench/kernel_batch.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace kforge::bench {
namespace {

bool IdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The identifier starting at `i` (empty if none).
std::string_view IdentAt(std::string_view s, size_t i) {
  if (i >= s.size() || !IdentStart(s[i])) return {};
  size_t j = i;
  while (j < s.size() && IdentChar(s[j])) ++j;
  return s.substr(i, j - i);
}

size_t SkipSpace(std::string_view s, size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

// `text` with every identifier token found in `renames` replaced.
std::string RenameIdentifiers(std::string_view text,
                              const std::map<std::string, std::string>& renames) {
  std::string out;
  out.reserve(text.size() + 256);
  size_t i = 0;
  while (i < text.size()) {
    if (IdentStart(text[i]) && (i == 0 || !IdentChar(text[i - 1]))) {
      std::string_view id = IdentAt(text, i);
      auto it = renames.find(std::string(id));
      out += it == renames.end() ? std::string(id) : it->second;
      i += id.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

// The directive of a preprocessor line ("define", "include", ...) and the position after it;
// empty when the line is not one.
std::string_view Directive(std::string_view line, size_t* after) {
  size_t i = SkipSpace(line, 0);
  if (i >= line.size() || line[i] != '#') return {};
  i = SkipSpace(line, i + 1);
  std::string_view d = IdentAt(line, i);
  *after = i + d.size();
  return d;
}

}  // namespace

std::string BatchEntrySuffix(size_t index) { return absl::StrCat("__kfb", index); }

std::vector<std::string> ExternEntryNames(std::string_view source) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = source.find("__global__", pos)) != std::string_view::npos) {
    const size_t global_at = pos;
    pos += 10;
    // extern "C" before it (only whitespace between).
    size_t b = global_at;
    while (b > 0 && std::isspace(static_cast<unsigned char>(source[b - 1]))) --b;
    if (b < 10 || source.substr(b - 3, 3) != "\"C\"") continue;
    // void [__launch_bounds__(...)] NAME (
    size_t i = SkipSpace(source, pos);
    if (IdentAt(source, i) != "void") continue;
    i = SkipSpace(source, i + 4);
    if (IdentAt(source, i) == "__launch_bounds__") {
      i = SkipSpace(source, i + 17);
      if (i >= source.size() || source[i] != '(') continue;
      int depth = 0;
      for (; i < source.size(); ++i) {
        if (source[i] == '(') ++depth;
        if (source[i] == ')' && --depth == 0) break;
      }
      i = SkipSpace(source, i + 1);
    }
    std::string_view name = IdentAt(source, i);
    if (name.empty()) continue;
    if (SkipSpace(source, i + name.size()) < source.size() &&
        source[SkipSpace(source, i + name.size())] == '(') {
      out.emplace_back(name);
    }
  }
  return out;
}

namespace {

// Member m's plan with its entries renamed, its renames and launched entries, onto `batch`.
absl::Status AddMemberPlan(const BatchMember& member, size_t m,
                           std::map<std::string, std::string> renames, KernelBatch* batch) {
  nlohmann::ordered_json plan =
      nlohmann::ordered_json::parse(member.launch_plan_json, nullptr, false);
  if (plan.is_discarded() || !plan.contains("launches") || !plan["launches"].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch member ", m, "'s launch plan does not parse or has no launches"));
  }
  std::vector<std::string> launched;
  for (auto& launch : plan["launches"]) {
    for (const char* field : {"entry", "captured_entry"}) {
      if (!launch.contains(field)) continue;
      const std::string entry = launch.value(field, "");
      auto it = renames.find(entry);
      if (it == renames.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "batch member ", m, "'s plan launches '", entry,
            "', which its source does not define as an extern \"C\" __global__ function"));
      }
      launch[field] = it->second;
      launched.push_back(it->second);
    }
  }
  batch->plans.push_back(plan.dump(2));
  batch->entries.push_back(std::move(renames));
  batch->launched.push_back(std::move(launched));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<KernelBatch> BatchKernels(const std::vector<BatchMember>& members) {
  KernelBatch batch;
  std::vector<std::string> includes;
  std::string body;
  std::map<std::string, size_t> first_with_source;
  for (size_t m = 0; m < members.size(); ++m) {
    const BatchMember& member = members[m];
    // A member whose source an earlier one has (another launch plan for the same code) uses
    // that member's copy and entry names.
    const auto [first, fresh] = first_with_source.emplace(member.source, m);
    std::map<std::string, std::string> renames;
    for (const std::string& e : ExternEntryNames(member.source)) {
      renames[e] = e + BatchEntrySuffix(first->second);
    }
    if (!fresh) {
      if (absl::Status s = AddMemberPlan(member, m, std::move(renames), &batch); !s.ok()) return s;
      continue;
    }
    std::string chunk;
    std::vector<std::string> macros;
    int depth = 0;
    for (absl::string_view piece : absl::StrSplit(member.source, '\n')) {
      const std::string_view line(piece.data(), piece.size());
      size_t after = 0;
      const std::string_view d = Directive(line, &after);
      if (d == "include") {
        if (depth > 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "batch member ", m, " has an #include inside #if; compile it on its own"));
        }
        if (std::find(includes.begin(), includes.end(), line) == includes.end()) {
          includes.emplace_back(line);
        }
        chunk += '\n';  // keeps line numbers of compile errors close
        continue;
      }
      if (d == "if" || d == "ifdef" || d == "ifndef") ++depth;
      if (d == "endif") --depth;
      if (d == "define") {
        std::string_view name = IdentAt(line, SkipSpace(line, after));
        if (!name.empty() && std::find(macros.begin(), macros.end(), name) == macros.end()) {
          macros.emplace_back(name);
        }
      }
      chunk.append(line.data(), line.size());
      chunk += '\n';
    }
    absl::StrAppend(&body, "namespace kfb", m, " {\n", RenameIdentifiers(chunk, renames),
                    "}  // namespace kfb", m, "\n");
    for (const std::string& macro : macros) absl::StrAppend(&body, "#undef ", macro, "\n");

    if (absl::Status s = AddMemberPlan(member, m, std::move(renames), &batch); !s.ok()) return s;
  }
  for (const std::string& include : includes) absl::StrAppend(&batch.source, include, "\n");
  batch.source += body;
  return batch;
}

std::map<std::string, std::string> CanonicalPtxEntries(std::string_view ptx_view, int member) {
  const std::string ptx(ptx_view);
  // Module-scope symbols: .extern/.visible/.weak .shared/.global/.const declarations.
  std::set<std::string> module_symbols;
  static const std::regex decl(
      R"(^\s*\.(?:(?:extern|visible|weak)\s+\.)*(?:shared|global|const)\b[^;\n]*?\b([A-Za-z_$][\w$]*)\s*(?:\[|;|=))",
      std::regex::multiline);
  for (auto it = std::sregex_iterator(ptx.begin(), ptx.end(), decl); it != std::sregex_iterator();
       ++it) {
    module_symbols.insert((*it)[1].str());
  }
  static const std::regex suffix(R"(__kfb(\d+))");
  static const std::regex label(R"(\$L__BB\d+_)");
  static const std::regex symbol(R"([A-Za-z_$][\w$]*)");
  std::map<std::string, std::string> out;
  size_t pos = 0;
  while ((pos = ptx.find(".entry ", pos)) != std::string::npos) {
    size_t end = ptx.find("\n}\n", pos);
    if (end == std::string::npos) end = ptx.size();
    std::string text = ptx.substr(pos, end - pos);
    pos = end;
    std::smatch sm;
    const std::string name_with = text.substr(7, text.find('(') - 7);
    int index = -1;
    if (std::regex_search(name_with, sm, suffix)) index = std::stoi(sm[1].str());
    if (index != member) continue;
    text = std::regex_replace(text, suffix, "");
    text = std::regex_replace(text, label, "$$L__BB_");
    // Rename mangled names and module symbols in order of first use.
    std::map<std::string, std::string> renamed;
    std::string canon;
    auto last = text.cbegin();
    for (auto it = std::sregex_iterator(text.begin(), text.end(), symbol);
         it != std::sregex_iterator(); ++it) {
      const std::string tok = (*it)[0].str();
      const bool mangled = tok.size() > 2 && tok[0] == '_' && tok[1] == 'Z';
      canon.append(last, (*it)[0].first);
      last = (*it)[0].second;
      if (mangled || module_symbols.count(tok) ||
          module_symbols.count(std::regex_replace(tok, suffix, ""))) {
        auto [r, fresh] = renamed.emplace(tok, absl::StrCat("SYM", renamed.size()));
        canon += r->second;
      } else {
        canon += tok;
      }
    }
    canon.append(last, text.cend());
    out[std::regex_replace(name_with, suffix, "")] = canon;
  }
  return out;
}

}  // namespace kforge::bench
