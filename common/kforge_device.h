// kforge_device.h — the kernel argument ABI shared by candidate kernels, the worker's evaluator
// and the runtime. Compiled by NVRTC with no host headers, and by the host compiler, so it
// uses only built-in types. Every entry point of a candidate has the signature
//
//   extern "C" __global__ void NAME(KfArgs args);
//
// but a launch plan's captured entries, which take KfCapturedArgs.
//
// The struct travels by value as the kernel parameter (it is < 4 KiB), so launches need no
// device-side argument buffer and work inside CUDA-graph capture.
#ifndef KFORGE_DEVICE_H_
#define KFORGE_DEVICE_H_

#define KF_MAX_DIMS 8
#define KF_MAX_INPUTS 8
#define KF_MAX_OUTPUTS 4
#define KF_MAX_INT_ARGS 16
#define KF_MAX_FLOAT_ARGS 8
// KfArgs::data's slot of the scratch's pointer, after the inputs' and the outputs'.
#define KF_SCRATCH_SLOT (KF_MAX_INPUTS + KF_MAX_OUTPUTS)

// Element types, in the numbering of kforge.v1.DType.
#define KF_FLOAT32 1
#define KF_FLOAT16 2
#define KF_BFLOAT16 3
#define KF_FLOAT64 4
#define KF_INT64 5
#define KF_INT32 6
#define KF_INT16 7
#define KF_INT8 8
#define KF_UINT8 9
#define KF_BOOL 10

// A strided view of a tensor. Sizes and strides are in elements; dims past ndim are 1/0.
typedef struct KfTensor {
  void* data;
  long long numel;
  long long sizes[KF_MAX_DIMS];
  long long strides[KF_MAX_DIMS];
  int ndim;
  int dtype;
} KfTensor;

// Scalar arguments of the target, in schema order: int, bool and int-list values (flattened)
// go to int_args; float values to float_args; None is skipped.
typedef struct KfArgs {
  KfTensor inputs[KF_MAX_INPUTS];
  KfTensor outputs[KF_MAX_OUTPUTS];
  KfTensor scratch;  // 1-D byte buffer of the launch plan's scratch size, 256-byte aligned
  long long int_args[KF_MAX_INT_ARGS];
  double float_args[KF_MAX_FLOAT_ARGS];
  int num_inputs;
  int num_outputs;
  int num_int_args;
  int num_float_args;
  // Set by the launcher (KfShapeKey, common/shape_key.h): a 64-bit digest of the inputs' and
  // outputs' ranks, sizes and strides, so a kernel specialized for one call's shapes tells that
  // call from others with one compare.
  unsigned long long shape_key;
  // Set by the launcher: the inputs' data pointers, then the outputs' (data[KF_MAX_INPUTS + i]),
  // then the scratch's (data[KF_SCRATCH_SLOT]), the same as inputs[i].data, outputs[i].data and
  // scratch.data. Beside the key, so that a fast path finds
  // all it reads in one or two constant-cache lines instead of one line per tensor across the
  // block's 2 KB: ResNet-50 b1's batch norms ran 2-3% faster (launch-bound, a few µs).
  void* data[KF_SCRATCH_SLOT + 1];
} KfArgs;

// The parameter of a captured entry (docs/launch-plan.md: a launch's captured_entry): the
// launcher passes KfArgs::data alone, 104 bytes instead of KfArgs' 2,296, when a call is the
// one the kernel was specialized for, whose shapes the kernel then holds as constants.
typedef struct KfCapturedArgs {
  void* data[KF_SCRATCH_SLOT + 1];
} KfCapturedArgs;

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#endif

#endif  // KFORGE_DEVICE_H_
