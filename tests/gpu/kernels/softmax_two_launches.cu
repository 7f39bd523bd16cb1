// GOOD: row softmax over the last dim in two launches, float32 throughout: the first writes
// each row's max and 1/sum to scratch, the second (launched early_start: scheduled while the
// first drains) waits for it, then writes the row. The runtime's fixture kernel, so that the
// runtime tests cover a plan of several launches, its scratch, and early_start launches run
// eagerly and captured in a CUDA graph.
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

// Block-wide reduction through 32 floats of shared memory; every thread gets the result.
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

// Launch 1: row blockIdx.x's max and 1/sum(exp(x - max)), as two floats in scratch.
extern "C" __global__ void kf_softmax_stats(KfArgs args) {
  __shared__ float smem[32];
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const long long cols = args.inputs[0].sizes[args.inputs[0].ndim - 1];
  const long long row = blockIdx.x;
  const float* x = (const float*)args.inputs[0].data + row * cols;
  float m = NEG_INF;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, x[c]);
  m = block_reduce<true>(m, smem);
  float s = 0.0f;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += expf(x[c] - m);
  s = block_reduce<false>(s, smem);
  if (threadIdx.x == 0) {
    float* stats = (float*)args.scratch.data + 2 * row;
    stats[0] = m;
    stats[1] = 1.0f / s;
  }
}

// Launch 2 (early_start): waits for launch 1's statistics, then writes row blockIdx.x.
extern "C" __global__ void kf_softmax_apply(KfArgs args) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  const long long cols = args.inputs[0].sizes[args.inputs[0].ndim - 1];
  const long long row = blockIdx.x;
  const float* x = (const float*)args.inputs[0].data + row * cols;
  float* y = (float*)args.outputs[0].data + row * cols;
  const float* stats = (const float*)args.scratch.data + 2 * row;
  const float m = stats[0], inv = stats[1];
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) y[c] = expf(x[c] - m) * inv;
}
