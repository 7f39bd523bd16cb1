// The view a layout copy reads (the layout family's kernels, device_code.h on the host): the
// input with each element repeated along some dims (nearest-neighbour upsampling by whole
// factors), its dims in the output's memory order, so that the view's elements in order are
// the output's memory and the copy writes it front to back.
//
// Plain C++ marked KF_HD, embedded after broadcast_groups.cuh (kf_flat, kf_memory_perm,
// kf_permuted).

// `t` with each element of dim d repeated repeat[d] times in a row (0 or 1: not repeated;
// nearest-neighbour upsampling by integer factors, as a view): a repeated dim becomes two, (size, r) with
// strides (stride, 0), and kf_groups of the view reads the upsampled output's elements in
// order. False, `v` unset, when the view would need more than KF_MAX_DIMS dims.
KF_HD bool kf_repeat_view(const KfTensor& t, const int* repeat, KfTensor& v) {
  int n = t.ndim;
  for (int d = 0; d < t.ndim; ++d) n += repeat[d] > 1 ? 1 : 0;
  if (n > KF_MAX_DIMS) return false;
  v = t;
  v.ndim = n;
  v.numel = t.numel;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (repeat[d] > 1) {
      --n;
      v.sizes[n] = repeat[d];
      v.strides[n] = 0;
      v.numel *= repeat[d];
    }
    --n;
    v.sizes[n] = t.sizes[d];
    v.strides[n] = t.strides[d];
  }
  return true;
}

// Input `t` as the copy into `out` reads it: repeat[d] copies of each element along dim d (1
// for a plain copy), the dims permuted into out's memory order where `out` is dense in another
// (eager's upsample or clone of a channels-last tensor); `t` and `out` then have the same dims.
// False where the view needs more than KF_MAX_DIMS dims.
KF_HD bool kf_copy_view(const KfTensor& t, const KfTensor& out, const int* repeat, KfTensor& v) {
  if (kf_flat(out, out) || t.ndim != out.ndim) return kf_repeat_view(t, repeat, v);
  int perm[KF_MAX_DIMS];
  kf_memory_perm(out, perm);
  int r[KF_MAX_DIMS];
  for (int i = 0; i < t.ndim; ++i) r[i] = repeat[perm[i]];
  return kf_repeat_view(kf_permuted(t, t.ndim, perm), r, v);
}

// How a copy reads its view, whose groups are `g`, in vectors of `vec` elements: vectors of a
// dense innermost group, vectors of one repeated element (an innermost group of stride 0),
// vectors of vec / spread elements each repeated `spread` times (an innermost group of stride
// 0 and that size: an upsampled row; spread 0: not an upsampling of the innermost dim), or
// element by element. Vector stores need the output aligned to a vector (`out_aligned`); a
// vector read of the input needs its innermost group to hold whole vectors, and every outer
// stride and the pointer (`in_aligned`) to keep them aligned; a repeated element or an
// upsampled row's elements are read one by one (a warp's reads still coalesce).
#define KF_READ_SCALAR 0
#define KF_READ_DENSE 1
#define KF_READ_REPEAT 2
#define KF_READ_SPREAD 3
template <typename I>
KF_HD int kf_layout_read(const KfGroups<I>& g, int vec, int spread, bool out_aligned,
                         bool in_aligned) {
  if (vec == 1 || g.n == 0 || !out_aligned) return KF_READ_SCALAR;
  if (spread > 0 && g.stride[0] == 0 && g.size[0] == spread && g.n > 1 &&
      g.size[1] % (vec / spread) == 0) {
    return KF_READ_SPREAD;
  }
  if (g.size[0] % vec != 0) return KF_READ_SCALAR;
  if (g.stride[0] == 0) return KF_READ_REPEAT;
  for (int k = 1; k < g.n; ++k) {
    if (g.stride[k] % vec != 0) return KF_READ_SCALAR;
  }
  return g.stride[0] == 1 && in_aligned ? KF_READ_DENSE : KF_READ_SCALAR;
}
