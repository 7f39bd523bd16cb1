// LayoutFamily: copies that change a tensor's layout, not its values — contiguous, clone and
// reshape of a strided view (attention's transpose(1, 2).contiguous(), a key/value head
// repeated by expand + reshape) of any element type — and nearest-neighbour upsampling by
// integer factors, a copy of a view that repeats each element. The output is dense: contiguous,
// or in another order where eager keeps the input's (a channels-last upsample or clone), which
// the copy writes front to back. The kernel reads the input through its own sizes and strides
// at run time as that view (device/copy_view.cuh), its dims merged into groups
// (device/broadcast_groups.cuh), so one source serves every layout: vectors where the innermost
// group is dense, repeats one element, or repeats each of a few adjacent ones (an upsampled
// row), element by element otherwise. The captured call has an entry of its own whose read and
// groups are constants worked out on the host (kf_layout_copy_captured).
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "services/proposer/synth/device_code.h"
#include "services/proposer/synth/family.h"
#include "services/proposer/synth/kernel_source.h"
#include "services/proposer/synth/target_args.h"

namespace kforge::synth {
namespace {

struct LayoutProblem {
  std::string name;
  v1::DType dtype = v1::FLOAT32;
  int64_t numel = 0;       // the output's elements
  int64_t read_numel = 0;  // the input's (fewer where upsampling repeats them)
  // Upsampling: how many times each input dim's elements repeat in a row (1 where they do
  // not); empty for a copy.
  std::vector<int> repeat;
  KfGroups<kf_i64> in_groups = {};  // the captured input's groups along the output
  uint64_t shape_key = 0;  // the captured call's (CapturedShapeKey), the plan's `captured`
  bool index32 = false;    // the captured call's elements and offsets fit 32-bit indices
};

constexpr char kEngine[] = R"(
template <typename I>
struct KfLayout {
  KfGroups<I> groups;
  int read;  // KF_READ_*
};

// Thread 0's decision for a call other than the captured one (kf_layout_read).
template <typename I>
__device__ __forceinline__ void kf_layout(const KfArgs& args, KfLayout<I>& l) {
#ifdef KF_REPEAT
  const int repeat[KF_MAX_DIMS] = {KF_REPEAT};
#else
  const int repeat[KF_MAX_DIMS] = {};
#endif
  KfTensor x;
  kf_copy_view(args.inputs[0], args.outputs[0], repeat, x);  // the family checked that it fits
  kf_groups<I>(x, x, l.groups);
  l.read = kf_layout_read<I>(l.groups, KF_VEC, KF_SPREAD,
                             kf_aligned(args.outputs[0].data, KF_VEC * (int)sizeof(T)),
                             kf_aligned(x.data, KF_VEC * (int)sizeof(T)));
}

__device__ __forceinline__ kf_i64 kf_numel(const KfArgs& args) { return args.outputs[0].numel; }
__device__ __forceinline__ kf_i64 kf_numel(const KfCapturedArgs&) { return KF_CAPTURED_NUMEL; }

// The input offset of output element e: through the groups the block built, or for the
// captured call (CAPTURED) through its groups as constants.
template <typename I, bool CAPTURED>
__device__ __forceinline__ I kf_offset(const KfLayout<I>& l, I e) {
  return CAPTURED ? kf_captured_offset<I>(e) : kf_group_offset<I>(l.groups, e);
}

// A: KfArgs, or KfCapturedArgs for the captured call; both carry the pointers in data[].
template <int V, typename I, bool CAPTURED, typename A>
__device__ __forceinline__ void kf_copy(const A& args, const KfLayout<I>& l, int read) {
  const T* x = reinterpret_cast<const T*>(args.data[0]);
  T* y = reinterpret_cast<T*>(args.data[KF_MAX_INPUTS]);
  const I nv = (I)kf_numel(args) / V;
  const I step = (I)gridDim.x * KF_THREADS * KF_ILP;
  // The captured call on a one-shot grid that tiles it exactly (KF_CAPTURED_EXACT): every
  // thread's vectors are in range and there is no second round, so no bound is tested and no
  // trip count divided out.
  constexpr bool exact = CAPTURED && KF_CAPTURED_EXACT && V == KF_VEC;
  for (I base = (I)blockIdx.x * KF_THREADS * KF_ILP + (I)threadIdx.x; exact || base < nv;
       base += step) {
    KfVec<T, V> v[KF_ILP];
#pragma unroll
    for (int j = 0; j < KF_ILP; ++j) {
      const I k = base + (I)j * KF_THREADS;
      if (exact || k < nv) {
        const I offset = kf_offset<I, CAPTURED>(l, k * V);
        if (read == KF_READ_DENSE) {
          v[j] = *reinterpret_cast<const KfVec<T, V>*>(x + offset);
        } else if (KF_SPREAD > 0 && read == KF_READ_SPREAD) {
          // The vector starts a run of KF_SPREAD copies: its elements are group 1's next
          // V / KF_SPREAD elements, each KF_SPREAD times.
          const I stride1 = CAPTURED ? (I)KF_CAPTURED_STRIDE1 : l.groups.stride[1];
#pragma unroll
          for (int u = 0; u < V / (KF_SPREAD > 0 ? KF_SPREAD : 1); ++u) {
            const T e = x[offset + (I)u * stride1];
#pragma unroll
            for (int i = 0; i < KF_SPREAD; ++i) v[j].v[u * KF_SPREAD + i] = e;
          }
        } else {
#pragma unroll
          for (int i = 0; i < V; ++i) {
            v[j].v[i] = read == KF_READ_REPEAT ? x[offset]
                                               : x[kf_offset<I, CAPTURED>(l, k * V + i)];
          }
        }
      }
    }
#pragma unroll
    for (int j = 0; j < KF_ILP; ++j) {
      const I k = base + (I)j * KF_THREADS;
      if (exact || k < nv) *reinterpret_cast<KfVec<T, V>*>(y + k * V) = v[j];
    }
    if (exact) break;
  }
}

template <typename I, bool CAPTURED, typename A>
__device__ __forceinline__ void kf_copy_all(const A& args, const KfLayout<I>& l, int read) {
  if (read == KF_READ_SCALAR) {
    kf_copy<1, I, CAPTURED>(args, l, KF_READ_SCALAR);
    return;
  }
  kf_copy<KF_VEC, I, CAPTURED>(args, l, read);
  // The elements past the last whole vector.
  const I n = (I)kf_numel(args);
  const T* x = reinterpret_cast<const T*>(args.data[0]);
  T* y = reinterpret_cast<T*>(args.data[KF_MAX_INPUTS]);
  if (blockIdx.x == 0) {
    for (I e = n / KF_VEC * KF_VEC + (I)threadIdx.x; e < n; e += KF_THREADS) {
      y[e] = x[kf_offset<I, CAPTURED>(l, e)];
    }
  }
}

template <typename I>
__device__ __forceinline__ void kf_layout_copy_body(const KfArgs& args) {
  __shared__ KfLayout<I> layout;
  if (threadIdx.x == 0) kf_layout<I>(args, layout);
  __syncthreads();
  kf_copy_all<I, false>(args, layout, layout.read);
}

extern "C" __global__ void __launch_bounds__(KF_THREADS) kf_layout_copy(KfArgs args) {
  // 32-bit indices while every element and offset fits (the family refuses negative strides).
  if (kf_fits_index32(args.outputs[0]) && kf_fits_index32(args.inputs[0])) {
    kf_layout_copy_body<int>(args);
  } else {
    kf_layout_copy_body<kf_i64>(args);
  }
}

#if KF_CAPTURED_READ >= 0
// The captured call, which the launcher recognizes by its shape key and alignment (the plan's
// `captured`): its read is a constant and its offsets divide by constants, so no thread works
// out the layout and no block waits at a barrier before its first load.
extern "C" __global__ void __launch_bounds__(KF_THREADS)
    kf_layout_copy_captured(KfCapturedArgs args) {
  kf_copy_all<int, true>(args, KfLayout<int>{}, KF_CAPTURED_READ);
}
#endif
)";

class LayoutGenerator : public KernelGenerator {
 public:
  LayoutGenerator(const LayoutProblem& p, const GpuModel& gpu) : p_(p), gpu_(gpu) {
    space_ = ParamSpace({
        {"threads", {"64", "128", "256", "512", "1024"}, "threads per block"},
        {"vec", {"1", "2", "4", "8", "16"}, "elements per load/store (16 bytes at most)"},
        {"ilp", {"1", "2", "4"}, "vectors in flight per thread"},
        {"grid", {"oneshot", "stride"},
         "one thread per vector group, or num_sms * occupancy blocks looping"},
    });
  }

  const ParamSpace& Space() const override { return space_; }
  Config Canonicalize(const Config& c) const override { return c; }

  std::string Check(const Config& c) const override {
    const int bytes = c.GetInt("vec") * ElementSize(p_.dtype);
    if (bytes > 16) return absl::StrCat("vectors of ", bytes, " bytes: loads of 16 at most");
    return "";
  }

  int64_t SharedBytes(const Config&) const override { return 0; }

  double MinBytes() const override {
    return double(p_.read_numel + p_.numel) * ElementSize(p_.dtype);
  }

  int Registers(const Config& c) const {
    return 28 + c.GetInt("ilp") * std::max(1, c.GetInt("vec") * ElementSize(p_.dtype) / 4);
  }

  // The captured input's read: whole vectors when its innermost group is dense (or repeats
  // one element, or spreads an upsampled row), else element by element, each in a 32-byte
  // sector it shares with a few neighbours at best (a transpose of the innermost dims).
  double EstimateSeconds(const Config& c) const override {
    const int threads = c.GetInt("threads"), vec = c.GetInt("vec"), ilp = c.GetInt("ilp");
    const double n = std::max<int64_t>(1, p_.numel);
    const KfGroups<kf_i64>& g = p_.in_groups;
    const bool dense = g.n > 0 && g.stride[0] == 1 && g.size[0] % vec == 0;
    const bool repeat = g.n > 0 && g.stride[0] == 0;
    const int es = ElementSize(p_.dtype);
    const double read_factor = dense || repeat ? 1.0 : std::max(1.0, 32.0 / es / 2);
    const int effective_vec = dense || repeat ? vec : 1;
    const double read_bytes = double(p_.read_numel) * es * read_factor;
    const double blocks = std::ceil(n / (double(threads) * vec * ilp));
    const int per_sm = std::max(1, BlocksPerSm(gpu_, threads, 0, Registers(c)));
    const double grid =
        c.Get("grid") == "stride" ? std::min(blocks, double(gpu_.sm_count) * per_sm) : blocks;
    LaunchCost launch;
    launch.blocks = grid;
    launch.threads = threads;
    launch.registers = Registers(c);
    launch.dram_bytes = (read_bytes + n * es) * AccessWidthPenalty(effective_vec * es);
    launch.bytes_in_flight_per_thread = double(vec) * ilp * es;
    // Index math: a division and a multiply-add per group, per vector (per element without).
    launch.ops = n * (2 + 6.0 * std::max(1, g.n) / effective_vec);
    launch.block_latency_cycles = std::ceil(blocks / grid) * 700;
    return EstimateLaunchSeconds(gpu_, launch);
  }

  std::vector<Config> Seeds() const override {
    Config c;
    c.SetInt("threads", 256);
    c.SetInt("vec", std::max(1, 16 / ElementSize(p_.dtype)));
    c.SetInt("ilp", 2);
    c.Set("grid", "stride");
    return {c};
  }

  absl::StatusOr<GeneratedKernel> Generate(const Config& c) const override {
    if (std::string why = Check(c); !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("config ", c.ToString(), ": ", why));
    }
    const int threads = c.GetInt("threads"), vec = c.GetInt("vec"), ilp = c.GetInt("ilp");
    std::string src = SourceHeader(absl::StrCat(p_.name, " layout copy"));
    src += DevicePreamble({});
    absl::StrAppend(&src, "\ntypedef ", CudaType(p_.dtype), " T;\n#define KF_THREADS ", threads,
                    "\n#define KF_VEC ", vec, "\n#define KF_ILP ", ilp, "\n");
    if (!p_.repeat.empty()) {
      absl::StrAppend(&src, "#define KF_REPEAT ", absl::StrJoin(p_.repeat, ", "), "\n");
    }
    absl::StrAppend(&src, "#define KF_SPREAD ", Spread(c), "\n");
    src += FastDivideSource();
    src += BroadcastGroupsSource();
    src += CopyViewSource();
    const int captured_read = CapturedRead(c);
    src += CapturedShapeSource(c, captured_read);
    src += kEngine;
    PlanSpec plan;
    const std::string grid = FlatGrid(plan, threads * vec * ilp, c.Get("grid") == "stride",
                                      std::max(1, BlocksPerSm(gpu_, threads, 0, Registers(c))));
    plan.launches.push_back({"kf_layout_copy", {grid, "1", "1"}, {threads, 1, 1}, "0", {}});
    // Any input layout: the kernel reads the strides it is given and checks its alignment.
    plan.contiguous = false;
    if (p_.index32) {  // for the captured call with pointers aligned as its read assumed
      plan.launches.back().captured_entry = "kf_layout_copy_captured";
      plan.captured = CapturedCall{p_.shape_key, captured_read == KF_READ_SCALAR
                                                     ? 1
                                                     : vec * ElementSize(p_.dtype)};
    }
    return GeneratedKernel{std::move(src), PlanJson(plan)};
  }

 private:
  // Vectors of an upsampled row: the innermost dim's copies, a few per vector (KF_SPREAD); 0
  // where the innermost dim is not upsampled so.
  int Spread(const Config& c) const {
    const int vec = c.GetInt("vec");
    const int innermost = p_.repeat.empty() ? 1 : p_.repeat.back();
    return innermost > 1 && innermost < vec && vec % innermost == 0 ? innermost : 0;
  }

  // The captured call's read (kf_layout_read) with its pointers aligned to a vector, which the
  // plan's `captured` then requires.
  int CapturedRead(const Config& c) const {
    return kf_layout_read<kf_i64>(p_.in_groups, c.GetInt("vec"), Spread(c), true, true);
  }

  // The captured call baked into the kernel's captured entry (kf_layout_copy_captured), which
  // the launcher takes for a call of its shape key and alignment: its read `captured_read` as a
  // constant (KF_CAPTURED_READ; -1: no captured entry, a call of 64-bit indices), whether a
  // one-shot grid of its vectors tiles it exactly (KF_CAPTURED_EXACT), its element count, and
  // kf_captured_offset(e), the input offset of output element e through its groups with their
  // sizes as constants. Other calls take kf_layout_copy, whose thread 0 works the layout out.
  std::string CapturedShapeSource(const Config& c, int captured_read) const {
    std::string src = kConstDivide;
    if (!p_.index32) {
      return src + R"(#define KF_CAPTURED_READ -1
#define KF_CAPTURED_EXACT 0
#define KF_CAPTURED_NUMEL 0
#define KF_CAPTURED_STRIDE1 0
template <typename I>
__device__ __forceinline__ I kf_captured_offset(I e) { return e; }
)";
    }
    const KfGroups<kf_i64>& g = p_.in_groups;
    const int64_t per_block = int64_t{c.GetInt("threads")} * c.GetInt("vec") * c.GetInt("ilp");
    const bool exact = captured_read != KF_READ_SCALAR &&
                       OneShotTilesExactly(c.Get("grid") == "stride", p_.numel, per_block);
    absl::StrAppend(&src, kCapturedShapeBegin, "\n#define KF_CAPTURED_READ ", captured_read,
                    "\n#define KF_CAPTURED_EXACT ", exact ? 1 : 0,
                    "\n#define KF_CAPTURED_NUMEL ", p_.numel, "\n#define KF_CAPTURED_STRIDE1 ",
                    g.n > 1 ? g.stride[1] : 0,
                    "\ntemplate <typename I>\n__device__ __forceinline__ I kf_captured_offset(I e) "
                    "{\n  I offset = 0;\n",
                    ConstGroupOffset(g, "  "), "  return offset;\n}\n", kCapturedShapeEnd, "\n");
    return src;
  }

  LayoutProblem p_;
  GpuModel gpu_;
  ParamSpace space_;
};

// Element types a copy moves as they are (CudaType names a type of their size).
bool CopyableType(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT32: case v1::FLOAT16: case v1::BFLOAT16: case v1::FLOAT64:
    case v1::INT64: case v1::INT32: case v1::INT8: case v1::UINT8: case v1::BOOL:
      return true;
    default:
      return false;
  }
}

// upsample_nearest{1,2,3}d's repeat of each input dim (1 for N and C): the output's size
// over the input's, where ATen's source index of every output index — min(floor(dst * scale),
// in - 1) in float, scale 1 / scale_factor where one is given, else in / out — is dst / r,
// so that the op is a copy of kf_repeat_view. Refuses other ratios, naming them.
absl::StatusOr<std::vector<int>> NearestRepeats(const TargetArgs& args, int spatial) {
  const v1::TensorSignature& in = args.input(0);
  const v1::TensorSignature& out = args.output(0);
  const std::string op = args.OpName();
  if (in.sizes_size() != spatial + 2 || out.sizes_size() != spatial + 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", in.sizes_size(), " input dims for ", spatial, " spatial ones; re-capture"));
  }
  // The scales ATen computes with: scale_factors (the .vec overload), or scales_d/h/w.
  std::vector<std::optional<double>> scales(spatial);
  if (args.node().overload() == "vec") {
    if (!args.IsNone("scale_factors", 2)) {
      KF_ASSIGN_OR_RETURN(std::vector<double> f, args.FloatList("scale_factors", 2));
      if (static_cast<int>(f.size()) != spatial) {
        return absl::InvalidArgumentError(absl::StrCat(op, ": ", f.size(), " scale factors for ",
                                                       spatial, " spatial dims"));
      }
      for (int j = 0; j < spatial; ++j) scales[j] = f[j];
    }
  } else {
    static const std::vector<std::vector<std::string>> kNames = {
        {"scales"}, {"scales_h", "scales_w"}, {"scales_d", "scales_h", "scales_w"}};
    for (int j = 0; j < spatial; ++j) {
      const std::string& name = kNames[spatial - 1][j];
      if (args.Find(name, 2 + j) != nullptr && !args.IsNone(name, 2 + j)) {
        KF_ASSIGN_OR_RETURN(scales[j], args.Float(name, 2 + j));
      }
    }
  }
  std::vector<int> repeat(in.sizes_size(), 1);
  for (int j = 0; j < spatial; ++j) {
    const int64_t n_in = in.sizes(2 + j), n_out = out.sizes(2 + j);
    const float scale = scales[j] && *scales[j] > 0 ? static_cast<float>(1.0 / *scales[j])
                                                    : static_cast<float>(n_in) / n_out;
    const int64_t r = n_in > 0 ? n_out / n_in : 0;
    bool exact = r >= 1 && r * n_in == n_out && r < (int64_t{1} << 20);
    for (int64_t dst = 0; dst < n_out && exact; ++dst) {
      const int64_t src = std::min<int64_t>(
          static_cast<int64_t>(std::floor(static_cast<float>(dst) * scale)), n_in - 1);
      exact = src == dst / r;
    }
    if (!exact) {
      return absl::UnimplementedError(absl::StrCat(
          op, ": spatial dim ", j, " goes from ", n_in, " to ", n_out,
          "; the layout family covers upsampling by whole factors (each input element repeated)"));
    }
    repeat[2 + j] = static_cast<int>(r);
  }
  return repeat;
}

class LayoutFamily : public Family {
 public:
  std::string Name() const override { return "layout"; }
  std::vector<std::string> Ops() const override {
    return {"aten::contiguous", "aten::clone", "aten::reshape", "aten::upsample_nearest1d",
            "aten::upsample_nearest2d", "aten::upsample_nearest3d"};
  }

  absl::StatusOr<std::unique_ptr<KernelGenerator>> Bind(const v1::Target& target,
                                                        const GpuModel& gpu) const override {
    KF_ASSIGN_OR_RETURN(TargetArgs args, TargetArgs::Create(target));
    const std::string op = args.OpName();
    const int spatial = op == "upsample_nearest1d"   ? 1
                        : op == "upsample_nearest2d" ? 2
                        : op == "upsample_nearest3d" ? 3
                                                     : 0;
    if (op != "contiguous" && op != "clone" && op != "reshape" && spatial == 0) {
      return absl::UnimplementedError(absl::StrCat("layout family does not cover ", op));
    }
    if ((op == "contiguous" || op == "clone") && !args.IsNone("memory_format", 1)) {
      KF_ASSIGN_OR_RETURN(int64_t format, args.Int("memory_format", 1));
      // contiguous (0) and preserve (1) of a tensor that is not dense write it contiguous.
      if (format != 0 && format != 1) {
        return absl::UnimplementedError(absl::StrCat(
            op, ": memory_format=", format, "; the layout family writes contiguous outputs"));
      }
    }
    KF_ASSIGN_OR_RETURN(int self, args.RequiredInput(
                                      spatial > 0 && args.node().overload() == "vec" ? "input"
                                                                                     : "self",
                                      0));
    if (self != 0 || args.num_inputs() != 1 || args.num_outputs() != 1) {
      return absl::UnimplementedError(
          absl::StrCat(op, ": the layout family copies one input into one output"));
    }
    const v1::TensorSignature& in = args.input(0);
    const v1::TensorSignature& out = args.output(0);
    if (!CopyableType(in.dtype()) || out.dtype() != in.dtype()) {
      return absl::UnimplementedError(absl::StrCat(
          op, ": dtype ", DTypeName(in.dtype()), " into ", DTypeName(out.dtype()),
          "; the layout family copies float, integer and bool tensors as they are"));
    }
    if (op == "reshape") {
      KF_RETURN_IF_ERROR(RequireDense(out, "output"));
    } else if (!IsDenseInSomeOrder(out)) {
      // Eager's output of an upsample or clone is dense in the input's order where the input is
      // (channels-last), which the copy writes front to back; a view it is not.
      return absl::UnimplementedError(absl::StrCat(
          op, ": the output (strides [", absl::StrJoin(out.strides(), ","),
          "]) is not dense in any order; the layout family writes dense outputs"));
    }
    KF_RETURN_IF_ERROR(RequireCuda(out, "output"));
    KF_RETURN_IF_ERROR(RequireCuda(in, "self"));
    if (in.sizes_size() > KF_MAX_DIMS) {
      return absl::UnimplementedError(absl::StrCat("self has ", in.sizes_size(), " dims; the ABI "
                                                   "carries ", KF_MAX_DIMS));
    }
    LayoutProblem p;
    if (spatial > 0) {
      KF_ASSIGN_OR_RETURN(p.repeat, NearestRepeats(args, spatial));
    }
    int64_t repeated = 1;
    for (int r : p.repeat) repeated *= r;
    if (Numel(in) * repeated != Numel(out)) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": ", Numel(in), " elements in, ", Numel(out), " out; re-capture the model"));
    }
    for (int d = 0; d < in.strides_size(); ++d) {
      if (in.strides(d) < 0) {
        return absl::UnimplementedError("self has a negative stride");
      }
    }
    if (spatial == 0 && IsContiguous(in)) {
      return absl::UnimplementedError(absl::StrCat(
          op, " of a contiguous tensor: a plain copy (or no copy at all), nothing to rearrange"));
    }
    p.name = op;
    p.dtype = in.dtype();
    p.numel = Numel(out);
    p.read_numel = Numel(in);
    std::vector<int> repeat = p.repeat;
    repeat.resize(KF_MAX_DIMS, 1);
    KfTensor view;
    if (!kf_copy_view(SignatureTensor(in), SignatureTensor(out), repeat.data(), view)) {
      return absl::UnimplementedError(absl::StrCat(
          op, ": the upsampled view of self needs more than ", KF_MAX_DIMS, " dims"));
    }
    kf_groups<kf_i64>(view, view, p.in_groups);
    p.shape_key = CapturedShapeKey(target);
    p.index32 = kf_fits_index32(SignatureTensor(in)) && kf_fits_index32(SignatureTensor(out));
    return std::unique_ptr<KernelGenerator>(std::make_unique<LayoutGenerator>(p, gpu));
  }
};

}  // namespace

std::unique_ptr<Family> MakeLayoutFamily() { return std::make_unique<LayoutFamily>(); }

}  // namespace kforge::synth
