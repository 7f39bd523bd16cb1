// Offsets of a broadcast input with the output's dims merged as the input reads them:
// adjacent dims join while the input is dense across both or broadcasts both, and outer
// groups it broadcasts drop out. A [1,8,2048,2048] + [1,1,2048,2048] mask becomes one group
// (4194304, stride 1): one modulo per vector instead of a division and a modulo per dim.
//
// Plain C++ marked KF_HD: the elementwise kernels embed this text (synth.cmake), and the host
// compiles it (device_code.h) for the cost model and a unit test against a per-dim
// reference, so the kernels run tested code. Needs KfTensor, kf_i64 and fast_divide.cuh.

template <typename I>
struct KfGroups {
  int n;  // groups up to the outermost one the input reads (at most one group per dim)
  I size[KF_MAX_DIMS];
  I stride[KF_MAX_DIMS];
  KfDivisor divisor[KF_MAX_DIMS];  // size[k] as a multiply-shift, for 32-bit indices
};

// Whether 32-bit indices reach every element of `t` and every offset it reads: a view's
// largest offset (no stride is negative) can pass 2^31 where its element count does not, as
// a slice [:, :128] of a [20000, 131072] tensor does.
KF_HD bool kf_fits_index32(const KfTensor& t) {
  kf_i64 span = 1;
  for (int d = 0; d < t.ndim; ++d) span += (t.sizes[d] - 1) * t.strides[d];
  return t.numel < 0x7fffffffll && span < 0x7fffffffll;
}

// The first element of row `row` of `t`, whose first `outer_ndim` dims number the rows
// (row-major) and whose other dims are each row's elements: through t's strides, so rows that
// are dense but not adjacent (a head dim normalized after a transpose, [B,H,S,D] viewed from
// [B,S,H,D]) are read in place. Every dim slot is visited at a constant index, so a captured
// entry's tensor stays constants (row_kernel.cc).
KF_HD kf_i64 kf_outer_offset(const KfTensor& t, kf_i64 row, int outer_ndim) {
  kf_i64 offset = 0;
  for (int d = KF_MAX_DIMS - 1; d >= 0; --d) {
    if (d < outer_ndim) {
      const kf_i64 size = t.sizes[d] > 0 ? t.sizes[d] : 1;
      offset += (row % size) * t.strides[d];
      row /= size;
    }
  }
  return offset;
}

template <typename I>
KF_HD void kf_set_group(KfGroups<I>& g, int k, I size, I stride) {
  g.size[k] = size;
  g.stride[k] = stride;
  g.divisor[k] = kf_divisor(sizeof(I) == 4 ? (unsigned long long)size : 1ull);
}

// e / g.size[k].
template <typename I>
KF_HD I kf_group_div(const KfGroups<I>& g, int k, I e) {
  if (sizeof(I) == 4) return (I)kf_divide((unsigned)e, g.divisor[k]);
  return e / g.size[k];
}

// The groups of input `t` read along output `out` (dims aligned from the right; a size-1 dim
// of `t` repeats), innermost first, into `g`.
template <typename I>
KF_HD void kf_groups(const KfTensor& t, const KfTensor& out, KfGroups<I>& g) {
  g.n = 0;
  int count = 0;
  I size = 1, stride = 0;
  const int shift = out.ndim - t.ndim;
  for (int d = out.ndim - 1; d >= 0; --d) {
    const I s = (I)out.sizes[d];
    if (s == 1) continue;
    const int td = d - shift;
    const I st = td >= 0 && t.sizes[td] != 1 ? (I)t.strides[td] : (I)0;
    if (size > 1) {  // a group is open: extend it or close it
      if (st == 0 ? stride == 0 : stride != 0 && (kf_i64)st == (kf_i64)stride * size) {
        size *= s;
        continue;
      }
      kf_set_group(g, count, size, stride);
      if (stride != 0) g.n = count + 1;
      ++count;
    }
    size = s;
    stride = st;
  }
  if (size > 1) {
    kf_set_group(g, count, size, stride);
    if (stride != 0) g.n = count + 1;
  }
}

// Offset in `t` of output element `e` (0 <= e < out.numel).
template <typename I>
KF_HD I kf_group_offset(const KfGroups<I>& g, I e) {
  I offset = 0;
  // Usually one or two groups: a rolled loop keeps every read site small.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#pragma unroll 1
#endif
  for (int k = 0; k < g.n; ++k) {
    const I q = kf_group_div(g, k, e);
    offset += (e - q * g.size[k]) * g.stride[k];
    e = q;
  }
  return offset;
}

// Elements per output row when `t` is dense over the output's innermost dims and repeats over
// the outer ones, so its offset of output element e is e % row (an attention mask over heads,
// a bias over tokens); 0 when `t` is of another form or is the output's shape.
KF_HD kf_i64 kf_row_span(const KfTensor& t, const KfTensor& out) {
  const int shift = out.ndim - t.ndim;
  if (shift < 0) return 0;
  kf_i64 row = 1;
  int d = out.ndim - 1;
  for (; d >= shift; --d) {
    const kf_i64 s = t.sizes[d - shift];
    if (s == 1 && out.sizes[d] != 1) break;  // the repeated outer dims start
    if (s != out.sizes[d] || (s != 1 && t.strides[d - shift] != row)) return 0;
    row *= s;
  }
  for (; d >= shift; --d) {
    if (t.sizes[d - shift] != 1) return 0;
  }
  return row < out.numel ? row : 0;
}

// A view's dims in memory order (the elementwise path's and the layout copy's outputs dense in
// another order than their shape's).

// Whether `t` is `out`'s shape, contiguous.
KF_HD bool kf_flat(const KfTensor& t, const KfTensor& out) {
  if (t.ndim != out.ndim) return false;
  kf_i64 expected = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.sizes[d] != out.sizes[d]) return false;
    if (t.sizes[d] != 1 && t.strides[d] != expected) return false;
    expected *= t.sizes[d];
  }
  return true;
}

// `t` with dim i of the result dim perm[i] of `t` aligned to `ndim` dims.
KF_HD KfTensor kf_permuted(const KfTensor& t, int ndim, const int (&perm)[KF_MAX_DIMS]) {
  KfTensor r = t;
  const int shift = ndim - t.ndim;
  for (int i = 0; i < KF_MAX_DIMS; ++i) {
    const int d = i < ndim ? perm[i] - shift : -1;
    r.sizes[i] = d >= 0 ? t.sizes[d] : 1;
    r.strides[i] = d >= 0 ? t.strides[d] : 0;
  }
  r.ndim = ndim;
  return r;
}

// `out`'s dims in memory order, outermost first: its dims of size 1, then strides falling (a
// stable sort: a contiguous tensor's dims keep their order).
KF_HD void kf_memory_perm(const KfTensor& out, int (&perm)[KF_MAX_DIMS]) {
  for (int i = 0; i < KF_MAX_DIMS; ++i) perm[i] = i;
  auto outer = [&](int a, int b) {
    if (out.sizes[b] == 1) return false;
    return out.sizes[a] == 1 || out.strides[a] > out.strides[b];
  };
  for (int i = 1; i < out.ndim; ++i) {
    for (int j = i; j > 0 && outer(perm[j], perm[j - 1]); --j) {
      const int swap = perm[j];
      perm[j] = perm[j - 1];
      perm[j - 1] = swap;
    }
  }
}
