// A chain operand that the value spreads: each of its elements over `inner` consecutive
// elements of the value, the whole repeated over the value's leading dims (a per-channel bias
// [C,1,1] or [N,C,1,1] over [N,C,H,W], as a UNet adds its time embedding before a group norm):
// value element e reads operand element (e / inner) % numel. Set up once per row of the
// engine, then an element's offset in two multiply-shifts where the value has fewer than 2^30
// elements (64-bit divisions otherwise).
//
// Plain C++ marked KF_HD, embedded in kernel sources and compiled on the host for its test
// (device_code.h). Needs KfTensor, kf_i64 and fast_divide.cuh.

struct KfSpread {
  kf_i64 inner;  // value elements per operand element
  kf_i64 numel;  // operand elements
  kf_i64 first;  // the operand element of the row's first value element
  kf_i64 lead;   // the row's first value element's place in its run of `inner`
  bool fast;     // offsets by multiply-shifts
  bool whole;    // every aligned vector of `vec` elements reads one operand element
  KfDivisor inner_div;
  KfDivisor numel_div;
};

// Value elements that each element of `operand` spreads over in `value` (dims aligned from the
// right): the product of the value's dims where the operand's innermost dims are 1 (all of the
// value's where every dim of the operand is 1). Both loops visit every dim slot, each a
// constant index, so a captured entry's tensors stay constants in registers (row_kernel.cc).
KF_HD kf_i64 kf_spread_inner(const KfTensor& operand, const KfTensor& value) {
  int ones = 0;  // the operand's innermost dims of size 1
  bool innermost = true;
  for (int od = KF_MAX_DIMS - 1; od >= 0; --od) {
    if (od < operand.ndim && innermost) {
      if (operand.sizes[od] == 1) {
        ++ones;
      } else {
        innermost = false;
      }
    }
  }
  const int first = ones == operand.ndim ? 0 : value.ndim - ones;
  kf_i64 inner = 1;
  for (int d = 0; d < KF_MAX_DIMS; ++d) {
    if (d >= first && d < value.ndim) inner *= value.sizes[d];
  }
  return inner > 0 ? inner : 1;
}

// The spread of `operand` over the row of `value` that starts at element `start`, for vectors
// of `vec` elements aligned in the row.
KF_HD KfSpread kf_spread(const KfTensor& operand, const KfTensor& value, kf_i64 start, int vec) {
  KfSpread s;
  s.inner = kf_spread_inner(operand, value);
  s.numel = operand.numel > 0 ? operand.numel : 1;
  s.first = (start / s.inner) % s.numel;
  s.lead = start % s.inner;
  s.fast = value.numel < (1ll << 30) && s.numel < (1ll << 30);
  s.whole = s.inner % vec == 0 && s.lead % vec == 0;
  s.inner_div = kf_divisor(s.fast ? (unsigned long long)s.inner : 1ull);
  s.numel_div = kf_divisor(s.fast ? (unsigned long long)s.numel : 1ull);
  return s;
}

// The operand offset of the row's element c (its first is c = 0).
KF_HD kf_i64 kf_spread_offset(const KfSpread& s, kf_i64 c) {
  if (s.fast) {
    const unsigned k = (unsigned)s.first + kf_divide((unsigned)(s.lead + c), s.inner_div);
    return (kf_i64)(k - kf_divide(k, s.numel_div) * (unsigned)s.numel);
  }
  return (s.first + (s.lead + c) / s.inner) % s.numel;
}
