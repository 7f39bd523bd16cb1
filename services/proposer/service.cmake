# kforge_proposer_service: the gRPC ProposalService over the synthesizer and the LLM backends,
# and its client. kforge_proposer_cli: `kforge propose` and `kforge serve proposer`.
add_library(kforge_proposer_service STATIC ${CMAKE_CURRENT_LIST_DIR}/proposal_service.cc)
target_link_libraries(kforge_proposer_service PUBLIC
  kforge_synth kforge_common kforge_protos gRPC::grpc++ prometheus-cpp::core)

add_library(kforge_proposer_cli STATIC ${CMAKE_CURRENT_LIST_DIR}/proposer_cli.cc)
target_link_libraries(kforge_proposer_cli PUBLIC
  kforge_proposer_service kforge_llm CLI11::CLI11 nlohmann_json::nlohmann_json spdlog::spdlog)
