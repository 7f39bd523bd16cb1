# kforge-bench-search (tools/bench/search_bench.cc): MCTS over the synthesizer beside uniform
# random sampling of the same family space — best speedup after 10, 25 and 50 evaluations on
# GPU.md's anchor rows. Run on the GPU by tools/gpu-steps/search_bench.sh; --compile-only runs
# anywhere. Included from services/coordinator/embedded.cmake.
add_executable(kforge-bench-search ${CMAKE_SOURCE_DIR}/tools/bench/search_bench.cc)
target_link_libraries(kforge-bench-search PRIVATE
  kforge_bench_anchor_rows kforge_embedded_runner kforge_search kforge_synth
  kforge_evaluate_service kforge_bench_sweep kforge_common CLI11::CLI11)
set_target_properties(kforge-bench-search PROPERTIES BUILD_RPATH "${KFORGE_TORCH_LIB_DIR}")
# The children it starts from its own directory.
add_dependencies(kforge-bench-search kforge-evaluator kforge-nvrtc)
