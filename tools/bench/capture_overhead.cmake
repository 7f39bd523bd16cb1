# kforge-bench-capture (tools/bench/capture_overhead.cc): profiled vs plain forward time of
# exported models. Included from services/capture/capture.cmake.
add_executable(kforge-bench-capture ${CMAKE_SOURCE_DIR}/tools/bench/capture_overhead.cc)
target_link_libraries(kforge-bench-capture PRIVATE kforge_capture_core)
