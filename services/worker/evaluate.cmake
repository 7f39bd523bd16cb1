# The worker's evaluate side: the Evaluator supervisor (no LibTorch), the kforge-evaluator
# child (LibTorch + CUDA driver, one per GPU), the reference/validation math, the gRPC
# EvaluateService, and the `kforge eval` / `kforge serve worker` commands.

# The private supervisor <-> child protocol.
set(_kf_eval_proto ${CMAKE_CURRENT_LIST_DIR}/evaluator_protocol.proto)
set(_kf_eval_gen ${CMAKE_BINARY_DIR}/services/worker)
file(MAKE_DIRECTORY ${_kf_eval_gen})
add_custom_command(
  OUTPUT ${_kf_eval_gen}/evaluator_protocol.pb.cc ${_kf_eval_gen}/evaluator_protocol.pb.h
  COMMAND ${PROTOC_PROGRAM} -I${CMAKE_SOURCE_DIR} -I${CMAKE_SOURCE_DIR}/protos
          --cpp_out=${CMAKE_BINARY_DIR} ${_kf_eval_proto}
  DEPENDS ${_kf_eval_proto} ${CMAKE_SOURCE_DIR}/protos/kforge/v1/common.proto
          ${CMAKE_SOURCE_DIR}/protos/kforge/v1/worker.proto
  COMMENT "protoc services/worker/evaluator_protocol.proto")

# Pure host code shared by supervisor and child: frames, serving loop, guards, statistics.
add_library(kforge_evaluator_core STATIC
  ${_kf_eval_gen}/evaluator_protocol.pb.cc
  ${CMAKE_CURRENT_LIST_DIR}/evaluator_child.cc
  ${CMAKE_CURRENT_LIST_DIR}/evaluator_guards.cc
  ${CMAKE_CURRENT_LIST_DIR}/evaluator_protocol.cc
  ${CMAKE_CURRENT_LIST_DIR}/evaluator_stats.cc)
target_link_libraries(kforge_evaluator_core PUBLIC
  kforge_common kforge_protos absl::status absl::statusor absl::strings absl::str_format absl::time)
set_source_files_properties(${_kf_eval_gen}/evaluator_protocol.pb.cc PROPERTIES
  COMPILE_OPTIONS "-w")

# The supervisor: what the worker process links (no LibTorch, no libcuda).
add_library(kforge_evaluator STATIC ${CMAKE_CURRENT_LIST_DIR}/evaluator.cc)
target_link_libraries(kforge_evaluator PUBLIC kforge_evaluator_core Threads::Threads)
# The children travel with every binary that evaluates.
add_dependencies(kforge_evaluator kforge-evaluator)

# Reference execution, random inputs and accuracy checks (LibTorch; CPU-testable).
add_library(kforge_reference STATIC
  ${CMAKE_CURRENT_LIST_DIR}/reference.cc
  ${CMAKE_CURRENT_LIST_DIR}/reference_compare.cc
  ${CMAKE_CURRENT_LIST_DIR}/reference_inputs.cc)
target_link_libraries(kforge_reference PUBLIC
  kforge_torch kforge_protos absl::status absl::statusor absl::strings absl::str_format)

# The L2 flush before every timed rep (LibTorch), the child's and the sweep's.
add_library(kforge_l2_flush STATIC ${CMAKE_CURRENT_LIST_DIR}/l2_flush.cc)
target_link_libraries(kforge_l2_flush PUBLIC kforge_torch absl::status absl::statusor absl::strings)

# The child: owns one GPU's CUDA context. Links libcuda directly, so on a machine without a
# driver it fails to start and the supervisor reports NOT_EVALUATED.
add_executable(kforge-evaluator
  ${CMAKE_CURRENT_LIST_DIR}/evaluator_main.cc
  ${CMAKE_CURRENT_LIST_DIR}/evaluator_cuda_backend.cc)
target_link_libraries(kforge-evaluator PRIVATE
  kforge_evaluator_core kforge_reference kforge_launch_plan kforge_kernel_launch kforge_tensor_io
  kforge_l2_flush kforge_common CUDA::cuda_driver)
set_target_properties(kforge-evaluator PROPERTIES
  BUILD_RPATH "${KFORGE_TORCH_LIB_DIR}" INSTALL_RPATH "${KFORGE_TORCH_LIB_DIR}")

# Compile + evaluation cache + Evaluator, the gRPC service and the CLI commands.
add_library(kforge_evaluate_service STATIC
  ${CMAKE_CURRENT_LIST_DIR}/evaluator_pipeline.cc
  ${CMAKE_CURRENT_LIST_DIR}/evaluate_service.cc
  ${CMAKE_CURRENT_LIST_DIR}/eval_cli.cc
  ${CMAKE_CURRENT_LIST_DIR}/pull_worker.cc
  ${CMAKE_CURRENT_LIST_DIR}/simulated_evaluator.cc
  ${CMAKE_CURRENT_LIST_DIR}/worker_cli.cc)
target_link_libraries(kforge_evaluate_service PUBLIC
  kforge_evaluator kforge_compiler kforge_compile_service kforge_common kforge_launch_plan
  gRPC::grpc++ prometheus-cpp::core CLI11::CLI11 nlohmann_json::nlohmann_json spdlog::spdlog)

# The worker benchmark lives in tools/bench/.
include(${CMAKE_SOURCE_DIR}/tools/bench/worker_bench.cmake)
include(${CMAKE_SOURCE_DIR}/tools/bench/launch_overhead.cmake)
