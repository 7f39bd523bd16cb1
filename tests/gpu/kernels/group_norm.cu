// GOOD: group norm over NCHW with affine weight and bias; one block per (n, group), two
// passes in float32 (mean, then variance around it).
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

extern "C" __global__ void kf_group_norm(KfArgs args) {
  __shared__ float smem[32];
  const KfTensor& in = args.inputs[0];
  const long long channels = in.sizes[1];
  long long hw = 1;
  for (int d = 2; d < in.ndim; ++d) hw *= in.sizes[d];
  const long long groups = args.int_args[0];
  const float eps = (float)args.float_args[0];
  const long long n = blockIdx.x / groups, g = blockIdx.x % groups;
  const long long per_group = channels / groups;
  const long long count = per_group * hw;
  const long long base = (n * channels + g * per_group) * hw;
  const float* x = (const float*)in.data + base;
  float* y = (float*)args.outputs[0].data + base;
  const float* w = (const float*)args.inputs[1].data;
  const float* b = (const float*)args.inputs[2].data;
  float s = 0.0f;
  for (long long i = threadIdx.x; i < count; i += blockDim.x) s += x[i];
  const float mean = block_sum(s, smem) / (float)count;
  float v = 0.0f;
  for (long long i = threadIdx.x; i < count; i += blockDim.x) {
    const float d = x[i] - mean;
    v += d * d;
  }
  const float rstd = rsqrtf(block_sum(v, smem) / (float)count + eps);
  for (long long i = threadIdx.x; i < count; i += blockDim.x) {
    const long long c = g * per_group + i / hw;
    y[i] = (x[i] - mean) * rstd * w[c] + b[c];
  }
}
