# kforge_search: the coordinator's search core (MCTS trees, target scheduler, search driver).
# Depends only on the Proposer and CandidateRunner interfaces: no LibTorch, no gRPC code.
add_library(kforge_search STATIC
  ${CMAKE_CURRENT_LIST_DIR}/search/candidate_runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/search/reward.cc
  ${CMAKE_CURRENT_LIST_DIR}/search/search_driver.cc
  ${CMAKE_CURRENT_LIST_DIR}/search/search_tree.cc
  ${CMAKE_CURRENT_LIST_DIR}/search/target_scheduler.cc)
target_link_libraries(kforge_search PUBLIC
  kforge_protos
  absl::status absl::statusor absl::strings Threads::Threads)
