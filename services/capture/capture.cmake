# kforge_capture_core: Capturer, the one file on LibTorch (slow to compile; torch stays a
# private dependency so its include tree does not reach the light files).
# kforge_capture: reports, the gRPC CaptureService and `kforge capture`.
add_library(kforge_capture_core STATIC ${CMAKE_CURRENT_LIST_DIR}/capturer.cc)
target_link_libraries(kforge_capture_core
  PUBLIC kforge_common kforge_protos absl::status absl::statusor
  PRIVATE kforge_tensor_io kforge_torch nlohmann_json::nlohmann_json)

add_library(kforge_capture STATIC
  ${CMAKE_CURRENT_LIST_DIR}/capture_report.cc
  ${CMAKE_CURRENT_LIST_DIR}/capture_service.cc
  ${CMAKE_CURRENT_LIST_DIR}/capture_cli.cc)
target_link_libraries(kforge_capture PUBLIC
  kforge_capture_core kforge_common kforge_protos
  CLI11::CLI11 spdlog::spdlog prometheus-cpp::core)

include(${CMAKE_SOURCE_DIR}/tools/bench/capture_overhead.cmake)
