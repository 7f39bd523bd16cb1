// Guard logic of guarded dispatch on CPU tensors: a CPU tensor always falls back (cpu_tensor),
// and every guard past the device check is exercised on tensors built to break exactly one.
#include "runtime/guards.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>

#include "gtest/gtest.h"

namespace kforge::runtime {
namespace {

BundleKernel Kernel() {
  BundleKernel k;
  k.id = "softmax_test";
  k.inputs.push_back({"float32", {4, 8}, {8, 1}, true, 16});
  k.outputs.push_back({"float32", {4, 8}, {8, 1}});
  return k;
}

TEST(GuardsTest, ACpuTensorAlwaysFallsBack) {
  at::Tensor x = at::zeros({4, 8});
  EXPECT_EQ(CheckGuards(Kernel(), {x}, false), FallbackReason::kCpuTensor);
  // Even when every other guard holds, and whatever the grad mode.
  EXPECT_EQ(CheckGuards(Kernel(), {x}, true), FallbackReason::kCpuTensor);
  EXPECT_EQ(ReasonName(FallbackReason::kCpuTensor), "cpu_tensor");
}

TEST(GuardsTest, TheInputCountComesFirst) {
  at::Tensor x = at::zeros({4, 8});
  EXPECT_EQ(CheckGuards(Kernel(), {x, x}, false), FallbackReason::kSignature);
  EXPECT_EQ(CheckGuards(Kernel(), {}, false), FallbackReason::kSignature);
}

TEST(GuardsTest, UndefinedOrSparseInputsAreLayoutFallbacks) {
  EXPECT_EQ(CheckGuards(Kernel(), {at::Tensor()}, false), FallbackReason::kLayout);
  at::Tensor sparse = at::zeros({4, 8}).to_sparse();
  EXPECT_EQ(CheckGuards(Kernel(), {sparse}, false), FallbackReason::kLayout);
}

TEST(GuardsTest, OtherDevicesAreDeviceFallbacks) {
  at::Tensor meta = at::empty({4, 8}, at::TensorOptions().device(at::kMeta));
  EXPECT_EQ(CheckGuards(Kernel(), {meta}, false), FallbackReason::kDevice);
}

TEST(GuardsTest, ReasonsCoverEveryEnumValue) {
  for (int r = 0; r <= static_cast<int>(FallbackReason::kUnknownKernel); ++r) {
    EXPECT_NE(ReasonName(static_cast<FallbackReason>(r)), "unknown") << r;
  }
  EXPECT_EQ(ReasonName(FallbackReason::kArchMissing), "arch_missing");
  EXPECT_EQ(ReasonName(FallbackReason::kDisabled), "disabled");
  EXPECT_EQ(ReasonName(FallbackReason::kArguments), "arguments");
}

TEST(GuardsTest, ACpuTensorReportsCpuEvenWhenItBreaksEveryLaterGuard) {
  // The reason is the first failing guard, so counters say "this ran on the CPU".
  at::Tensor wrong = at::zeros({3, 5}, at::kDouble).t().requires_grad_();
  EXPECT_EQ(CheckGuards(Kernel(), {wrong}, true), FallbackReason::kCpuTensor);
}

// The guards past the device check, with the device type they are checked against set to
// the CPU (the runtime always uses CUDA): each tensor breaks exactly one guard.
constexpr c10::DeviceType kHere = c10::kCPU;

TEST(GuardsPastTheDeviceTest, AMatchingTensorPasses) {
  EXPECT_EQ(CheckGuards(Kernel(), {at::zeros({4, 8})}, false, kHere), FallbackReason::kNone);
}

TEST(GuardsPastTheDeviceTest, RequiresGradOnlyWhileGradModeIsOn) {
  at::Tensor x = at::zeros({4, 8}).requires_grad_();
  EXPECT_EQ(CheckGuards(Kernel(), {x}, /*grad_enabled=*/true, kHere), FallbackReason::kRequiresGrad);
  EXPECT_EQ(CheckGuards(Kernel(), {x}, /*grad_enabled=*/false, kHere), FallbackReason::kNone);
}

TEST(GuardsPastTheDeviceTest, Dtype) {
  EXPECT_EQ(CheckGuards(Kernel(), {at::zeros({4, 8}, at::kHalf)}, false, kHere),
            FallbackReason::kDtype);
  EXPECT_EQ(CheckGuards(Kernel(), {at::zeros({4, 8}, at::kDouble)}, false, kHere),
            FallbackReason::kDtype);
}

TEST(GuardsPastTheDeviceTest, ExactSizes) {
  EXPECT_EQ(CheckGuards(Kernel(), {at::zeros({5, 8})}, false, kHere), FallbackReason::kShape);
  EXPECT_EQ(CheckGuards(Kernel(), {at::zeros({4, 8, 1})}, false, kHere), FallbackReason::kShape);
  EXPECT_EQ(CheckGuards(Kernel(), {at::zeros({32})}, false, kHere), FallbackReason::kShape);
}

TEST(GuardsPastTheDeviceTest, StridesAndContiguity) {
  // Same sizes, transposed layout.
  at::Tensor t = at::zeros({8, 4}).t();
  ASSERT_EQ(t.sizes(), at::IntArrayRef({4, 8}));
  EXPECT_EQ(CheckGuards(Kernel(), {t}, false, kHere), FallbackReason::kStride);
  // Same sizes, a row pitch wider than the rows (a slice of a wider tensor).
  at::Tensor sliced = at::zeros({4, 16}).narrow(1, 0, 8);
  EXPECT_EQ(CheckGuards(Kernel(), {sliced}, false, kHere), FallbackReason::kStride);
  // A dim of size 1 may have any stride.
  BundleKernel k = Kernel();
  k.inputs[0].sizes = {1, 8};
  k.inputs[0].strides = {8, 1};
  at::Tensor row = at::zeros({3, 8}).narrow(0, 1, 1);
  EXPECT_EQ(CheckGuards(k, {row.as_strided({1, 8}, {999, 1}, row.storage_offset())}, false, kHere),
            FallbackReason::kNone);
  // A kernel validated on a transposed layout that does not require contiguity accepts it.
  BundleKernel transposed = Kernel();
  transposed.inputs[0].strides = {1, 4};
  transposed.inputs[0].contiguous = false;
  EXPECT_EQ(CheckGuards(transposed, {t}, false, kHere), FallbackReason::kNone);
  EXPECT_EQ(CheckGuards(transposed, {at::zeros({4, 8})}, false, kHere), FallbackReason::kStride);
}

TEST(GuardsPastTheDeviceTest, PointerAlignment) {
  // A contiguous [4, 8] view that starts one float into its storage: 4-byte aligned only.
  at::Tensor flat = at::zeros({33});
  at::Tensor misaligned = flat.narrow(0, 1, 32).view({4, 8});
  ASSERT_TRUE(misaligned.is_contiguous());
  ASSERT_NE(reinterpret_cast<uintptr_t>(misaligned.data_ptr()) % 16, 0u);
  EXPECT_EQ(CheckGuards(Kernel(), {misaligned}, false, kHere), FallbackReason::kAlignment);
  BundleKernel relaxed = Kernel();
  relaxed.inputs[0].alignment_bytes = 4;
  EXPECT_EQ(CheckGuards(relaxed, {misaligned}, false, kHere), FallbackReason::kNone);
}

TEST(GuardsPastTheDeviceTest, EveryInputIsChecked) {
  BundleKernel k = Kernel();
  k.inputs.push_back({"float16", {8}, {1}, false, 16});
  at::Tensor a = at::zeros({4, 8});
  EXPECT_EQ(CheckGuards(k, {a, at::zeros({8}, at::kHalf)}, false, kHere), FallbackReason::kNone);
  EXPECT_EQ(CheckGuards(k, {a, at::zeros({8})}, false, kHere), FallbackReason::kDtype);
  EXPECT_EQ(CheckGuards(k, {a, at::zeros({9}, at::kHalf)}, false, kHere), FallbackReason::kShape);
  EXPECT_EQ(CheckGuards(k, {a, at::zeros({8}, at::kHalf).to(at::kMeta)}, false, kHere),
            FallbackReason::kDevice);
}

TEST(BinaryForDeviceTest, PicksTheSameMajorNotNewerMinor) {
  BundleKernel k = Kernel();
  k.binaries.push_back({"sm_80", {}, {}, false});
  k.binaries.push_back({"sm_86", {}, {}, false});
  k.binaries.push_back({"sm_90", {}, {}, true});
  ASSERT_NE(BinaryForDevice(k, 9, 0), nullptr);
  EXPECT_EQ(BinaryForDevice(k, 9, 0)->arch, "sm_90");
  EXPECT_EQ(BinaryForDevice(k, 8, 9)->arch, "sm_86");
  EXPECT_EQ(BinaryForDevice(k, 8, 0)->arch, "sm_80");
  EXPECT_EQ(BinaryForDevice(k, 8, 6)->arch, "sm_86");
  // Cubins do not run on another major: arch_missing.
  EXPECT_EQ(BinaryForDevice(k, 10, 0), nullptr);
  EXPECT_EQ(BinaryForDevice(k, 7, 5), nullptr);
  BundleKernel only90 = Kernel();
  only90.binaries.push_back({"sm_90", {}, {}, true});
  EXPECT_EQ(BinaryForDevice(only90, 8, 0), nullptr);  // an A100 with only sm_90 cubins
  BundleKernel big = Kernel();
  big.binaries.push_back({"sm_100", {}, {}, true});
  EXPECT_EQ(BinaryForDevice(big, 10, 0)->arch, "sm_100");
  EXPECT_EQ(BinaryForDevice(big, 10, 3)->arch, "sm_100");
}

}  // namespace
}  // namespace kforge::runtime
