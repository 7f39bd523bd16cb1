# kforge-coordinator-bench (tools/bench/coordinator_bench.cc): coordinator overhead per
# iteration and throughput with 1, 4, 16 and 64 simulated workers, in one process. Included
# from services/coordinator/service.cmake.
add_executable(kforge-coordinator-bench ${CMAKE_SOURCE_DIR}/tools/bench/coordinator_bench.cc)
target_link_libraries(kforge-coordinator-bench PRIVATE kforge_coordinator_service
  kforge_simulated_pool_workers)
