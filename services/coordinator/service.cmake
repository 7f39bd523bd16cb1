# The distributed coordinator.
# kforge_pool_service: the TaskPool (lease table + waiters, long-poll, lapses, persisted
#   results), the WorkerPool gRPC service and the PoolCandidateRunner the search runs over.
# kforge_coordinator_service: the JobManager (jobs, capture, target selection, search,
#   persistence, events) and the JobService gRPC service.
# kforge_coordinator_cli: `kforge serve coordinator`, `kforge submit|watch|jobs`.
add_library(kforge_pool_service STATIC
  ${CMAKE_CURRENT_LIST_DIR}/pool/pool_runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/pool/task_pool.cc
  ${CMAKE_CURRENT_LIST_DIR}/pool/worker_pool_service.cc)
target_link_libraries(kforge_pool_service PUBLIC
  kforge_pool kforge_search kforge_common kforge_protos gRPC::grpc++ spdlog::spdlog
  absl::status absl::statusor absl::strings Threads::Threads)

add_library(kforge_coordinator_service STATIC
  ${CMAKE_CURRENT_LIST_DIR}/service/job_manager.cc
  ${CMAKE_CURRENT_LIST_DIR}/service/job_service.cc)
target_link_libraries(kforge_coordinator_service PUBLIC
  kforge_pool_service kforge_embedded_runner kforge_proposer_service kforge_evaluator
  prometheus-cpp::core absl::str_format)

# In-process simulated workers over a TaskPool, for the coordinator's tests and benchmark.
add_library(kforge_simulated_pool_workers STATIC
  ${CMAKE_CURRENT_LIST_DIR}/pool/simulated_pool_workers.cc)
target_link_libraries(kforge_simulated_pool_workers PUBLIC
  kforge_pool_service kforge_evaluate_service)

add_library(kforge_coordinator_cli STATIC ${CMAKE_CURRENT_LIST_DIR}/service/coordinator_cli.cc)
target_link_libraries(kforge_coordinator_cli PUBLIC
  kforge_coordinator_service CLI11::CLI11 nlohmann_json::nlohmann_json)

include(${CMAKE_SOURCE_DIR}/tools/bench/coordinator_bench.cmake)
