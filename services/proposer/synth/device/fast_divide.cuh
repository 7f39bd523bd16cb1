// Division by a divisor that many threads share, as a multiply and a shift: (umulhi(n, magic)
// + n) >> shift, exact for n and d below 2^31, a few instructions instead of the ~20 of an
// integer division. Computed once (per block or per row), applied per vector.
//
// Plain C++ marked KF_HD, embedded in kernel sources and compiled on the host for its test
// (device_code.h).

struct KfDivisor {
  unsigned magic;
  unsigned shift;
};

KF_HD unsigned kf_umulhi(unsigned a, unsigned b) {
#ifdef __CUDA_ARCH__
  return __umulhi(a, b);
#else
  return (unsigned)(((unsigned long long)a * b) >> 32);
#endif
}

// The divisor d, 1 <= d < 2^31: shift = ceil(log2 d), magic = 2^32 (2^shift - d) / d + 1.
KF_HD KfDivisor kf_divisor(unsigned long long d) {
  KfDivisor div;
#ifdef __CUDA_ARCH__
  div.shift = d > 1 ? 64u - (unsigned)__clzll((long long)(d - 1)) : 0u;
#else
  div.shift = d > 1 ? 64u - (unsigned)__builtin_clzll(d - 1) : 0u;
#endif
  div.magic = (unsigned)((((1ull << div.shift) - d) << 32) / d + 1);
  return div;
}

// n / d for 0 <= n < 2^31.
KF_HD unsigned kf_divide(unsigned n, KfDivisor div) {
  return (kf_umulhi(n, div.magic) + n) >> div.shift;
}
