// KF_RETURN_IF_ERROR / KF_ASSIGN_OR_RETURN and the absl <-> gRPC status conversion.
#include "common/status.h"

#include "gtest/gtest.h"

namespace kforge {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  KF_ASSIGN_OR_RETURN(int half, Half(x));
  KF_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

absl::Status CheckEven(int x) {
  KF_RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(StatusTest, Macros) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(3).message(), "odd");
}

TEST(StatusTest, GrpcConversionKeepsEveryCodeAndMessage) {
  for (int code = 0; code <= 16; ++code) {
    absl::Status status(static_cast<absl::StatusCode>(code), code == 0 ? "" : "why");
    grpc::Status converted = ToGrpcStatus(status);
    EXPECT_EQ(static_cast<int>(converted.error_code()), code);
    EXPECT_EQ(FromGrpcStatus(converted), status);
  }
  EXPECT_EQ(ToGrpcStatus(absl::UnauthenticatedError("no token")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ToGrpcStatus(absl::UnauthenticatedError("no token")).error_message(), "no token");
}

}  // namespace
}  // namespace kforge
