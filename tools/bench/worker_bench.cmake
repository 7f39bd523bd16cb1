# kforge-worker-bench (tools/bench/worker_bench.cc): compile latency, evaluations per minute
# and timing noise of the worker on a GPU machine. Included from services/worker/evaluate.cmake.
add_executable(kforge-worker-bench ${CMAKE_SOURCE_DIR}/tools/bench/worker_bench.cc)
target_link_libraries(kforge-worker-bench PRIVATE kforge_evaluate_service kforge_tensor_io)
set_target_properties(kforge-worker-bench PROPERTIES BUILD_RPATH "${KFORGE_TORCH_LIB_DIR}")
target_compile_definitions(kforge-worker-bench PRIVATE
  KFORGE_BENCH_KERNELS_DIR="${CMAKE_SOURCE_DIR}/tests/gpu/kernels")
add_dependencies(kforge-worker-bench kforge-evaluator)
