# `kforge optimize` as libraries.
# kforge_embedded_runner: the EmbeddedRunner (compile pool + one evaluator per local GPU), the
#   run directory, target selection, the report and the progress display. No LibTorch.
# kforge_embedded: the optimize job wiring capture, proposer, search and runner in one
#   process. It links the capture library (LibTorch stays private to kforge_capture_core);
#   its own sources include no LibTorch header.
# kforge_optimize_cli: `kforge optimize`.
add_library(kforge_embedded_runner STATIC
  ${CMAKE_CURRENT_LIST_DIR}/embedded/embedded_runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/embedded/gpu_lane.cc
  ${CMAKE_CURRENT_LIST_DIR}/embedded/local_gpus.cc
  ${CMAKE_CURRENT_LIST_DIR}/embedded/optimize_report.cc
  ${CMAKE_CURRENT_LIST_DIR}/embedded/progress_display.cc
  ${CMAKE_CURRENT_LIST_DIR}/embedded/run_directory.cc
  ${CMAKE_CURRENT_LIST_DIR}/embedded/target_selection.cc)
target_link_libraries(kforge_embedded_runner PUBLIC
  kforge_search kforge_evaluate_service kforge_common kforge_protos
  nlohmann_json::nlohmann_json absl::status absl::statusor absl::strings absl::str_format
  Threads::Threads ${CMAKE_DL_LIBS})

add_library(kforge_embedded STATIC ${CMAKE_CURRENT_LIST_DIR}/embedded/optimize_job.cc)
target_link_libraries(kforge_embedded PUBLIC
  kforge_embedded_runner kforge_synth kforge_llm kforge_capture)

add_library(kforge_optimize_cli STATIC ${CMAKE_CURRENT_LIST_DIR}/optimize_cli.cc)
target_link_libraries(kforge_optimize_cli PUBLIC kforge_embedded CLI11::CLI11 absl::time)

# The search benchmark (MCTS vs random sampling) lives in tools/bench/.
include(${CMAKE_SOURCE_DIR}/tools/bench/search_bench.cmake)
