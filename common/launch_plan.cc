// LaunchPlan parsing, validation and resolution against a target's symbols.
#include "common/launch_plan.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace kforge {
namespace {

using nlohmann::json;

absl::Status PlanError(absl::string_view path, absl::string_view problem) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat("launch plan: ", problem));
  return absl::InvalidArgumentError(absl::StrCat("launch plan: ", path, ": ", problem));
}

// Unknown keys are errors: a misspelt "shared_byte" must not silently become 0.
absl::Status CheckKeys(const json& object, absl::string_view path,
                       std::initializer_list<absl::string_view> allowed) {
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (absl::string_view name : allowed) known = known || key == name;
    if (!known) {
      return PlanError(path, absl::StrCat("unknown key '", key,
                                          "' (allowed: ", absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

// An integer field: a JSON integer or an expression string, kept as text.
absl::StatusOr<std::string> ParseIntField(const json& value, const std::string& path) {
  if (value.is_number_unsigned()) {
    uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return PlanError(path, "integer does not fit in 64 bits");
    }
    return std::to_string(v);
  }
  if (value.is_number_integer()) return std::to_string(value.get<int64_t>());
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    if (absl::Status syntax = CheckExpressionSyntax(text); !syntax.ok()) {
      return PlanError(path, syntax.message());
    }
    return text;
  }
  return PlanError(
      path, absl::StrCat("expected an integer or an expression string, got ", value.type_name()));
}

absl::StatusOr<std::array<std::string, 3>> ParseDims(const json& value, const std::string& path) {
  if (!value.is_array()) {
    return PlanError(
        path, absl::StrCat("expected an array of 1 to 3 dimensions, got ", value.type_name()));
  }
  if (value.empty() || value.size() > 3) {
    return PlanError(path, absl::StrCat("expected 1 to 3 dimensions, got ", value.size()));
  }
  std::array<std::string, 3> dims = {"1", "1", "1"};
  for (size_t i = 0; i < value.size(); ++i) {
    auto dim = ParseIntField(value[i], absl::StrCat(path, "[", i, "]"));
    if (!dim.ok()) return dim.status();
    dims[i] = *std::move(dim);
  }
  return dims;
}

// A power of two from 1 to 4096.
absl::StatusOr<int64_t> ParseAlignment(const json& value, absl::string_view path) {
  if (!value.is_number_integer()) return PlanError(path, "expected an integer");
  // Huge unsigned values would wrap in get<int64_t>; any of them is out of range anyway.
  const int64_t alignment =
      value.is_number_unsigned() && value.get<uint64_t>() > 4096 ? 0 : value.get<int64_t>();
  if (alignment < 1 || alignment > 4096 || (alignment & (alignment - 1)) != 0) {
    return PlanError(path, absl::StrCat(value.dump(), " is not a power of two from 1 to 4096"));
  }
  return alignment;
}

// requires.multiple_of: [[expression, multiple], ...] with multiples from 1 to 2^20.
absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> ParseMultiples(const json& value) {
  if (!value.is_array() || value.size() > kMaxLetBindings) {
    return PlanError("requires.multiple_of",
                     absl::StrCat("expected an array of at most ", kMaxLetBindings,
                                  " [expression, multiple] pairs"));
  }
  std::vector<std::pair<std::string, int64_t>> multiples;
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string path = absl::StrCat("requires.multiple_of[", i, "]");
    const json& pair = value[i];
    if (!pair.is_array() || pair.size() != 2) {
      return PlanError(path, "expected [expression, multiple]");
    }
    auto expr = ParseIntField(pair[0], path + "[0]");
    if (!expr.ok()) return expr.status();
    const json& m = pair[1];
    if (!m.is_number_integer() || (m.is_number_unsigned() && m.get<uint64_t>() > (1u << 20)) ||
        m.get<int64_t>() < 1 || m.get<int64_t>() > (1 << 20)) {
      return PlanError(path + "[1]", absl::StrCat(m.dump(), " is not an integer from 1 to 2^20"));
    }
    multiples.emplace_back(*std::move(expr), m.get<int64_t>());
  }
  return multiples;
}

// captured: {"shape_key": "0x<hex>", "alignment_bytes": N}. The key is a string: JSON numbers
// lose the low bits of 64-bit integers in many writers.
absl::StatusOr<CapturedCall> ParseCaptured(const json& value) {
  if (!value.is_object()) {
    return PlanError("captured", absl::StrCat("expected an object, got ", value.type_name()));
  }
  if (absl::Status keys = CheckKeys(value, "captured", {"shape_key", "alignment_bytes"});
      !keys.ok()) {
    return keys;
  }
  CapturedCall call;
  auto key = value.find("shape_key");
  if (key == value.end()) return PlanError("captured", "missing 'shape_key'");
  const std::string text = key->is_string() ? key->get<std::string>() : "";
  const absl::string_view digits =
      absl::StartsWith(text, "0x") ? absl::string_view(text).substr(2) : absl::string_view();
  if (digits.empty() || digits.size() > 16 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return absl::ascii_isxdigit(c); })) {
    return PlanError("captured.shape_key",
                     absl::StrCat(key->dump(), " is not a string of 0x and 1 to 16 hex digits "
                                               "(KfShapeKey of the captured call)"));
  }
  call.shape_key = std::stoull(std::string(digits), nullptr, 16);
  if (auto a = value.find("alignment_bytes"); a != value.end()) {
    absl::StatusOr<int64_t> alignment = ParseAlignment(*a, "captured.alignment_bytes");
    if (!alignment.ok()) return alignment.status();
    call.alignment_bytes = *alignment;
  }
  return call;
}

std::string LaunchPath(size_t index, absl::string_view field) {
  return absl::StrCat("launches[", index, "].", field);
}

absl::StatusOr<int64_t> Evaluate(const std::string& text, const SymbolTable& symbols,
                                 absl::string_view path) {
  auto value = EvaluateExpression(text, symbols);
  if (!value.ok()) return PlanError(path, value.status().message());
  return value;
}

absl::StatusOr<Dim3> EvaluateDims(const std::array<std::string, 3>& dims,
                                  const SymbolTable& symbols, const std::string& path) {
  std::array<int64_t, 3> v{};
  for (size_t i = 0; i < 3; ++i) {
    auto value = Evaluate(dims[i], symbols, absl::StrCat(path, "[", i, "]"));
    if (!value.ok()) return value.status();
    if (*value < 1) {
      return PlanError(path, absl::StrCat("dimension ", std::string(1, "xyz"[i]), " is ", *value,
                                          " (from '", dims[i], "'); it must be at least 1"));
    }
    v[i] = *value;
  }
  return Dim3{v[0], v[1], v[2]};
}

absl::Status CheckAtMost(const Dim3& dims, const Dim3& limits, absl::string_view path,
                         absl::string_view what) {
  const int64_t got[3] = {dims.x, dims.y, dims.z};
  const int64_t max[3] = {limits.x, limits.y, limits.z};
  for (int i = 0; i < 3; ++i) {
    if (got[i] > max[i]) {
      return PlanError(path, absl::StrCat(what, " dimension ", std::string(1, "xyz"[i]), " is ",
                                          got[i], "; CUDA allows at most ", max[i]));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LaunchPlan> LaunchPlan::Parse(std::string_view text) {
  if (text.size() > kMaxLaunchPlanBytes) {
    return PlanError("", absl::StrCat("is ", text.size(), " bytes; at most ", kMaxLaunchPlanBytes,
                                      " are allowed"));
  }
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    return PlanError("", absl::StrCat("not valid JSON: ", e.what()));
  }
  if (!root.is_object()) {
    return PlanError("", absl::StrCat("expected a JSON object, got ", root.type_name()));
  }
  if (absl::Status keys = CheckKeys(root, "", {"let", "scratch_bytes", "launches", "requires",
                                                  "captured"});
      !keys.ok()) {
    return keys;
  }

  LaunchPlan plan;
  absl::flat_hash_set<std::string> let_names;
  if (auto it = root.find("let"); it != root.end()) {
    if (!it->is_array()) {
      return PlanError(
          "let", absl::StrCat("expected an array of [name, value] pairs, got ", it->type_name()));
    }
    if (it->size() > kMaxLetBindings) {
      return PlanError("let", absl::StrCat("has ", it->size(), " bindings; at most ",
                                           kMaxLetBindings, " are allowed"));
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const json& pair = (*it)[i];
      std::string path = absl::StrCat("let[", i, "]");
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string()) {
        return PlanError(path, "expected a [\"NAME\", value] pair");
      }
      const std::string& name = pair[0].get_ref<const std::string&>();
      if (!IsIdentifier(name)) {
        return PlanError(path, absl::StrCat("'", name, "' is not a valid symbol name"));
      }
      if (name == "ceil_div" || name == "min" || name == "max") {
        return PlanError(path, absl::StrCat("'", name, "' is a function name"));
      }
      if (!let_names.insert(name).second) {
        return PlanError(path, absl::StrCat("'", name, "' is bound twice"));
      }
      auto value = ParseIntField(pair[1], path);
      if (!value.ok()) return value.status();
      plan.let_.emplace_back(name, *std::move(value));
    }
  }

  if (auto it = root.find("scratch_bytes"); it != root.end()) {
    auto value = ParseIntField(*it, "scratch_bytes");
    if (!value.ok()) return value.status();
    plan.scratch_bytes_ = *std::move(value);
  }

  auto launches = root.find("launches");
  if (launches == root.end()) return PlanError("", "no 'launches' (at least one is required)");
  if (!launches->is_array()) {
    return PlanError("launches", absl::StrCat("expected an array, got ", launches->type_name()));
  }
  if (launches->empty()) return PlanError("launches", "is empty (at least one is required)");
  if (launches->size() > kMaxLaunches) {
    return PlanError("launches", absl::StrCat("has ", launches->size(), " launches; at most ",
                                              kMaxLaunches, " are allowed"));
  }
  for (size_t i = 0; i < launches->size(); ++i) {
    const json& item = (*launches)[i];
    std::string path = absl::StrCat("launches[", i, "]");
    if (!item.is_object()) {
      return PlanError(path, absl::StrCat("expected an object, got ", item.type_name()));
    }
    if (absl::Status keys =
            CheckKeys(item, path,
                      {"entry", "grid", "block", "shared_bytes", "cluster", "cooperative",
                       "early_start", "captured_entry"});
        !keys.ok()) {
      return keys;
    }
    Launch launch;
    auto entry = item.find("entry");
    if (entry == item.end()) return PlanError(path, "missing 'entry'");
    if (!entry->is_string() || !IsIdentifier(entry->get_ref<const std::string&>())) {
      return PlanError(LaunchPath(i, "entry"),
                       "expected the name of an extern \"C\" __global__ function");
    }
    launch.entry = entry->get<std::string>();
    if (auto captured = item.find("captured_entry"); captured != item.end()) {
      if (!captured->is_string() || !IsIdentifier(captured->get_ref<const std::string&>())) {
        return PlanError(LaunchPath(i, "captured_entry"),
                         "expected the name of an extern \"C\" __global__ function taking "
                         "KfCapturedArgs");
      }
      launch.captured_entry = captured->get<std::string>();
      if (launch.captured_entry == launch.entry) {
        return PlanError(LaunchPath(i, "captured_entry"),
                         "is the launch's entry; a captured entry takes KfCapturedArgs, not "
                         "KfArgs, so it is another function");
      }
    }
    for (absl::string_view field : {"grid", "block"}) {
      auto dims = item.find(field);
      if (dims == item.end()) return PlanError(path, absl::StrCat("missing '", field, "'"));
      auto parsed = ParseDims(*dims, LaunchPath(i, field));
      if (!parsed.ok()) return parsed.status();
      (field == "grid" ? launch.grid : launch.block) = *std::move(parsed);
    }
    if (auto shared = item.find("shared_bytes"); shared != item.end()) {
      auto value = ParseIntField(*shared, LaunchPath(i, "shared_bytes"));
      if (!value.ok()) return value.status();
      launch.shared_bytes = *std::move(value);
    }
    if (auto cluster = item.find("cluster"); cluster != item.end()) {
      auto dims = ParseDims(*cluster, LaunchPath(i, "cluster"));
      if (!dims.ok()) return dims.status();
      launch.cluster = *std::move(dims);
    }
    if (auto cooperative = item.find("cooperative"); cooperative != item.end()) {
      if (!cooperative->is_boolean()) {
        return PlanError(LaunchPath(i, "cooperative"), "expected true or false");
      }
      launch.cooperative = cooperative->get<bool>();
      if (launch.cooperative && launch.cluster) {
        return PlanError(LaunchPath(i, "cooperative"),
                         "a launch is either cooperative or clustered, not both");
      }
    }
    if (auto early = item.find("early_start"); early != item.end()) {
      if (!early->is_boolean()) {
        return PlanError(LaunchPath(i, "early_start"), "expected true or false");
      }
      launch.early_start = early->get<bool>();
      // The first launch follows whatever ran before it on the stream (the op that wrote its
      // inputs); a cooperative launch must find all its blocks room at once.
      if (launch.early_start && i == 0) {
        return PlanError(LaunchPath(i, "early_start"),
                         "the first launch cannot start early: it follows the work that wrote "
                         "its inputs");
      }
      if (launch.early_start && launch.cooperative) {
        return PlanError(LaunchPath(i, "early_start"),
                         "a cooperative launch cannot start early");
      }
    }
    plan.launches_.push_back(std::move(launch));
  }

  if (auto it = root.find("requires"); it != root.end()) {
    if (!it->is_object()) {
      return PlanError("requires", absl::StrCat("expected an object, got ", it->type_name()));
    }
    if (absl::Status keys =
            CheckKeys(*it, "requires", {"contiguous", "alignment_bytes", "multiple_of"});
        !keys.ok()) {
      return keys;
    }
    if (auto c = it->find("contiguous"); c != it->end()) {
      if (!c->is_boolean()) return PlanError("requires.contiguous", "expected true or false");
      plan.requirements_.contiguous = c->get<bool>();
    }
    if (auto a = it->find("alignment_bytes"); a != it->end()) {
      absl::StatusOr<int64_t> alignment = ParseAlignment(*a, "requires.alignment_bytes");
      if (!alignment.ok()) return alignment.status();
      plan.requirements_.alignment_bytes = *alignment;
    }
    if (auto m = it->find("multiple_of"); m != it->end()) {
      absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> multiples =
          ParseMultiples(*m);
      if (!multiples.ok()) return multiples.status();
      plan.requirements_.multiple_of = *std::move(multiples);
    }
  }
  const bool names_captured_entry =
      std::any_of(plan.launches_.begin(), plan.launches_.end(),
                  [](const Launch& l) { return !l.captured_entry.empty(); });
  if (auto it = root.find("captured"); it != root.end()) {
    absl::StatusOr<CapturedCall> captured = ParseCaptured(*it);
    if (!captured.ok()) return captured.status();
    if (!names_captured_entry) {
      return PlanError("captured", "no launch names a captured_entry to run for it");
    }
    plan.captured_ = *captured;
  } else if (names_captured_entry) {
    return PlanError("", "a launch names a captured_entry but the plan has no 'captured' call");
  }
  plan.canonical_json_ = root.dump();
  return plan;
}

std::vector<std::string> LaunchPlan::EntryPoints() const {
  std::vector<std::string> entries;
  absl::flat_hash_set<std::string> seen;
  for (const Launch& launch : launches_) {
    for (const std::string* name : {&launch.entry, &launch.captured_entry}) {
      if (!name->empty() && seen.insert(*name).second) entries.push_back(*name);
    }
  }
  return entries;
}

absl::StatusOr<ResolvedPlan> LaunchPlan::Resolve(const SymbolTable& symbols) const {
  ResolvedPlan resolved;
  resolved.symbols = symbols;
  resolved.captured = captured_;
  for (size_t i = 0; i < let_.size(); ++i) {
    const auto& [name, text] = let_[i];
    std::string path = absl::StrCat("let[", i, "] (", name, ")");
    if (symbols.contains(name)) {
      return PlanError(path, absl::StrCat("'", name, "' shadows a symbol bound from the target"));
    }
    auto value = Evaluate(text, resolved.symbols, path);
    if (!value.ok()) return value.status();
    resolved.symbols[name] = *value;
  }
  auto scratch = Evaluate(scratch_bytes_, resolved.symbols, "scratch_bytes");
  if (!scratch.ok()) return scratch.status();
  if (*scratch < 0) {
    return PlanError("scratch_bytes", absl::StrCat("is ", *scratch, "; it must be at least 0"));
  }
  resolved.scratch_bytes = *scratch;
  for (size_t i = 0; i < requirements_.multiple_of.size(); ++i) {
    const auto& [expr, multiple] = requirements_.multiple_of[i];
    const std::string path = absl::StrCat("requires.multiple_of[", i, "]");
    auto value = Evaluate(expr, resolved.symbols, path);
    if (!value.ok()) return value.status();
    if (*value % multiple != 0) {  // FailedPrecondition: the shape, not the plan, is at fault
      return absl::FailedPreconditionError(
          absl::StrCat("launch plan: ", path, ": '", expr, "' is ", *value,
                       ", not a multiple of ", multiple, "; the kernel is not for this shape"));
    }
  }

  for (size_t i = 0; i < launches_.size(); ++i) {
    const Launch& launch = launches_[i];
    ResolvedLaunch out;
    out.entry = launch.entry;
    std::string prefix = absl::StrCat("launches[", i, "] (", launch.entry, ").");
    auto grid = EvaluateDims(launch.grid, resolved.symbols, prefix + "grid");
    if (!grid.ok()) return grid.status();
    if (absl::Status s = CheckAtMost(*grid, {std::numeric_limits<int32_t>::max(), 65535, 65535},
                                     prefix + "grid", "grid");
        !s.ok()) {
      return s;
    }
    out.grid = *grid;

    auto block = EvaluateDims(launch.block, resolved.symbols, prefix + "block");
    if (!block.ok()) return block.status();
    if (absl::Status s = CheckAtMost(*block, {1024, 1024, 64}, prefix + "block", "block");
        !s.ok()) {
      return s;
    }
    if (block->Product() > 1024) {
      return PlanError(
          prefix + "block",
          absl::StrCat(block->x, " x ", block->y, " x ", block->z, " = ", block->Product(),
                       " threads; CUDA allows at most 1024 per block"));
    }
    out.block = *block;

    auto shared = Evaluate(launch.shared_bytes, resolved.symbols, prefix + "shared_bytes");
    if (!shared.ok()) return shared.status();
    if (*shared < 0 || *shared > std::numeric_limits<int32_t>::max()) {
      return PlanError(prefix + "shared_bytes",
                       absl::StrCat("is ", *shared, "; it must be from 0 to 2^31-1"));
    }
    out.shared_bytes = *shared;

    if (launch.cluster) {
      auto cluster = EvaluateDims(*launch.cluster, resolved.symbols, prefix + "cluster");
      if (!cluster.ok()) return cluster.status();
      if (absl::Status s = CheckAtMost(*cluster, {16, 16, 16}, prefix + "cluster", "cluster");
          !s.ok()) {
        return s;
      }
      if (cluster->Product() > 16) {
        return PlanError(
            prefix + "cluster",
            absl::StrCat(cluster->Product(), " blocks per cluster; CUDA allows at most 16"));
      }
      if (out.grid.x % cluster->x != 0 || out.grid.y % cluster->y != 0 ||
          out.grid.z % cluster->z != 0) {
        return PlanError(prefix + "cluster",
                         absl::StrCat("grid ", out.grid.x, " x ", out.grid.y, " x ", out.grid.z,
                                      " is not a multiple of cluster ", cluster->x, " x ",
                                      cluster->y, " x ", cluster->z));
      }
      out.cluster = *cluster;
    }
    out.cooperative = launch.cooperative;
    out.early_start = launch.early_start;
    out.captured_entry = launch.captured_entry;
    resolved.launches.push_back(std::move(out));
  }
  return resolved;
}

SymbolTable BindShapeSymbols(const std::vector<TensorShape>& inputs,
                             const std::vector<TensorShape>& outputs,
                             const std::vector<int64_t>& int_args, int num_sms) {
  SymbolTable symbols;
  auto bind_tensors = [&symbols](const std::vector<TensorShape>& tensors,
                                 absl::string_view prefix) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      const TensorShape& t = tensors[i];
      std::string name = absl::StrCat(prefix, i, "_");
      const int ndim = static_cast<int>(t.sizes.size());
      bool have_strides = static_cast<int>(t.strides.size()) == ndim;
      int64_t numel = 1;
      bool numel_ok = true;
      int64_t contiguous_stride = 1;
      for (int d = ndim - 1; d >= 0; --d) {
        symbols[absl::StrCat(name, "size", d)] = t.sizes[d];
        symbols[absl::StrCat(name, "stride", d)] = have_strides ? t.strides[d] : contiguous_stride;
        numel_ok = numel_ok && !__builtin_mul_overflow(numel, t.sizes[d], &numel);
        if (__builtin_mul_overflow(contiguous_stride, std::max<int64_t>(t.sizes[d], 1),
                                   &contiguous_stride)) {
          contiguous_stride = 0;  // only reached for nonsense shapes
        }
      }
      symbols[absl::StrCat(name, "ndim")] = ndim;
      if (numel_ok) symbols[absl::StrCat(name, "numel")] = numel;
      symbols[absl::StrCat(name, "size_last")] = ndim == 0 ? 1 : t.sizes[ndim - 1];
    }
  };
  bind_tensors(inputs, "in");
  bind_tensors(outputs, "out");
  for (size_t k = 0; k < int_args.size(); ++k) symbols[absl::StrCat("int", k)] = int_args[k];
  symbols["num_sms"] = num_sms;
  return symbols;
}

}  // namespace kforge
