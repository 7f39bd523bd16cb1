// absl::Status <-> grpc::Status conversion.
#include "common/status.h"

#include <string>

namespace kforge {
namespace {

// absl::StatusCode and grpc::StatusCode share the canonical numbering 0..16.
constexpr int kMaxCanonicalCode = 16;

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  int code = static_cast<int>(status.code());
  if (code < 0 || code > kMaxCanonicalCode) code = static_cast<int>(grpc::StatusCode::UNKNOWN);
  return grpc::Status(static_cast<grpc::StatusCode>(code), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  int code = static_cast<int>(status.error_code());
  if (code < 0 || code > kMaxCanonicalCode) code = static_cast<int>(absl::StatusCode::kUnknown);
  std::string message = status.error_message();
  if (!status.error_details().empty() && message.empty()) message = "(error details attached)";
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

}  // namespace kforge
