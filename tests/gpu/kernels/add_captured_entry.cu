// A captured entry (docs/launch-plan.md) for add_in_place.cu's kf_add, appended to it by the
// test: kf_add is right for every shape; kf_add_captured, which the launcher runs for the
// plan's captured call only, computes self - other when CAPTURED_WRONG is 1. The test's plans
// name the call: the captured shape's key proves the captured entry is what validation runs on
// the captured call (and a wrong one is caught there), another key that it is then never run.
#include "kforge_device.h"

#ifndef CAPTURED_WRONG
#define CAPTURED_WRONG 0
#endif

// The captured call is 512 x 1024 floats: its count is a constant, its pointers all it reads.
extern "C" __global__ void kf_add_captured(KfCapturedArgs args) {
  const float* x = (const float*)args.data[0];
  const float* other = (const float*)args.data[1];
  float* y = (float*)args.data[KF_MAX_INPUTS];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < 512 * 1024;
       i += gridDim.x * blockDim.x) {
    y[i] = CAPTURED_WRONG ? x[i] - other[i] : x[i] + other[i];
  }
}
