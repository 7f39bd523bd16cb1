// ParamSpace and Config: canonical form, parsing and neighbour moves.
#include "services/proposer/synth/param_space.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kforge::synth {

const std::string& Config::Get(std::string_view name) const {
  static const std::string kEmpty;
  for (const auto& [key, value] : values_) {
    if (key == name) return value;
  }
  return kEmpty;
}

int Config::GetInt(std::string_view name) const {
  int value = 0;
  if (!absl::SimpleAtoi(Get(name), &value)) return 0;
  return value;
}

void Config::Set(std::string_view name, std::string value) {
  for (auto& [key, current] : values_) {
    if (key == name) {
      current = std::move(value);
      return;
    }
  }
  values_.emplace_back(std::string(name), std::move(value));
}

std::string Config::ToString() const {
  return absl::StrJoin(values_, ";", absl::PairFormatter("="));
}

std::map<std::string, std::string> Config::ToMap() const {
  return {values_.begin(), values_.end()};
}

const ParamDef* ParamSpace::Find(std::string_view name) const {
  for (const ParamDef& param : params_) {
    if (param.name == name) return &param;
  }
  return nullptr;
}

bool ParamSpace::Contains(const Config& config) const {
  if (config.values().size() != params_.size()) return false;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, value] = config.values()[i];
    if (name != params_[i].name) return false;
    const auto& allowed = params_[i].values;
    if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) return false;
  }
  return true;
}

absl::StatusOr<Config> ParamSpace::FromMap(
    const std::map<std::string, std::string>& params) const {
  std::vector<std::pair<std::string, std::string>> values;
  for (const ParamDef& param : params_) {
    auto it = params.find(param.name);
    if (it == params.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("synth config lacks parameter '", param.name,
                       "'; pass every parameter of the family (one of: ",
                       absl::StrJoin(param.values, ", "), ")"));
    }
    if (std::find(param.values.begin(), param.values.end(), it->second) ==
        param.values.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("synth parameter ", param.name, "=", it->second,
                       " is outside the space; allowed: ", absl::StrJoin(param.values, ", ")));
    }
    values.emplace_back(param.name, it->second);
  }
  for (const auto& [name, value] : params) {
    if (Find(name) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("synth config has unknown parameter '", name, "'"));
    }
  }
  return Config(std::move(values));
}

std::map<std::string, std::string> SplitParams(std::string_view text) {
  std::map<std::string, std::string> params;
  for (absl::string_view item :
       absl::StrSplit(absl::string_view(text.data(), text.size()), ';', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    params[kv.first] = kv.second;
  }
  return params;
}

absl::StatusOr<Config> ParamSpace::Parse(std::string_view text) const {
  return FromMap(SplitParams(text));
}

std::vector<Config> ParamSpace::Neighbours(const Config& config) const {
  std::vector<Config> out;
  for (const ParamDef& param : params_) {
    const auto& allowed = param.values;
    auto it = std::find(allowed.begin(), allowed.end(), config.Get(param.name));
    if (it == allowed.end()) continue;
    const size_t index = static_cast<size_t>(it - allowed.begin());
    if (index > 0) {
      Config moved = config;
      moved.Set(param.name, allowed[index - 1]);
      out.push_back(std::move(moved));
    }
    if (index + 1 < allowed.size()) {
      Config moved = config;
      moved.Set(param.name, allowed[index + 1]);
      out.push_back(std::move(moved));
    }
  }
  return out;
}

Config ParamSpace::Sample(SeededRng& rng) const {
  std::vector<std::pair<std::string, std::string>> values;
  values.reserve(params_.size());
  for (const ParamDef& param : params_) {
    values.emplace_back(param.name, param.values[rng.Below(param.values.size())]);
  }
  return Config(std::move(values));
}

double ParamSpace::Size() const {
  double size = 1;
  for (const ParamDef& param : params_) {
    size = std::min(1e18, size * static_cast<double>(param.values.size()));
  }
  return size;
}

}  // namespace kforge::synth
