// The launcher's part of the kernel ABI that needs no GPU: the fields it derives.
#include "common/kernel_launch.h"

#include "common/shape_key.h"
#include "gtest/gtest.h"

namespace kforge {
namespace {

TEST(KernelLaunchTest, LauncherFieldsRepeatEveryPointerAndTheScratchBesideTheShapeKey) {
  const int64_t sizes[] = {2, 3}, strides[] = {3, 1};
  KfArgs args{};
  args.num_inputs = 2;
  args.num_outputs = 1;
  args.inputs[0] = MakeKfTensor(reinterpret_cast<void*>(0x1000), KF_FLOAT32, sizes, strides, 2);
  args.inputs[1] = MakeKfTensor(reinterpret_cast<void*>(0x2000), KF_FLOAT32, sizes, strides, 2);
  args.outputs[0] = MakeKfTensor(reinterpret_cast<void*>(0x3000), KF_FLOAT32, sizes, strides, 2);
  args.scratch.data = reinterpret_cast<void*>(0x4000);
  SetLauncherFields(&args);
  EXPECT_EQ(args.shape_key, KfShapeKey(args));
  EXPECT_EQ(args.data[0], reinterpret_cast<void*>(0x1000));
  EXPECT_EQ(args.data[1], reinterpret_cast<void*>(0x2000));
  EXPECT_EQ(args.data[2], nullptr);
  EXPECT_EQ(args.data[KF_MAX_INPUTS], reinterpret_cast<void*>(0x3000));
  EXPECT_EQ(args.data[KF_MAX_INPUTS + 1], nullptr);
  EXPECT_EQ(args.data[KF_SCRATCH_SLOT], reinterpret_cast<void*>(0x4000));
  // A captured entry's parameter is the array: the same bytes.
  EXPECT_EQ(sizeof(KfCapturedArgs), sizeof(args.data));
  // Bundles of older formats hold kernels that read a prefix of the struct: fields the
  // launcher adds go after every field such a kernel reads.
  EXPECT_GT(offsetof(KfArgs, data), offsetof(KfArgs, shape_key));
  EXPECT_GT(offsetof(KfArgs, shape_key), offsetof(KfArgs, num_float_args));
  EXPECT_LT(sizeof(KfArgs), 4096u);  // a kernel parameter's limit on every arch kforge targets
}

}  // namespace
}  // namespace kforge
