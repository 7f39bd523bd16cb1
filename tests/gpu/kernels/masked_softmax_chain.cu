// GOOD: the chain softmax(x * scale + mask, dim=-1) in one launch, float32: x contiguous, the
// mask read through its own strides (broadcast dims have size 1), scale the chain's one float
// argument. One block per row; the row's values are computed twice (max, then sum and write)
// rather than kept. The runtime's chain fixture kernel: hand-written because the synthesizer
// does not write chains yet.
#include "kforge_device.h"

#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <bool MAX>
__device__ float block_reduce(float v, float* smem) {
  v = MAX ? warp_max(v) : warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? smem[threadIdx.x] : (MAX ? NEG_INF : 0.0f);
  if (warp == 0) v = MAX ? warp_max(v) : warp_sum(v);
  if (threadIdx.x == 0) smem[0] = v;
  __syncthreads();
  v = smem[0];
  __syncthreads();
  return v;
}

extern "C" __global__ void kf_masked_softmax(KfArgs args) {
  __shared__ float smem[32];
  const KfTensor& x = args.inputs[0];
  const KfTensor& mask = args.inputs[1];
  const int nd = x.ndim;
  const long long cols = x.sizes[nd - 1];
  const float scale = (float)args.float_args[0];
  // The mask's offset of this row's first element: the row index unravelled over x's dims.
  long long row = blockIdx.x, mask_row = 0;
  for (int d = nd - 2; d >= 0; --d) {
    const long long i = row % x.sizes[d];
    row /= x.sizes[d];
    const int md = d - (nd - mask.ndim);
    if (md >= 0 && mask.sizes[md] != 1) mask_row += i * mask.strides[md];
  }
  const long long mask_col = mask.sizes[mask.ndim - 1] != 1 ? mask.strides[mask.ndim - 1] : 0;
  const float* xr = (const float*)x.data + (long long)blockIdx.x * cols;
  const float* mr = (const float*)mask.data + mask_row;
  float* yr = (float*)args.outputs[0].data + (long long)blockIdx.x * cols;
  float m = NEG_INF;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
    m = fmaxf(m, xr[c] * scale + mr[c * mask_col]);
  }
  m = block_reduce<true>(m, smem);
  float s = 0.0f;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
    s += expf(xr[c] * scale + mr[c * mask_col] - m);
  }
  s = block_reduce<false>(s, smem);
  const float inv = 1.0f / s;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
    yr[c] = expf(xr[c] * scale + mr[c * mask_col] - m) * inv;
  }
}
