// JobServiceImpl: gRPC adapter over the JobManager; the CaptureService client.
#include "services/coordinator/service/job_service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/blob_store.h"
#include "common/status.h"

namespace kforge {
namespace {

// Artifacts are held in memory while they stream in; beyond this a model is not a kforge job.
constexpr size_t kMaxUploadBytes = size_t{8} << 30;

}  // namespace

grpc::Status JobServiceImpl::Submit(grpc::ServerContext* /*context*/,
                                    const v1::SubmitRequest* request,
                                    v1::SubmitResponse* response) {
  absl::StatusOr<std::string> id = jobs_->Submit(request->spec());
  if (!id.ok()) return ToGrpcStatus(id.status());
  response->set_job_id(*id);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::Get(grpc::ServerContext* /*context*/, const v1::GetJobRequest* request,
                                 v1::Job* response) {
  absl::StatusOr<v1::Job> job = jobs_->Get(request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::List(grpc::ServerContext* /*context*/,
                                  const v1::ListJobsRequest* /*request*/,
                                  v1::ListJobsResponse* response) {
  for (v1::Job& job : jobs_->List()) *response->add_jobs() = std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::Watch(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                                   grpc::ServerWriter<v1::JobEvent>* writer) {
  // The job's history as the coordinator kept it, then live events. A job with no history
  // here (it ended before this coordinator started) gets one snapshot of its state.
  absl::StatusOr<JobEvents> pending = jobs_->WaitEvents(request->job_id(), 0, 0);
  if (!pending.ok()) return ToGrpcStatus(pending.status());
  if (pending->events.empty()) {
    absl::StatusOr<v1::Job> job = jobs_->Get(request->job_id());
    if (!job.ok()) return ToGrpcStatus(job.status());
    v1::JobEvent snapshot;
    snapshot.set_job_id(job->id());
    snapshot.set_kind("snapshot");
    snapshot.set_message(job->message());
    *snapshot.mutable_job() = *job;
    if (!writer->Write(snapshot)) return grpc::Status::OK;
  }
  for (const v1::JobEvent& event : pending->events) {
    if (!writer->Write(event)) return grpc::Status::OK;
  }
  size_t next = pending->next;
  bool finished = pending->finished;
  while (!finished && !context->IsCancelled()) {
    absl::StatusOr<JobEvents> batch = jobs_->WaitEvents(request->job_id(), next, 1.0);
    if (!batch.ok()) return ToGrpcStatus(batch.status());
    for (const v1::JobEvent& event : batch->events) {
      if (!writer->Write(event)) return grpc::Status::OK;
    }
    next = batch->next;
    finished = batch->finished;
  }
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::Cancel(grpc::ServerContext* /*context*/,
                                    const v1::CancelJobRequest* request,
                                    v1::CancelJobResponse* /*response*/) {
  return ToGrpcStatus(jobs_->Cancel(request->job_id()));
}

grpc::Status JobServiceImpl::GetTree(grpc::ServerContext* /*context*/,
                                     const v1::GetTreeRequest* request,
                                     v1::GetTreeResponse* response) {
  absl::StatusOr<std::vector<v1::SearchNode>> nodes =
      jobs_->GetTree(request->job_id(), request->target_id());
  if (!nodes.ok()) return ToGrpcStatus(nodes.status());
  for (v1::SearchNode& node : *nodes) *response->add_nodes() = std::move(node);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetCandidate(grpc::ServerContext* /*context*/,
                                          const v1::GetCandidateRequest* request,
                                          v1::GetCandidateResponse* response) {
  absl::StatusOr<v1::EvaluatedCandidate> candidate = jobs_->GetCandidate(request->candidate_id());
  if (!candidate.ok()) return ToGrpcStatus(candidate.status());
  *response->mutable_candidate() = *std::move(candidate);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::Upload(grpc::ServerContext* /*context*/,
                                    grpc::ServerReader<v1::UploadChunk>* reader,
                                    v1::Digest* response) {
  std::string data;
  v1::UploadChunk chunk;
  while (reader->Read(&chunk)) {
    if (data.size() + chunk.data().size() > kMaxUploadBytes) {
      return ToGrpcStatus(absl::ResourceExhaustedError(
          absl::StrCat("Upload: the artifact exceeds ", kMaxUploadBytes >> 30,
                       " GiB; put it into the store directly (common/blob_store.h)")));
    }
    data += chunk.data();
  }
  if (data.empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError("Upload: no bytes arrived; send the file"));
  }
  absl::StatusOr<v1::Digest> digest = PutBlob(*store_, data);
  if (!digest.ok()) {
    return ToGrpcStatus(absl::Status(
        digest.status().code(), absl::StrCat("Upload: cannot store the artifact in ",
                                             store_->Describe(), ": ", digest.status().message())));
  }
  *response = *std::move(digest);
  return grpc::Status::OK;
}

CaptureFunction RemoteCapture(std::shared_ptr<grpc::Channel> channel, double deadline_s) {
  std::shared_ptr<v1::CaptureService::Stub> stub = v1::CaptureService::NewStub(channel);
  return
      [stub, deadline_s](const v1::CaptureRequest& request) -> absl::StatusOr<v1::OperatorProfile> {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() +
                             std::chrono::milliseconds(static_cast<int64_t>(deadline_s * 1000)));
        v1::CaptureResponse response;
        grpc::Status status = stub->Capture(&context, request, &response);
        if (!status.ok()) {
          absl::Status s = FromGrpcStatus(status);
          return absl::Status(s.code(), absl::StrCat("capture service: ", s.message()));
        }
        return std::move(*response.mutable_profile());
      };
}

}  // namespace kforge
