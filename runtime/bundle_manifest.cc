// manifest.json of a kforge bundle (see bundle_manifest.h).
#include "runtime/bundle_manifest.h"

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/kforge_device.h"
#include "common/launch_plan.h"
#include "common/sha256.h"

namespace kforge {
namespace {

using nlohmann::json;

constexpr std::pair<int, const char*> kDtypes[] = {
    {KF_FLOAT32, "float32"}, {KF_FLOAT16, "float16"}, {KF_BFLOAT16, "bfloat16"},
    {KF_FLOAT64, "float64"}, {KF_INT64, "int64"},     {KF_INT32, "int32"},
    {KF_INT16, "int16"},     {KF_INT8, "int8"},       {KF_UINT8, "uint8"},
    {KF_BOOL, "bool"}};

bool ReadableFormat(const std::string& format) {
  if (format == kBundleFormat) return true;
  for (const char* older : kOlderBundleFormats) {
    if (format == older) return true;
  }
  return false;
}

std::string ReadableFormats() {
  std::vector<std::string> formats(std::begin(kOlderBundleFormats), std::end(kOlderBundleFormats));
  formats.push_back(kBundleFormat);
  return absl::StrJoin(formats, ", ");
}

json FileJson(const BundleFile& f) { return {{"path", f.path}, {"sha256", f.sha256}}; }

json KernelJson(const BundleKernel& k) {
  json inputs = json::array();
  for (const TensorGuard& g : k.inputs) {
    inputs.push_back({{"dtype", g.dtype},
                      {"sizes", g.sizes},
                      {"strides", g.strides},
                      {"contiguous", g.contiguous},
                      {"alignment_bytes", g.alignment_bytes}});
  }
  json outputs = json::array();
  for (const OutputSpec& o : k.outputs) {
    json out = {{"dtype", o.dtype}, {"sizes", o.sizes}, {"strides", o.strides}};
    if (o.aliases_input >= 0) out["aliases_input"] = o.aliases_input;
    outputs.push_back(std::move(out));
  }
  json binaries = json::array();
  for (const KernelBinary& b : k.binaries) {
    binaries.push_back({{"arch", b.arch},
                        {"cubin", FileJson(b.cubin)},
                        {"ptx", FileJson(b.ptx)},
                        {"validated", b.validated}});
  }
  json kernel = {{"id", k.id},
                 {"target_id", k.target_id},
                 {"op", k.op},
                 {"overload", k.overload},
                 {"schema", k.schema},
                 {"signature", k.signature},
                 {"constants", k.constants},
                 {"guards",
                  {{"device_type", "cuda"}, {"no_grad", true}, {"inputs", std::move(inputs)}}},
                 {"outputs", std::move(outputs)},
                 {"scalar_args", {{"ints", k.int_args}, {"floats", k.float_args}}},
                 {"launch_plan", json::parse(k.launch_plan_json, nullptr, false)},
                 {"binaries", std::move(binaries)},
                 {"source", FileJson(k.source)},
                 {"measured",
                  {{"candidate_id", k.candidate_id},
                   {"gpu", k.gpu_name},
                   {"eager_s", k.eager_s},
                   {"kernel_s", k.kernel_s},
                   {"speedup", k.speedup}}}};
  if (!k.chain.empty()) {
    json chain = json::array();
    for (const BundleNode& n : k.chain) {
      chain.push_back({{"op", n.op}, {"overload", n.overload}, {"schema", n.schema},
                       {"constants", n.constants}});
    }
    kernel["chain"] = std::move(chain);
  }
  return kernel;
}

// Field access with errors that name the path inside the manifest.
class Reader {
 public:
  explicit Reader(std::string where) : where_(std::move(where)) {}

  absl::Status Error(const std::string& path, const std::string& problem) const {
    return absl::InvalidArgumentError(absl::StrCat(where_, ": ", path, ": ", problem,
                                                   "; re-export the bundle with kforge export"));
  }

  absl::StatusOr<const json*> Field(const json& object, const std::string& path,
                                    const char* key, json::value_t type) const {
    if (!object.is_object() || !object.contains(key)) return Error(path + "." + key, "missing");
    const json& value = object.at(key);
    bool ok = value.type() == type ||
              (type == json::value_t::number_float && value.is_number()) ||
              (type == json::value_t::number_integer && value.is_number_integer());
    if (!ok) return Error(path + "." + key, absl::StrCat("expected ", json(type).type_name(),
                                                         ", got ", value.type_name()));
    return &value;
  }

  template <typename T>
  absl::Status Get(const json& object, const std::string& path, const char* key, T* out) const {
    json::value_t type;
    if constexpr (std::is_same_v<T, std::string>) {
      type = json::value_t::string;
    } else if constexpr (std::is_same_v<T, bool>) {
      type = json::value_t::boolean;
    } else if constexpr (std::is_same_v<T, double>) {
      type = json::value_t::number_float;
    } else if constexpr (std::is_integral_v<T>) {
      type = json::value_t::number_integer;
    } else {
      type = json::value_t::array;
    }
    absl::StatusOr<const json*> value = Field(object, path, key, type);
    if (!value.ok()) return value.status();
    try {
      *out = (*value)->get<T>();
    } catch (const json::exception& e) {
      return Error(path + "." + key, e.what());
    }
    return absl::OkStatus();
  }

  absl::Status GetFile(const json& object, const std::string& path, const char* key,
                       BundleFile* out) const {
    absl::StatusOr<const json*> file = Field(object, path, key, json::value_t::object);
    if (!file.ok()) return file.status();
    std::string p = path + "." + key;
    if (absl::Status s = Get(**file, p, "path", &out->path); !s.ok()) return s;
    return Get(**file, p, "sha256", &out->sha256);
  }

 private:
  std::string where_;
};

absl::StatusOr<BundleKernel> ParseKernel(const Reader& r, const json& j, const std::string& path) {
  BundleKernel k;
  for (auto [key, field] : {std::pair{"id", &k.id}, {"target_id", &k.target_id}, {"op", &k.op},
                            {"overload", &k.overload}, {"schema", &k.schema},
                            {"signature", &k.signature}}) {
    if (absl::Status s = r.Get(j, path, key, field); !s.ok()) return s;
  }
  if (j.contains("constants")) k.constants = j.at("constants");
  if (j.contains("chain")) {
    absl::StatusOr<const json*> chain = r.Field(j, path, "chain", json::value_t::array);
    if (!chain.ok()) return chain.status();
    for (size_t i = 0; i < (*chain)->size(); ++i) {
      const json& n = (**chain)[i];
      const std::string np = absl::StrCat(path, ".chain[", i, "]");
      BundleNode node;
      for (auto [key, field] :
           {std::pair{"op", &node.op}, {"overload", &node.overload}, {"schema", &node.schema}}) {
        if (absl::Status s = r.Get(n, np, key, field); !s.ok()) return s;
      }
      if (n.contains("constants")) node.constants = n.at("constants");
      k.chain.push_back(std::move(node));
    }
  }
  absl::StatusOr<const json*> guards = r.Field(j, path, "guards", json::value_t::object);
  if (!guards.ok()) return guards.status();
  std::string device_type;
  if (absl::Status s = r.Get(**guards, path + ".guards", "device_type", &device_type); !s.ok()) {
    return s;
  }
  if (device_type != "cuda") {
    return r.Error(path + ".guards.device_type", "only \"cuda\" is supported");
  }
  absl::StatusOr<const json*> inputs =
      r.Field(**guards, path + ".guards", "inputs", json::value_t::array);
  if (!inputs.ok()) return inputs.status();
  for (size_t i = 0; i < (*inputs)->size(); ++i) {
    const json& in = (*inputs)->at(i);
    std::string p = absl::StrCat(path, ".guards.inputs[", i, "]");
    TensorGuard g;
    for (absl::Status s : {r.Get(in, p, "dtype", &g.dtype), r.Get(in, p, "sizes", &g.sizes),
                           r.Get(in, p, "strides", &g.strides),
                           r.Get(in, p, "contiguous", &g.contiguous),
                           r.Get(in, p, "alignment_bytes", &g.alignment_bytes)}) {
      if (!s.ok()) return s;
    }
    k.inputs.push_back(std::move(g));
  }
  absl::StatusOr<const json*> outputs = r.Field(j, path, "outputs", json::value_t::array);
  if (!outputs.ok()) return outputs.status();
  for (size_t i = 0; i < (*outputs)->size(); ++i) {
    const json& out = (*outputs)->at(i);
    std::string p = absl::StrCat(path, ".outputs[", i, "]");
    OutputSpec o;
    for (absl::Status s : {r.Get(out, p, "dtype", &o.dtype), r.Get(out, p, "sizes", &o.sizes),
                           r.Get(out, p, "strides", &o.strides)}) {
      if (!s.ok()) return s;
    }
    if (out.contains("aliases_input")) {
      if (absl::Status s = r.Get(out, p, "aliases_input", &o.aliases_input); !s.ok()) return s;
    }
    k.outputs.push_back(std::move(o));
  }
  absl::StatusOr<const json*> scalars = r.Field(j, path, "scalar_args", json::value_t::object);
  if (!scalars.ok()) return scalars.status();
  if (absl::Status s = r.Get(**scalars, path + ".scalar_args", "ints", &k.int_args); !s.ok()) {
    return s;
  }
  if (absl::Status s = r.Get(**scalars, path + ".scalar_args", "floats", &k.float_args);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<const json*> plan = r.Field(j, path, "launch_plan", json::value_t::object);
  if (!plan.ok()) return plan.status();
  k.launch_plan_json = (*plan)->dump();
  absl::StatusOr<const json*> binaries = r.Field(j, path, "binaries", json::value_t::array);
  if (!binaries.ok()) return binaries.status();
  for (size_t i = 0; i < (*binaries)->size(); ++i) {
    const json& b = (*binaries)->at(i);
    std::string p = absl::StrCat(path, ".binaries[", i, "]");
    KernelBinary kb;
    for (absl::Status s : {r.Get(b, p, "arch", &kb.arch), r.GetFile(b, p, "cubin", &kb.cubin),
                           r.GetFile(b, p, "ptx", &kb.ptx), r.Get(b, p, "validated", &kb.validated)}) {
      if (!s.ok()) return s;
    }
    k.binaries.push_back(std::move(kb));
  }
  if (absl::Status s = r.GetFile(j, path, "source", &k.source); !s.ok()) return s;
  absl::StatusOr<const json*> measured = r.Field(j, path, "measured", json::value_t::object);
  if (!measured.ok()) return measured.status();
  std::string mp = path + ".measured";
  for (absl::Status s :
       {r.Get(**measured, mp, "candidate_id", &k.candidate_id), r.Get(**measured, mp, "gpu", &k.gpu_name),
        r.Get(**measured, mp, "eager_s", &k.eager_s), r.Get(**measured, mp, "kernel_s", &k.kernel_s),
        r.Get(**measured, mp, "speedup", &k.speedup)}) {
    if (!s.ok()) return s;
  }
  return k;
}

bool IsSha256Hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A path relative to the bundle that stays inside it.
bool IsInsideBundle(const std::string& path) {
  if (path.empty() || path.front() == '/') return false;
  for (const auto& part : std::filesystem::path(path)) {
    if (part == "..") return false;
  }
  return true;
}

bool IsArch(const std::string& arch) {
  if (arch.size() < 5 || arch.rfind("sm_", 0) != 0) return false;
  for (size_t i = 3; i < arch.size(); ++i) {
    if (arch[i] < '0' || arch[i] > '9') return false;
  }
  return true;
}

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

int KfDtypeFromName(std::string_view name) {
  for (const auto& [value, text] : kDtypes) {
    if (name == text) return value;
  }
  return 0;
}

std::string KfDtypeName(int kf_dtype) {
  for (const auto& [value, text] : kDtypes) {
    if (value == kf_dtype) return text;
  }
  return "";
}

std::string ManifestToJson(const BundleManifest& manifest) {
  json kernels = json::array();
  for (const BundleKernel& k : manifest.kernels) kernels.push_back(KernelJson(k));
  json j = {{"format", manifest.format},
            {"created_by", manifest.created_by},
            {"source_run", manifest.source_run},
            {"model_sha256", manifest.model_sha256},
            {"kernels", std::move(kernels)},
            {"notes", manifest.notes}};
  // nlohmann's object is a std::map: keys come out sorted, so the text is deterministic.
  return j.dump(2) + "\n";
}

absl::StatusOr<BundleManifest> ParseManifest(std::string_view text, const std::string& where) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": not a JSON object; re-export the bundle with kforge export"));
  }
  Reader r(where);
  BundleManifest m;
  for (absl::Status s : {r.Get(j, "", "format", &m.format), r.Get(j, "", "created_by", &m.created_by),
                         r.Get(j, "", "source_run", &m.source_run),
                         r.Get(j, "", "model_sha256", &m.model_sha256)}) {
    if (!s.ok()) return s;
  }
  if (!ReadableFormat(m.format)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": format '", m.format, "' is not ", kBundleFormat,
                     "; this runtime reads ", ReadableFormats(),
                     " bundles only (export the model again with this kforge)"));
  }
  absl::StatusOr<const json*> kernels = r.Field(j, "", "kernels", json::value_t::array);
  if (!kernels.ok()) return kernels.status();
  for (size_t i = 0; i < (*kernels)->size(); ++i) {
    absl::StatusOr<BundleKernel> k = ParseKernel(r, (*kernels)->at(i), absl::StrCat("kernels[", i, "]"));
    if (!k.ok()) return k.status();
    m.kernels.push_back(*std::move(k));
  }
  if (j.contains("notes")) {
    if (absl::Status s = r.Get(j, "", "notes", &m.notes); !s.ok()) return s;
  }
  if (absl::Status s = ValidateManifest(m, where); !s.ok()) return s;
  return m;
}

absl::Status ValidateManifest(const BundleManifest& m, const std::string& where) {
  auto error = [&](const std::string& path, const std::string& problem) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", path, ": ", problem));
  };
  if (!ReadableFormat(m.format)) {
    return error("format", absl::StrCat("must be one of ", ReadableFormats()));
  }
  std::set<std::string> ids;
  auto check_file = [&](const BundleFile& f, const std::string& path) -> absl::Status {
    if (!IsInsideBundle(f.path)) {
      return error(path + ".path", absl::StrCat("'", f.path, "' is not a path inside the bundle"));
    }
    if (!IsSha256Hex(f.sha256)) return error(path + ".sha256", "not a lowercase hex sha256");
    return absl::OkStatus();
  };
  for (size_t i = 0; i < m.kernels.size(); ++i) {
    const BundleKernel& k = m.kernels[i];
    const std::string p = absl::StrCat("kernels[", i, "]");
    if (k.id.empty() || k.id.find_first_of(": ") != std::string::npos) {
      return error(p + ".id", "must be non-empty without ':' or spaces (counter keys use ':')");
    }
    if (!ids.insert(k.id).second) return error(p + ".id", absl::StrCat("'", k.id, "' repeats"));
    if (k.op.rfind("aten::", 0) != 0) return error(p + ".op", "expected an aten operator");
    std::vector<std::string> chain_ops;
    for (size_t n = 0; n < k.chain.size(); ++n) {
      if (k.chain[n].op.rfind("aten::", 0) != 0) {
        return error(absl::StrCat(p, ".chain[", n, "].op"), "expected an aten operator");
      }
      chain_ops.push_back(k.chain[n].op);
    }
    if (!k.chain.empty() && k.op != absl::StrJoin(chain_ops, " -> ")) {
      return error(p + ".op", "a chain's op must name its nodes' ops joined by \" -> \"");
    }
    if (k.inputs.empty() || k.inputs.size() > KF_MAX_INPUTS) {
      return error(p + ".guards.inputs", absl::StrCat("1 to ", KF_MAX_INPUTS, " inputs"));
    }
    if (k.outputs.empty() || k.outputs.size() > KF_MAX_OUTPUTS) {
      return error(p + ".outputs", absl::StrCat("1 to ", KF_MAX_OUTPUTS, " outputs"));
    }
    if (k.int_args.size() > KF_MAX_INT_ARGS || k.float_args.size() > KF_MAX_FLOAT_ARGS) {
      return error(p + ".scalar_args", "more scalar arguments than the kernel ABI holds");
    }
    auto check_tensor = [&](const std::string& tp, const std::string& dtype,
                            const std::vector<int64_t>& sizes,
                            const std::vector<int64_t>& strides) -> absl::Status {
      if (KfDtypeFromName(dtype) == 0) return error(tp + ".dtype", absl::StrCat("unknown dtype '", dtype, "'"));
      if (sizes.size() > KF_MAX_DIMS) return error(tp + ".sizes", absl::StrCat("more than ", KF_MAX_DIMS, " dims"));
      if (strides.size() != sizes.size()) return error(tp + ".strides", "one stride per dim");
      for (int64_t s : sizes) {
        if (s < 0) return error(tp + ".sizes", "negative size");
      }
      return absl::OkStatus();
    };
    for (size_t j = 0; j < k.inputs.size(); ++j) {
      const TensorGuard& g = k.inputs[j];
      std::string tp = absl::StrCat(p, ".guards.inputs[", j, "]");
      if (absl::Status s = check_tensor(tp, g.dtype, g.sizes, g.strides); !s.ok()) return s;
      if (g.alignment_bytes < 1 || g.alignment_bytes > 4096 ||
          (g.alignment_bytes & (g.alignment_bytes - 1)) != 0) {
        return error(tp + ".alignment_bytes", "a power of two from 1 to 4096");
      }
    }
    for (size_t j = 0; j < k.outputs.size(); ++j) {
      const OutputSpec& o = k.outputs[j];
      if (absl::Status s = check_tensor(absl::StrCat(p, ".outputs[", j, "]"), o.dtype, o.sizes, o.strides);
          !s.ok()) {
        return s;
      }
      if (o.aliases_input >= 0) {
        const std::string ap = absl::StrCat(p, ".outputs[", j, "].aliases_input");
        if (o.aliases_input >= static_cast<int>(k.inputs.size())) return error(ap, "no such input");
        const TensorGuard& in = k.inputs[o.aliases_input];
        if (in.dtype != o.dtype || in.sizes != o.sizes || in.strides != o.strides) {
          return error(ap, "the input's dtype, sizes and strides differ from the output's");
        }
      }
    }
    if (absl::StatusOr<LaunchPlan> plan = LaunchPlan::Parse(k.launch_plan_json); !plan.ok()) {
      return error(p + ".launch_plan", std::string(plan.status().message()));
    }
    if (k.binaries.empty()) return error(p + ".binaries", "no compiled binary");
    std::set<std::string> archs;
    for (size_t b = 0; b < k.binaries.size(); ++b) {
      const KernelBinary& kb = k.binaries[b];
      std::string bp = absl::StrCat(p, ".binaries[", b, "]");
      if (!IsArch(kb.arch)) return error(bp + ".arch", absl::StrCat("'", kb.arch, "' is not sm_<digits>"));
      if (!archs.insert(kb.arch).second) return error(bp + ".arch", absl::StrCat(kb.arch, " repeats"));
      if (absl::Status s = check_file(kb.cubin, bp + ".cubin"); !s.ok()) return s;
      if (absl::Status s = check_file(kb.ptx, bp + ".ptx"); !s.ok()) return s;
    }
    if (absl::Status s = check_file(k.source, p + ".source"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<LoadedBundleManifest> ReadBundleManifest(const std::filesystem::path& dir) {
  std::error_code ec;
  LoadedBundleManifest loaded;
  loaded.dir = std::filesystem::absolute(dir, ec);
  if (ec) loaded.dir = dir;
  const std::filesystem::path manifest_path = loaded.dir / kBundleManifestFile;
  if (!std::filesystem::is_regular_file(manifest_path, ec)) {
    return absl::NotFoundError(absl::StrCat(
        "kforge bundle ", loaded.dir.string(), " has no ", kBundleManifestFile,
        "; pass the directory `kforge export --out` wrote"));
  }
  absl::StatusOr<std::string> text = ReadFile(manifest_path);
  if (!text.ok()) return text.status();
  loaded.id = Sha256Hex(*text);
  absl::StatusOr<BundleManifest> manifest = ParseManifest(*text, manifest_path.string());
  if (!manifest.ok()) return manifest.status();
  loaded.manifest = *std::move(manifest);
  auto verify = [&](const BundleFile& f) -> absl::Status {
    const std::filesystem::path path = loaded.dir / f.path;
    absl::StatusOr<std::string> bytes = ReadFile(path);
    if (!bytes.ok()) {
      return absl::DataLossError(absl::StrCat("kforge bundle ", loaded.dir.string(), ": ", f.path,
                                              " is missing (", path.string(),
                                              "); re-export the bundle"));
    }
    std::string actual = Sha256Hex(*bytes);
    if (actual != f.sha256) {
      return absl::DataLossError(absl::StrCat(
          "kforge bundle ", loaded.dir.string(), ": checksum mismatch for ", f.path, " (",
          path.string(), "): the manifest says sha256 ", f.sha256, ", the file has ", actual,
          "; the file changed after export — re-export the bundle"));
    }
    loaded.files[f.path] = *std::move(bytes);
    return absl::OkStatus();
  };
  for (const BundleKernel& k : loaded.manifest.kernels) {
    for (const KernelBinary& b : k.binaries) {
      if (absl::Status s = verify(b.cubin); !s.ok()) return s;
      if (absl::Status s = verify(b.ptx); !s.ok()) return s;
    }
    if (absl::Status s = verify(k.source); !s.ok()) return s;
  }
  return loaded;
}

}  // namespace kforge
