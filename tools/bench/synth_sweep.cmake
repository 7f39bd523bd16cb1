# kforge-synth-sweep (tools/bench/synth_sweep.cc): the synthesizer's exhaustive sweep of the
# anchor shapes of ../shared/GPU.md beside eager, torch.compile and the floor; and its quick-pass
# child kforge-synth-sweep-quick (synth_sweep_quick.cc: LibTorch + the CUDA driver, so a
# faulting kernel costs a child restart). Run on the GPU by tools/gpu-steps/synth_sweep.sh;
# --compile-only runs anywhere. Included from services/proposer/synth.cmake.
include(${CMAKE_SOURCE_DIR}/tools/bench/anchor_rows.cmake)
add_executable(kforge-synth-sweep ${CMAKE_SOURCE_DIR}/tools/bench/synth_sweep.cc)
target_link_libraries(kforge-synth-sweep PRIVATE
  kforge_bench_anchor_rows kforge_synth kforge_evaluate_service kforge_tensor_io kforge_common
  kforge_torch_rows
  CLI11::CLI11 nlohmann_json::nlohmann_json)
set_target_properties(kforge-synth-sweep PROPERTIES BUILD_RPATH "${KFORGE_TORCH_LIB_DIR}")

add_executable(kforge-synth-sweep-quick ${CMAKE_SOURCE_DIR}/tools/bench/synth_sweep_quick.cc)
target_link_libraries(kforge-synth-sweep-quick PRIVATE
  kforge_evaluator_core kforge_reference kforge_launch_plan kforge_kernel_launch kforge_tensor_io
  kforge_l2_flush kforge_common nlohmann_json::nlohmann_json CUDA::cuda_driver)
set_target_properties(kforge-synth-sweep-quick PROPERTIES BUILD_RPATH "${KFORGE_TORCH_LIB_DIR}")

# The children the sweep starts from its own directory.
add_dependencies(kforge-synth-sweep kforge-synth-sweep-quick kforge-evaluator kforge-nvrtc)

# Batched NVRTC programs, shards, details TSVs and torch.compile times of the sweep
# (tests/bench/).
add_library(kforge_bench_sweep STATIC
  ${CMAKE_SOURCE_DIR}/tools/bench/kernel_batch.cc ${CMAKE_SOURCE_DIR}/tools/bench/sweep_details.cc
  ${CMAKE_SOURCE_DIR}/tools/bench/torch_times.cc)
target_link_libraries(kforge_bench_sweep PUBLIC
  kforge_common absl::status absl::statusor absl::strings nlohmann_json::nlohmann_json)
target_link_libraries(kforge-synth-sweep PRIVATE kforge_bench_sweep)

# The quick pass's accuracy check (LibTorch; tests/bench/quick_accuracy_test.cc).
add_library(kforge_bench_quick_accuracy STATIC ${CMAKE_SOURCE_DIR}/tools/bench/quick_accuracy.cc)
target_link_libraries(kforge_bench_quick_accuracy PUBLIC kforge_reference)
target_link_libraries(kforge-synth-sweep-quick PRIVATE kforge_bench_quick_accuracy)
