// Frame I/O of the evaluator protocol over real pipes.
#include "services/worker/evaluator_protocol.h"

#include <unistd.h>

#include "gtest/gtest.h"
#include "services/worker/evaluator_protocol.pb.h"

namespace kforge {
namespace {

class PipeTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::pipe(fds_), 0); }
  void TearDown() override {
    if (fds_[0] >= 0) ::close(fds_[0]);
    if (fds_[1] >= 0) ::close(fds_[1]);
  }
  void CloseWriter() {
    ::close(fds_[1]);
    fds_[1] = -1;
  }
  int fds_[2] = {-1, -1};
};

TEST_F(PipeTest, RoundTrip) {
  worker::EvaluatorHello hello;
  hello.mutable_gpu()->set_name("NVIDIA H200");
  hello.mutable_gpu()->set_sm_count(132);
  ASSERT_TRUE(WriteFrame(fds_[1], hello).ok());
  worker::EvaluatorHello read;
  ASSERT_TRUE(ReadFrame(fds_[0], &read, absl::Now() + absl::Seconds(5)).ok());
  EXPECT_EQ(read.gpu().name(), "NVIDIA H200");
  EXPECT_EQ(read.gpu().sm_count(), 132);
}

TEST_F(PipeTest, EmptyMessageIsAFrame) {
  worker::EvaluatorReply empty;
  ASSERT_TRUE(WriteFrame(fds_[1], empty).ok());
  worker::EvaluatorReply read;
  read.set_context_lost(true);
  ASSERT_TRUE(ReadFrame(fds_[0], &read).ok());
  EXPECT_FALSE(read.context_lost());
}

TEST_F(PipeTest, ClosedPipeIsUnavailable) {
  CloseWriter();
  worker::EvaluatorReply read;
  EXPECT_TRUE(absl::IsUnavailable(ReadFrame(fds_[0], &read)));
}

TEST_F(PipeTest, TruncatedFrameIsUnavailable) {
  const unsigned char header[8] = {100, 0, 0, 0, 0, 0, 0, 0};
  ASSERT_EQ(::write(fds_[1], header, 8), 8);
  ASSERT_EQ(::write(fds_[1], "abc", 3), 3);
  CloseWriter();
  worker::EvaluatorReply read;
  EXPECT_TRUE(absl::IsUnavailable(ReadFrame(fds_[0], &read)));
}

TEST_F(PipeTest, SilenceHitsTheDeadline) {
  worker::EvaluatorReply read;
  absl::Status s = ReadFrame(fds_[0], &read, absl::Now() + absl::Milliseconds(50));
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
}

TEST_F(PipeTest, GarbageIsDataLoss) {
  const unsigned char header[8] = {2, 0, 0, 0, 0, 0, 0, 0};
  ASSERT_EQ(::write(fds_[1], header, 8), 8);
  ASSERT_EQ(::write(fds_[1], "\xff\xff", 2), 2);
  worker::EvaluatorReply read;
  EXPECT_TRUE(absl::IsDataLoss(ReadFrame(fds_[0], &read)));
}

TEST_F(PipeTest, OversizedLengthIsDataLoss) {
  const unsigned char header[8] = {0, 0, 0, 0, 1, 0, 0, 0};  // 2^32
  ASSERT_EQ(::write(fds_[1], header, 8), 8);
  worker::EvaluatorReply read;
  EXPECT_TRUE(absl::IsDataLoss(ReadFrame(fds_[0], &read)));
}

}  // namespace
}  // namespace kforge
