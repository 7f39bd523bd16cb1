// FamilyRegistry: op -> family lookup with refusals.
#include "services/proposer/synth/family_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/proposer/synth/pointwise_chain.h"

namespace kforge::synth {

FamilyRegistry::FamilyRegistry(std::vector<std::unique_ptr<Family>> families)
    : families_(std::move(families)) {}

const FamilyRegistry& FamilyRegistry::Default() {
  static const FamilyRegistry* registry = [] {
    std::vector<std::unique_ptr<Family>> families;
    families.push_back(MakeRowwiseFamily());
    families.push_back(MakeGroupNormFamily());
    families.push_back(MakeBatchNormFamily());
    families.push_back(MakePoolingFamily());
    families.push_back(MakeReductionFamily());
    families.push_back(MakeElementwiseFamily());
    families.push_back(MakeLayoutFamily());
    return new FamilyRegistry(std::move(families));
  }();
  return *registry;
}

const Family* FamilyRegistry::Find(const v1::Target& target, std::string* refusal) const {
  auto refuse = [&](std::string why) -> const Family* {
    if (refusal != nullptr) *refusal = std::move(why);
    return nullptr;
  };
  if (target.nodes_size() == 0) return refuse("target has no nodes");
  // A chain goes to the family of its anchor (its one op that is not elementwise), which
  // writes it or says why not.
  const std::string& op = target.nodes(ChainAnchor(target)).op();
  for (const auto& family : families_) {
    const std::vector<std::string> ops = family->Ops();
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) continue;
    auto generator = family->Bind(target, GpuModel{});
    if (!generator.ok()) {
      return refuse(absl::StrCat(
          "synth family ", family->Name(), " does not cover this ",
          target.nodes_size() > 1 ? absl::StrCat("chain of ", target.nodes_size(), " ops around ")
                                  : "",
          op, " call: ", generator.status().message()));
    }
    return family.get();
  }
  return refuse(absl::StrCat("no synthesizer family covers ", op.empty() ? "(empty op)" : op,
                             " (families: ", absl::StrJoin(ListFamilies(), ", "),
                             "); use an LLM proposer"));
}

std::string FamilyRegistry::FamilyFor(const v1::Target& target) const {
  const Family* family = Find(target, nullptr);
  return family == nullptr ? "" : family->Name();
}

std::vector<std::string> FamilyRegistry::ListFamilies() const {
  std::vector<std::string> names;
  for (const auto& family : families_) names.push_back(family->Name());
  return names;
}

const Family* FamilyRegistry::ByName(std::string_view name) const {
  for (const auto& family : families_) {
    if (family->Name() == name) return family.get();
  }
  return nullptr;
}

}  // namespace kforge::synth
