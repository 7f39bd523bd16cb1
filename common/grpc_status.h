// The one conversion between absl::Status and grpc::Status, used at each service edge.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace kforge {

// Both use the canonical gRPC code numbering, so codes map one to one.
inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

}  // namespace kforge
