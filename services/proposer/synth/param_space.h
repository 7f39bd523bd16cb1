// ParamSpace and Config: a family's tuning parameters, one assignment of them, its canonical
// string form, and the neighbour moves the tree search takes from a parent.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "services/proposer/synth/seeded_rng.h"

namespace kforge::synth {

// One parameter: its name and its values in order, so "adjacent value" is well defined.
struct ParamDef {
  std::string name;
  std::vector<std::string> values;
  std::string help;
};

// One value per parameter of a space, in the space's parameter order.
class Config {
 public:
  Config() = default;
  explicit Config(std::vector<std::pair<std::string, std::string>> values)
      : values_(std::move(values)) {}

  // The value of `name`; empty when the config has no such parameter.
  const std::string& Get(std::string_view name) const;
  // Integer value of `name` (0 when absent or not a number).
  int GetInt(std::string_view name) const;
  bool GetBool(std::string_view name) const { return GetInt(name) != 0; }
  void Set(std::string_view name, std::string value);
  void SetInt(std::string_view name, int value) { Set(name, std::to_string(value)); }

  // "name=value;name=value" in parameter order: the identity of a config.
  std::string ToString() const;
  std::map<std::string, std::string> ToMap() const;
  const std::vector<std::pair<std::string, std::string>>& values() const { return values_; }

  bool operator==(const Config& other) const { return values_ == other.values_; }
  bool operator<(const Config& other) const { return values_ < other.values_; }

 private:
  std::vector<std::pair<std::string, std::string>> values_;
};

// The name -> value pairs of a "name=value;..." text (a config, or part of one); a term
// without '=' maps its name to "".
std::map<std::string, std::string> SplitParams(std::string_view text);

class ParamSpace {
 public:
  ParamSpace() = default;
  explicit ParamSpace(std::vector<ParamDef> params) : params_(std::move(params)) {}

  const std::vector<ParamDef>& params() const { return params_; }
  const ParamDef* Find(std::string_view name) const;

  // Whether every parameter is present with one of its values (and nothing else is).
  bool Contains(const Config& config) const;
  // The config a params map (Candidate.params) names; InvalidArgument naming the first
  // missing parameter or value outside the space.
  absl::StatusOr<Config> FromMap(const std::map<std::string, std::string>& params) const;
  // Parses the canonical "name=value;..." form (SplitParams, then FromMap).
  absl::StatusOr<Config> Parse(std::string_view text) const;
  // Every config that differs from `config` in exactly one parameter, moved to an adjacent
  // value of that parameter's list. Parameter order, lower value first.
  std::vector<Config> Neighbours(const Config& config) const;
  // A uniformly random config.
  Config Sample(SeededRng& rng) const;
  // Number of configs in the full product space (saturates at 1e18).
  double Size() const;

 private:
  std::vector<ParamDef> params_;
};

}  // namespace kforge::synth
