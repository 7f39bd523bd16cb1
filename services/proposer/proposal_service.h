// ProposalServiceImpl: the gRPC ProposalService, a thin adapter over Proposers by name
// (request.proposer selects one, "synth" by default), with Prometheus metrics. Proposal-
// ServiceClient is the other side: a Proposer that forwards to a remote ProposalService.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/channel.h>

#include "absl/status/statusor.h"
#include "kforge/v1/proposer.grpc.pb.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "services/proposer/proposer.h"
#include "services/proposer/synth/family_registry.h"

namespace kforge {

class ProposalServiceImpl final : public v1::ProposalService::Service {
 public:
  // Proposers are selected by Name(); the first of a name wins. `registry` (may be null)
  // receives kforge_proposals_total{proposer}, kforge_proposal_duration_seconds{proposer}
  // and kforge_proposal_rejections_total{reason}.
  ProposalServiceImpl(std::vector<std::unique_ptr<Proposer>> proposers,
                      prometheus::Registry* registry,
                      const synth::FamilyRegistry* families = &synth::FamilyRegistry::Default());

  grpc::Status Propose(grpc::ServerContext* context, const v1::ProposeRequest* request,
                       v1::ProposeResponse* response) override;
  grpc::Status ListFamilies(grpc::ServerContext* context, const v1::ListFamiliesRequest* request,
                            v1::ListFamiliesResponse* response) override;

  // The same call without gRPC. InvalidArgument for an unknown proposer name.
  absl::StatusOr<v1::ProposeResponse> Propose(const v1::ProposeRequest& request);
  std::vector<std::string> ProposerNames() const;

 private:
  struct Metrics {
    prometheus::Family<prometheus::Counter>* proposals = nullptr;
    prometheus::Family<prometheus::Histogram>* duration = nullptr;
    prometheus::Family<prometheus::Counter>* rejections = nullptr;
  };

  std::vector<std::unique_ptr<Proposer>> owned_;
  std::map<std::string, Proposer*> proposers_;
  const synth::FamilyRegistry* families_;
  Metrics metrics_;
};

// A Proposer backed by a remote ProposalService. Name() is `proposer`, which it also sets
// as request.proposer when the request leaves it empty.
class ProposalServiceClient : public Proposer {
 public:
  ProposalServiceClient(std::shared_ptr<grpc::Channel> channel, std::string proposer = "synth",
                        double deadline_s = 600);

  absl::StatusOr<v1::ProposeResponse> Propose(const v1::ProposeRequest& request) override;
  std::string Name() const override { return proposer_; }
  absl::StatusOr<std::vector<std::string>> ListFamilies();

 private:
  std::unique_ptr<v1::ProposalService::Stub> stub_;
  std::string proposer_;
  double deadline_s_;
};

}  // namespace kforge
