// Offsets of a broadcast input with the output's dims merged as the input reads them:
// adjacent dims join while the input is dense across both or broadcasts both, and outer
// groups it broadcasts drop out. A [1,8,2048,2048] + [1,1,2048,2048] mask becomes one group
// (4194304, stride 1): one modulo per vector instead of a division and a modulo per dim.
//
// Plain C++ marked KF_HD: the elementwise kernels embed this text (synth.cmake), and the host
// compiles it (broadcast_groups.h) for the cost model and a unit test against a per-dim
// reference, so the kernels run tested code. Needs KfTensor and kf_i64.

#define KF_GROUPS 3

template <typename I>
struct KfGroups {
  int n;  // groups up to the outermost one the input reads; -1: more than KF_GROUPS
  I size[KF_GROUPS];
  I stride[KF_GROUPS];
};

template <typename I>
KF_HD void kf_close_group(KfGroups<I>& g, int& count, I size, I stride) {
  // Constant indices only, so that the groups stay in registers.
  if (count == 0) {
    g.size[0] = size;
    g.stride[0] = stride;
  } else if (count == 1) {
    g.size[1] = size;
    g.stride[1] = stride;
  } else if (count == 2) {
    g.size[2] = size;
    g.stride[2] = stride;
  }
  ++count;
  if (stride != 0) g.n = count > KF_GROUPS ? -1 : count;
}

// The groups of input `t` read along output `out` (dims aligned from the right; a size-1 dim
// of `t` repeats). Innermost group first.
template <typename I>
KF_HD KfGroups<I> kf_groups(const KfTensor& t, const KfTensor& out) {
  KfGroups<I> g;
  g.n = 0;
  for (int k = 0; k < KF_GROUPS; ++k) {
    g.size[k] = 1;
    g.stride[k] = 0;
  }
  int count = 0;
  I size = 1, stride = 0;
  bool open = false;
  const int shift = out.ndim - t.ndim;
  for (int d = out.ndim - 1; d >= 0; --d) {
    const I s = (I)out.sizes[d];
    if (s == 1) continue;
    const int td = d - shift;
    const I st = td >= 0 && t.sizes[td] != 1 ? (I)t.strides[td] : (I)0;
    if (open && (st == 0 ? stride == 0 : stride != 0 && (kf_i64)st == (kf_i64)stride * size)) {
      size *= s;
      continue;
    }
    if (open && g.n >= 0) kf_close_group(g, count, size, stride);
    size = s;
    stride = st;
    open = true;
  }
  if (open && g.n >= 0) kf_close_group(g, count, size, stride);
  return g;
}

// Offset in `t` of output element `e` (0 <= e < out.numel); g.n >= 0.
template <typename I>
KF_HD I kf_group_offset(const KfGroups<I>& g, I e) {
  I offset = 0;
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#pragma unroll
#endif
  for (int k = 0; k < KF_GROUPS; ++k) {
    if (k < g.n) {
      offset += (e % g.size[k]) * g.stride[k];
      if (k + 1 < g.n) e /= g.size[k];
    }
  }
  return offset;
}
