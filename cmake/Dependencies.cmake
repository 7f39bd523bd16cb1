# Finds every dependency once. Debian bookworm packages (tools/setup installs them) and the
# LibTorch bundled in .venv's torch==2.11.0.
find_package(Threads REQUIRED)
find_package(Protobuf CONFIG QUIET)
if(NOT Protobuf_FOUND)
  find_package(Protobuf REQUIRED)
endif()
find_package(gRPC CONFIG REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(OpenSSL REQUIRED)
# Debian's HiredisConfig.cmake is broken (bookworm); pkg-config works.
find_package(PkgConfig REQUIRED)
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)
find_package(prometheus-cpp CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(fmt CONFIG REQUIRED)
# Debian ships cpp-httplib as a compiled library found through pkg-config.
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET GLOBAL cpp-httplib)
find_package(CUDAToolkit REQUIRED)  # NVRTC and the driver API header; libcuda is dlopen'd
find_package(GTest CONFIG REQUIRED)
find_package(benchmark CONFIG REQUIRED)

find_program(PROTOC_PROGRAM protoc REQUIRED)
find_program(GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

# LibTorch from the project's virtual environment (tools/setup makes it).
if(NOT KFORGE_PYTHON)
  if(EXISTS ${CMAKE_SOURCE_DIR}/.venv/bin/python)
    set(KFORGE_PYTHON ${CMAKE_SOURCE_DIR}/.venv/bin/python)
  else()
    set(KFORGE_PYTHON python3)
  endif()
endif()
execute_process(
  COMMAND ${KFORGE_PYTHON} -c "import torch; print(torch.utils.cmake_prefix_path)"
  OUTPUT_VARIABLE KFORGE_TORCH_PREFIX OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _torch_rc)
if(NOT _torch_rc EQUAL 0)
  message(FATAL_ERROR "kforge: cannot import torch with ${KFORGE_PYTHON}. Run tools/setup first.")
endif()
list(APPEND CMAKE_PREFIX_PATH ${KFORGE_TORCH_PREFIX})
if(NOT DEFINED TORCH_CUDA_ARCH_LIST)
  set(TORCH_CUDA_ARCH_LIST "9.0")
endif()
find_package(Torch REQUIRED)
# Torch's include tree also ships an old copy of protobuf's headers (include/google/), which
# would shadow the system protobuf in every file that includes both LibTorch and our protos.
# Point torch's imported targets at a mirror of that tree without google/.
get_filename_component(_torch_include "${KFORGE_TORCH_PREFIX}/../../include" ABSOLUTE)
set(_torch_include_mirror ${CMAKE_BINARY_DIR}/torch-include)
file(MAKE_DIRECTORY ${_torch_include_mirror})
file(GLOB _torch_include_entries RELATIVE ${_torch_include} ${_torch_include}/*)
foreach(_entry ${_torch_include_entries})
  if(NOT _entry STREQUAL "google" AND NOT EXISTS ${_torch_include_mirror}/${_entry})
    file(CREATE_LINK ${_torch_include}/${_entry} ${_torch_include_mirror}/${_entry} SYMBOLIC)
  endif()
endforeach()
get_property(_imported DIRECTORY PROPERTY IMPORTED_TARGETS)
foreach(_target ${_imported})
  get_target_property(_dirs ${_target} INTERFACE_INCLUDE_DIRECTORIES)
  if(_dirs)
    list(TRANSFORM _dirs REPLACE "^${_torch_include}" "${_torch_include_mirror}")
    set_target_properties(${_target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_dirs}")
  endif()
endforeach()
# Torch's flags carry the C++11 ABI define; targets linking torch get them via kforge_torch.
add_library(kforge_torch INTERFACE)
target_link_libraries(kforge_torch INTERFACE ${TORCH_LIBRARIES})
target_compile_options(kforge_torch INTERFACE -Wno-unused-parameter)
# libtorch.so exports its own copy of std::filesystem (remove_all, ...), which crashes when
# called from our code; loading libstdc++ first makes the standard library's definitions win.
target_link_options(kforge_torch INTERFACE "LINKER:--push-state,--no-as-needed,-lstdc++,--pop-state")
get_filename_component(KFORGE_TORCH_LIB_DIR "${TORCH_LIBRARY}" DIRECTORY)
