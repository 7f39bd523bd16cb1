# The worker's compile side: NVRTC in a child process under limits (kforge-nvrtc), the
# Compiler with its cache, the gRPC CompileService adapter and the `kforge compile` command.

# The kernel ABI header, embedded at build time; editing it re-runs CMake and rebuilds.
get_filename_component(_kf_device_header ${CMAKE_CURRENT_LIST_DIR}/../../common/kforge_device.h ABSOLUTE)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_kf_device_header})
file(READ ${_kf_device_header} KFORGE_DEVICE_HEADER)
configure_file(${CMAKE_CURRENT_LIST_DIR}/kforge_device_header.cc.in
               ${CMAKE_CURRENT_BINARY_DIR}/kforge_device_header.cc @ONLY)

# What both the worker and the child need: policy, NVRTC driver, ptxas report parsing.
add_library(kforge_nvrtc STATIC
  ${CMAKE_CURRENT_LIST_DIR}/compile_policy.cc
  ${CMAKE_CURRENT_LIST_DIR}/nvrtc_compile.cc
  ${CMAKE_CURRENT_LIST_DIR}/ptxas_report.cc
  ${CMAKE_CURRENT_BINARY_DIR}/kforge_device_header.cc)
target_link_libraries(kforge_nvrtc PUBLIC
  kforge_protos CUDA::nvrtc absl::status absl::strings absl::str_format)

add_executable(kforge-nvrtc ${CMAKE_CURRENT_LIST_DIR}/nvrtc_child_main.cc)
target_link_libraries(kforge-nvrtc PRIVATE kforge_nvrtc)

add_library(kforge_compiler STATIC
  ${CMAKE_CURRENT_LIST_DIR}/compiler.cc
  ${CMAKE_CURRENT_LIST_DIR}/subprocess.cc)
target_link_libraries(kforge_compiler PUBLIC
  kforge_nvrtc kforge_launch_plan kforge_common absl::time spdlog::spdlog ${CMAKE_DL_LIBS})
# The child travels with every binary that compiles.
add_dependencies(kforge_compiler kforge-nvrtc)

add_library(kforge_compile_service STATIC ${CMAKE_CURRENT_LIST_DIR}/compile_service.cc)
target_link_libraries(kforge_compile_service PUBLIC
  kforge_compiler kforge_common gRPC::grpc++ prometheus-cpp::core)

add_library(kforge_compile_cli STATIC ${CMAKE_CURRENT_LIST_DIR}/compile_cli.cc)
target_link_libraries(kforge_compile_cli PUBLIC
  kforge_compile_service CLI11::CLI11 nlohmann_json::nlohmann_json)
