// FamilyRegistry: which synthesizer family covers a target, and why none does.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/v1/common.pb.h"
#include "services/proposer/synth/family.h"

namespace kforge::synth {

class FamilyRegistry {
 public:
  explicit FamilyRegistry(std::vector<std::unique_ptr<Family>> families);

  // Every built-in family.
  static const FamilyRegistry& Default();

  // The family that covers `target` (binding it for the default GPU succeeds), or nullptr
  // with `refusal` (may be null) saying why: no family for the op, or what the family does
  // not cover (dtype, layout, dim, arguments).
  const Family* Find(const v1::Target& target, std::string* refusal) const;
  // The covering family's name, empty when none covers it (capture uses it to fill
  // Target.family).
  std::string FamilyFor(const v1::Target& target) const;
  std::vector<std::string> ListFamilies() const;
  const Family* ByName(std::string_view name) const;

 private:
  std::vector<std::unique_ptr<Family>> families_;
};

}  // namespace kforge::synth
