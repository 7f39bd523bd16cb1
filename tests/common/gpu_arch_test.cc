#include "common/gpu_arch.h"

#include "gtest/gtest.h"

namespace kforge {
namespace {

TEST(GpuArchTest, ArchNumberReadsRealAndVirtualArchs) {
  EXPECT_EQ(ArchNumber("sm_90"), 90);
  EXPECT_EQ(ArchNumber("sm_90a"), 90);
  EXPECT_EQ(ArchNumber("sm_100f"), 100);
  EXPECT_EQ(ArchNumber("compute_80"), 80);
  EXPECT_EQ(ArchNumber(""), 0);
  EXPECT_EQ(ArchNumber("sm_"), 0);
  EXPECT_EQ(ArchNumber("hopper"), 0);
}

}  // namespace
}  // namespace kforge
