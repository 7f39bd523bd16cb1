// Layered configuration.
#include "common/config.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "nlohmann/json.hpp"

extern char** environ;

namespace kforge {
namespace {

constexpr std::string_view kEnvPrefix = "KFORGE_";

// Debian's abseil has its own string_view type, not std::string_view.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::string FlagName(std::string_view key) {
  return absl::StrCat("--", absl::StrReplaceAll(std::string(key), {{"_", "-"}}));
}

std::string EnvName(std::string_view key) {
  return absl::StrCat(Av(kEnvPrefix),
                      absl::AsciiStrToUpper(absl::StrReplaceAll(std::string(key), {{".", "_"}})));
}

std::string DefaultOrigin(std::string_view key, ConfigLayer layer) {
  switch (layer) {
    case ConfigLayer::kDefault:
      return "default";
    case ConfigLayer::kFile:
      return "config file";
    case ConfigLayer::kEnvironment:
      return absl::StrCat("environment variable ", EnvName(key));
    case ConfigLayer::kFlag:
      return absl::StrCat("flag ", FlagName(key));
  }
  return "unknown";
}

void Flatten(const nlohmann::json& node, const std::string& prefix,
             std::map<std::string, std::string>* out) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    std::string key = prefix.empty() ? it.key() : absl::StrCat(prefix, ".", it.key());
    if (it->is_object()) {
      Flatten(*it, key, out);
    } else if (it->is_string()) {
      (*out)[key] = it->get<std::string>();
    } else {
      (*out)[key] = it->dump();  // numbers, bools, arrays, null keep their JSON text
    }
  }
}

}  // namespace

void Config::Set(std::string_view key, std::string value, ConfigLayer layer, std::string origin) {
  if (origin.empty()) origin = DefaultOrigin(key, layer);
  layers_[static_cast<int>(layer)].insert_or_assign(std::string(key),
                                                    Entry{std::move(value), std::move(origin)});
}

absl::Status Config::LoadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open config file '", path,
                                            "': it does not exist or is not readable"));
  }
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json root = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false,
                                              /*ignore_comments=*/true);
  if (root.is_discarded()) {
    // Re-parse with exceptions only to get the parser's position for the message.
    std::string detail = "syntax error";
    try {
      root = nlohmann::json::parse(text.str(), nullptr, true, true);
    } catch (const nlohmann::json::parse_error& e) {
      detail = e.what();
    }
    return absl::InvalidArgumentError(
        absl::StrCat("config file '", path, "' is not valid JSON: ", detail));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config file '", path, "' must hold a JSON object like {\"store_url\": \"dir:/tmp/x\"}"));
  }
  std::map<std::string, std::string> flat;
  Flatten(root, "", &flat);
  for (auto& [key, value] : flat) {
    Set(key, std::move(value), ConfigLayer::kFile, absl::StrCat("config file ", path));
  }
  return absl::OkStatus();
}

void Config::LoadEnvironment() {
  for (char** env = environ; env != nullptr && *env != nullptr; ++env) {
    std::string_view entry(*env);
    if (!entry.starts_with(kEnvPrefix)) continue;
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == kEnvPrefix.size()) continue;
    std::string_view name = entry.substr(0, eq);
    std::string key = absl::AsciiStrToLower(std::string(name.substr(kEnvPrefix.size())));
    Set(key, std::string(entry.substr(eq + 1)), ConfigLayer::kEnvironment,
        absl::StrCat("environment variable ", Av(name)));
  }
}

const Config::Entry* Config::Find(std::string_view key) const {
  for (int layer = 3; layer >= 0; --layer) {
    auto it = layers_[layer].find(key);
    if (it != layers_[layer].end()) return &it->second;
  }
  return nullptr;
}

absl::StatusOr<const Config::Entry*> Config::Require(std::string_view key) const {
  const Entry* entry = Find(key);
  if (entry == nullptr) {
    return absl::NotFoundError(absl::StrCat("config key '", Av(key), "' is not set; pass ",
                                            FlagName(key), ", set ", EnvName(key),
                                            " or add \"", Av(key), "\" to the config file"));
  }
  return entry;
}

std::optional<std::string> Config::Get(std::string_view key) const {
  const Entry* entry = Find(key);
  if (entry == nullptr) return std::nullopt;
  return entry->value;
}

std::string Config::Origin(std::string_view key) const {
  const Entry* entry = Find(key);
  return entry == nullptr ? "" : entry->origin;
}

namespace {

absl::Status BadValue(std::string_view key, std::string_view value, std::string_view origin,
                      std::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("config key '", Av(key), "' has value '", Av(value),
                                                 "' (from ", Av(origin), "), expected ",
                                                 Av(expected)));
}

}  // namespace

absl::StatusOr<std::string> Config::GetString(std::string_view key) const {
  auto entry = Require(key);
  if (!entry.ok()) return entry.status();
  return (*entry)->value;
}

absl::StatusOr<int64_t> Config::GetInt(std::string_view key) const {
  auto entry = Require(key);
  if (!entry.ok()) return entry.status();
  int64_t value = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace((*entry)->value), &value)) {
    return BadValue(key, (*entry)->value, (*entry)->origin, "an integer");
  }
  return value;
}

absl::StatusOr<double> Config::GetDouble(std::string_view key) const {
  auto entry = Require(key);
  if (!entry.ok()) return entry.status();
  double value = 0;
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace((*entry)->value), &value)) {
    return BadValue(key, (*entry)->value, (*entry)->origin, "a number");
  }
  return value;
}

absl::StatusOr<bool> Config::GetBool(std::string_view key) const {
  auto entry = Require(key);
  if (!entry.ok()) return entry.status();
  std::string text = absl::AsciiStrToLower(absl::StripAsciiWhitespace((*entry)->value));
  if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "0" || text == "no" || text == "off") return false;
  return BadValue(key, (*entry)->value, (*entry)->origin, "true/false, 1/0, yes/no or on/off");
}

absl::StatusOr<absl::Duration> Config::GetDuration(std::string_view key) const {
  auto entry = Require(key);
  if (!entry.ok()) return entry.status();
  absl::string_view text = absl::StripAsciiWhitespace((*entry)->value);
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds)) return absl::Seconds(seconds);
  absl::Duration value;
  if (!absl::ParseDuration(text, &value)) {
    return BadValue(key, (*entry)->value, (*entry)->origin,
                    "a duration like 250ms, 30s, 5m or 1h30m (a bare number means seconds)");
  }
  return value;
}

std::map<std::string, std::string> Config::Snapshot() const {
  std::map<std::string, std::string> out;
  for (const auto& layer : layers_) {
    for (const auto& [key, entry] : layer) out[key] = entry.value;
  }
  return out;
}

}  // namespace kforge
