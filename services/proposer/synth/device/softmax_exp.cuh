// A two-pass softmax's exp(x - max) as ex2(x * scale + shift): one FFMA before the ex2 where
// the difference took an FADD and an FMUL (fast math into a 16-bit output: row_kernel.cc's
// KF_SHIFTED_EXP). scale is log2(e) and shift -max * log2(e) where that is finite, the error
// about max's ulp in the exponent, far below a 16-bit output's. Else scale 2^-80 and shift
// -max * 2^-80, both exact, which give what eager's exp(x - max) is in such a row (|max| >
// 2e38, every other value at least 2e31 below it): 1 at the max, 0 elsewhere, NaN for an
// infinite or NaN max.
//
// Plain C++ marked KF_HD, embedded in the row kernels and compiled on the host for its test
// (device_code.h).

struct KfExpShift {
  float scale, shift;
};

KF_HD KfExpShift kf_exp_shift(float max) {
  const float shifted = max * 1.4426950408889634f;
  const bool finite = fabsf(shifted) <= 3.0e38f;  // false for NaN and the infinities
  KfExpShift e;
  e.scale = finite ? 1.4426950408889634f : 0x1p-80f;
  e.shift = -(finite ? shifted : max * 0x1p-80f);
  return e;
}
