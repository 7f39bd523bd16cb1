// How an elementwise kernel runs a call: each input's read mode along a vector of output
// elements, and the path (element by element, by vectors, or a broadcast row reused across
// output rows). The kernel decides it per call (kf_setup); the generator decides it once, with
// the same function, for the captured call, whose kernel then takes that path as a constant
// as soon as it recognizes the call: no thread-0 setup and no barrier before the first load.
//
// Plain C++ marked KF_HD, embedded in the elementwise kernels after broadcast_groups.cuh
// (kf_row_span) and compiled on the host (device_code.h).

// How an input is read along a vector of V consecutive output elements.
#define KF_FLAT 0         // dense, the output's shape: offset = element index
#define KF_RUN 1          // broadcast, last dim dense and full: V consecutive elements
#define KF_CONST 2        // broadcast, last dim of size 1: one element for the whole vector
#define KF_SCALAR_ONLY 3  // anything else: element by element

#define KF_PATH_SCALAR 0
#define KF_PATH_VEC 1
#define KF_PATH_REUSE 2

// The call's tensors in the output's memory order, where the output is not contiguous: every
// tensor's dims (an input's aligned to the output's, missing leading dims of size 1) permuted
// so that the output's strides fall, its dims of size 1 first. An output dense in some order,
// as eager lays out the result of a transposed input (a rotary embedding's q * cos), is then
// contiguous, and the kernel's walk over element indices is the output's memory. A contiguous
// output keeps every tensor as it is.
struct KfCallTensors {
  KfTensor in0, in1, out;
};

KF_HD KfCallTensors kf_in_memory_order(const KfTensor& in0, const KfTensor& in1,
                                       const KfTensor& out) {
  if (kf_flat(out, out)) return {in0, in1, out};
  int perm[KF_MAX_DIMS];
  kf_memory_perm(out, perm);
  return {kf_permuted(in0, out.ndim, perm), kf_permuted(in1, out.ndim, perm),
          kf_permuted(out, out.ndim, perm)};
}

// f(in0, in1, out) in the output's memory order: a contiguous output's tensors as they are,
// without copies (a kernel's thread 0 reads them in place from its parameters).
template <typename F>
KF_HD auto kf_with_memory_order(const KfTensor& in0, const KfTensor& in1, const KfTensor& out,
                                F f) {
  if (kf_flat(out, out)) return f(in0, in1, out);
  const KfCallTensors t = kf_in_memory_order(in0, in1, out);
  return f(t.in0, t.in1, t.out);
}

// Whether 32-bit indices serve the call: every tensor's elements and offsets fit.
KF_HD bool kf_call_fits_index32(const KfTensor& in0, const KfTensor& in1, const KfTensor& out) {
  return kf_fits_index32(out) && kf_fits_index32(in0) && kf_fits_index32(in1);
}

KF_HD int kf_mode(const KfTensor& t, const KfTensor& out, int v) {
  if (kf_flat(t, out)) return KF_FLAT;
  const kf_i64 out_last = out.ndim > 0 ? out.sizes[out.ndim - 1] : 1;
  if (out_last % v != 0) return KF_SCALAR_ONLY;
  const kf_i64 t_last = t.ndim > 0 ? t.sizes[t.ndim - 1] : 1;
  if (t_last == 1) return KF_CONST;
  if (t_last != out_last || t.strides[t.ndim - 1] != 1) return KF_SCALAR_ONLY;
  for (int d = 0; d < t.ndim - 1; ++d) {
    if (t.sizes[d] != 1 && t.strides[d] % v != 0) return KF_SCALAR_ONLY;  // keeps alignment
  }
  return KF_RUN;
}

struct KfSetup {
  int small;  // 32-bit indices (kf_call_fits_index32)
  int path;
  int mode0, mode1;
  int row_input;  // KF_PATH_REUSE: the broadcast input, `inner` elements per output row
  kf_i64 inner;
};

// The path of a call with `nin` inputs (in1 is in0 when there is one) for a kernel of vectors
// of `vec` elements reusing a row input across `reuse` rows; `aligned`: every pointer is
// aligned for its vectors.
KF_HD KfSetup kf_decide(const KfTensor& in0, const KfTensor& in1, const KfTensor& out, int nin,
                        int vec, int reuse, bool aligned) {
  KfSetup s = {};
  s.small = kf_call_fits_index32(in0, in1, out);
  const bool flat0 = kf_flat(in0, out), flat1 = kf_flat(in1, out);
  s.mode0 = kf_mode(in0, out, vec);
  s.mode1 = nin == 2 ? kf_mode(in1, out, vec) : KF_FLAT;
  const bool vec_ok = vec > 1 && s.mode0 != KF_SCALAR_ONLY && s.mode1 != KF_SCALAR_ONLY && aligned;
  s.path = vec_ok ? KF_PATH_VEC : KF_PATH_SCALAR;
  if (!vec_ok) {  // element by element, a scalar mode per input
    s.mode0 = flat0 ? KF_FLAT : KF_SCALAR_ONLY;
    s.mode1 = nin == 1 || flat1 ? KF_FLAT : KF_SCALAR_ONLY;
  }
  // One input flat, the other spanning one output row of a multiple of vec elements.
  if (reuse > 1 && nin == 2 && vec_ok && flat0 != flat1) {
    s.row_input = flat0 ? 1 : 0;
    s.inner = kf_row_span(flat0 ? in1 : in0, out);
    if (s.inner > 0 && s.inner % vec == 0) s.path = KF_PATH_REUSE;
  }
  return s;
}
