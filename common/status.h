// Status helpers: early-return macros and the one absl <-> gRPC status conversion used at
// every service edge.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/support/status.h"

// Returns the absl::Status of `expr` from the enclosing function when it is not OK.
#define KF_RETURN_IF_ERROR(expr)                                  \
  do {                                                            \
    if (::absl::Status kf_status_ = (expr); !kf_status_.ok()) {   \
      return kf_status_;                                          \
    }                                                             \
  } while (0)

#define KF_STATUS_CONCAT_INNER_(a, b) a##b
#define KF_STATUS_CONCAT_(a, b) KF_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::StatusOr<T>); on error returns its status, else moves the value
// into `lhs` (which may declare a variable: KF_ASSIGN_OR_RETURN(auto x, F());).
#define KF_ASSIGN_OR_RETURN(lhs, expr) \
  KF_ASSIGN_OR_RETURN_IMPL_(KF_STATUS_CONCAT_(kf_statusor_, __COUNTER__), lhs, expr)

#define KF_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) {                                \
    return std::move(tmp).status();               \
  }                                               \
  lhs = std::move(tmp).value()

namespace kforge {

// Code and message carry over unchanged (both use the canonical gRPC code numbering).
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace kforge
