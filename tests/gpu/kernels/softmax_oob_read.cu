// BAD (OUT_OF_BOUNDS under compute-sanitizer): reads 1 MiB past the end of its input; the
// value cannot change the output, so only the sanitizer sees it.
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

// Block-wide reductions through 32 floats of shared memory; every thread gets the result.
__device__ float block_max(float v, float* smem) {
  v = warp_max(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? smem[threadIdx.x] : NEG_INF;
  if (warp == 0) v = warp_max(v);
  if (threadIdx.x == 0) smem[0] = v;
  __syncthreads();
  v = smem[0];
  __syncthreads();
  return v;
}

__device__ float block_sum(float v, float* smem) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? smem[threadIdx.x] : 0.0f;
  if (warp == 0) v = warp_sum(v);
  if (threadIdx.x == 0) smem[0] = v;
  __syncthreads();
  v = smem[0];
  __syncthreads();
  return v;
}

extern "C" __global__ void kf_softmax_rows(KfArgs args) {
  __shared__ float smem[32];
  const long long cols = args.inputs[0].sizes[args.inputs[0].ndim - 1];
  const long long row = blockIdx.x;
  const float* x = (const float*)args.inputs[0].data + row * cols;
  float* y = (float*)args.outputs[0].data + row * cols;
  float m = NEG_INF;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, x[c]);
  m = block_max(m, smem);
  float s = 0.0f;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += expf(x[c] - m);
  s = block_sum(s, smem);
  const float inv = 1.0f / s;
  if (row == gridDim.x - 1 && threadIdx.x == 0) {
    const float* far = (const float*)args.inputs[0].data + args.inputs[0].numel + (1 << 18);
    // A volatile load (ld.volatile): neither NVVM nor ptxas may drop it though it is unused.
    const float unused = *(const volatile float*)far;
    (void)unused;
  }
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) y[c] = expf(x[c] - m) * inv;
}
