// WorkerPoolServiceImpl: the gRPC face of the TaskPool (kforge.v1.WorkerPool). Workers pull:
// Lease long-polls for tasks their GPU (or lack of one) can take, Heartbeat extends their
// leases, Complete hands a result back. Thin: every decision is the pool's.
#pragma once

#include "kforge/v1/coordinator.grpc.pb.h"
#include "services/coordinator/pool/task_pool.h"

namespace kforge {

class WorkerPoolServiceImpl final : public v1::WorkerPool::Service {
 public:
  // `pool` must outlive the service.
  explicit WorkerPoolServiceImpl(TaskPool* pool) : pool_(pool) {}

  // INVALID_ARGUMENT for a worker without an id or a negative max_outstanding.
  grpc::Status Lease(grpc::ServerContext* context, const v1::LeaseRequest* request,
                     v1::LeaseResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  // accepted = false for a stale completion (its lease lapsed and the task went elsewhere).
  grpc::Status Complete(grpc::ServerContext* context, const v1::CompleteRequest* request,
                        v1::CompleteResponse* response) override;

 private:
  TaskPool* pool_;
};

}  // namespace kforge
