// WorkerPoolServiceImpl: gRPC adapter over the TaskPool.
#include "services/coordinator/pool/worker_pool_service.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace kforge {

grpc::Status WorkerPoolServiceImpl::Lease(grpc::ServerContext* context,
                                          const v1::LeaseRequest* request,
                                          v1::LeaseResponse* response) {
  if (request->worker().worker_id().empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        "LeaseRequest.worker.worker_id is empty; give each worker a stable unique id"));
  }
  if (request->worker().max_outstanding() < 0 || request->max_tasks() < 0) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        "LeaseRequest: max_outstanding and max_tasks must not be negative"));
  }
  // Never wait past the caller's deadline: a lease granted to a caller that gave up would
  // only lapse.
  double wait_s = request->wait_s();
  if (context->deadline() != std::chrono::system_clock::time_point::max()) {
    const double left =
        std::chrono::duration<double>(context->deadline() - std::chrono::system_clock::now())
            .count();
    wait_s = std::min(wait_s, left - 1.0);
  }
  absl::StatusOr<std::vector<v1::Task>> tasks =
      pool_->Lease(request->worker(), request->max_tasks(), std::max(0.0, wait_s));
  if (!tasks.ok()) return ToGrpcStatus(tasks.status());
  for (v1::Task& task : *tasks) *response->add_tasks() = std::move(task);
  return grpc::Status::OK;
}

grpc::Status WorkerPoolServiceImpl::Heartbeat(grpc::ServerContext* /*context*/,
                                              const v1::HeartbeatRequest* request,
                                              v1::HeartbeatResponse* response) {
  if (request->worker_id().empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError("HeartbeatRequest.worker_id is empty"));
  }
  std::vector<std::string> leases(request->lease_ids().begin(), request->lease_ids().end());
  for (std::string& expired : pool_->Heartbeat(request->worker_id(), leases)) {
    response->add_expired_lease_ids(std::move(expired));
  }
  return grpc::Status::OK;
}

grpc::Status WorkerPoolServiceImpl::Complete(grpc::ServerContext* /*context*/,
                                             const v1::CompleteRequest* request,
                                             v1::CompleteResponse* response) {
  if (request->worker_id().empty() || request->task_id().empty()) {
    return ToGrpcStatus(
        absl::InvalidArgumentError("CompleteRequest needs worker_id, lease_id and task_id"));
  }
  response->set_accepted(pool_->Complete(request->worker_id(), request->lease_id(),
                                         request->task_id(), request->result()));
  return grpc::Status::OK;
}

}  // namespace kforge
