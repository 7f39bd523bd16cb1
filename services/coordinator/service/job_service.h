// JobServiceImpl: the gRPC face of the JobManager (kforge.v1.JobService) for clients —
// `kforge submit|watch|jobs`, the UI. Thin: every decision is the manager's. Upload stores a
// streamed artifact as a blob in the coordinator's store, so clients need no store access.
#pragma once

#include <grpcpp/channel.h>

#include "common/store.h"
#include "kforge/v1/capture.grpc.pb.h"
#include "kforge/v1/coordinator.grpc.pb.h"
#include "services/coordinator/service/job_manager.h"

namespace kforge {

class JobServiceImpl final : public v1::JobService::Service {
 public:
  // `jobs` and `store` must outlive the service.
  JobServiceImpl(JobManager* jobs, Store* store) : jobs_(jobs), store_(store) {}

  grpc::Status Submit(grpc::ServerContext* context, const v1::SubmitRequest* request,
                      v1::SubmitResponse* response) override;
  grpc::Status Get(grpc::ServerContext* context, const v1::GetJobRequest* request,
                   v1::Job* response) override;
  grpc::Status List(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                    v1::ListJobsResponse* response) override;
  // Streams the job's kept history (or, when there is none, one "snapshot" of it), then every
  // new event until the job ends or the client goes away.
  grpc::Status Watch(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                     grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status Cancel(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                      v1::CancelJobResponse* response) override;
  grpc::Status GetTree(grpc::ServerContext* context, const v1::GetTreeRequest* request,
                       v1::GetTreeResponse* response) override;
  grpc::Status GetCandidate(grpc::ServerContext* context, const v1::GetCandidateRequest* request,
                            v1::GetCandidateResponse* response) override;
  grpc::Status Upload(grpc::ServerContext* context, grpc::ServerReader<v1::UploadChunk>* reader,
                      v1::Digest* response) override;

 private:
  JobManager* jobs_;
  Store* store_;
};

// The CaptureFunction of a remote CaptureService at `channel`; `deadline_s` bounds a capture.
CaptureFunction RemoteCapture(std::shared_ptr<grpc::Channel> channel, double deadline_s);

}  // namespace kforge
