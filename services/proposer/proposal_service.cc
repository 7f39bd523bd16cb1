// ProposalServiceImpl and ProposalServiceClient.
#include "services/proposer/proposal_service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status.h"
#include "grpcpp/client_context.h"

namespace kforge {

ProposalServiceImpl::ProposalServiceImpl(std::vector<std::unique_ptr<Proposer>> proposers,
                                         prometheus::Registry* registry,
                                         const synth::FamilyRegistry* families)
    : owned_(std::move(proposers)), families_(families) {
  for (const auto& proposer : owned_) proposers_.emplace(proposer->Name(), proposer.get());
  if (registry != nullptr) {
    metrics_.proposals = &prometheus::BuildCounter()
                              .Name("kforge_proposals_total")
                              .Help("Candidates proposed, by proposer")
                              .Register(*registry);
    metrics_.duration = &prometheus::BuildHistogram()
                             .Name("kforge_proposal_duration_seconds")
                             .Help("Time to answer one Propose call, by proposer")
                             .Register(*registry);
    metrics_.rejections = &prometheus::BuildCounter()
                               .Name("kforge_proposal_rejections_total")
                               .Help("Rejected proposals and refused targets, by reason")
                               .Register(*registry);
  }
}

std::vector<std::string> ProposalServiceImpl::ProposerNames() const {
  std::vector<std::string> names;
  for (const auto& [name, proposer] : proposers_) names.push_back(name);
  return names;
}

absl::StatusOr<v1::ProposeResponse> ProposalServiceImpl::Propose(
    const v1::ProposeRequest& request) {
  const std::string name = request.proposer().empty() ? "synth" : request.proposer();
  auto it = proposers_.find(name);
  if (it == proposers_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown proposer '", name, "'; this service has: ",
                     absl::StrJoin(ProposerNames(), ", ")));
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::ProposeResponse> response = it->second->Propose(request);
  if (metrics_.duration != nullptr) {
    static const prometheus::Histogram::BucketBoundaries kBuckets = {
        0.001, 0.005, 0.02, 0.1, 0.5, 2, 10, 30, 60, 120, 300};
    metrics_.duration->Add({{"proposer", name}}, kBuckets)
        .Observe(absl::ToDoubleSeconds(absl::Now() - start));
  }
  if (response.ok() && metrics_.proposals != nullptr) {
    metrics_.proposals->Add({{"proposer", name}}).Increment(response->candidates_size());
    for (const v1::Rejection& rejection : response->rejections()) {
      metrics_.rejections->Add({{"reason", rejection.reason()}}).Increment();
    }
    if (!response->refusal().empty()) metrics_.rejections->Add({{"reason", "NO_FAMILY"}}).Increment();
  }
  return response;
}

grpc::Status ProposalServiceImpl::Propose(grpc::ServerContext*, const v1::ProposeRequest* request,
                                          v1::ProposeResponse* response) {
  absl::StatusOr<v1::ProposeResponse> result = Propose(*request);
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

grpc::Status ProposalServiceImpl::ListFamilies(grpc::ServerContext*,
                                               const v1::ListFamiliesRequest*,
                                               v1::ListFamiliesResponse* response) {
  for (const std::string& family : families_->ListFamilies()) response->add_families(family);
  return grpc::Status::OK;
}

ProposalServiceClient::ProposalServiceClient(std::shared_ptr<grpc::Channel> channel,
                                             std::string proposer, double deadline_s)
    : stub_(v1::ProposalService::NewStub(channel)),
      proposer_(std::move(proposer)),
      deadline_s_(deadline_s) {}

absl::StatusOr<v1::ProposeResponse> ProposalServiceClient::Propose(
    const v1::ProposeRequest& request) {
  v1::ProposeRequest forwarded = request;
  if (forwarded.proposer().empty()) forwarded.set_proposer(proposer_);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(deadline_s_ * 1000)));
  v1::ProposeResponse response;
  grpc::Status status = stub_->Propose(&context, forwarded, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<std::vector<std::string>> ProposalServiceClient::ListFamilies() {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::ListFamiliesResponse response;
  grpc::Status status = stub_->ListFamilies(&context, v1::ListFamiliesRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return std::vector<std::string>(response.families().begin(), response.families().end());
}

}  // namespace kforge
