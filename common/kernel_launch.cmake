# kforge_kernel_launch: the torch-free driver-API part of running a kernel (cuda_driver.h,
# kernel_launch.h), shared by the worker's evaluator and the runtime library. libcuda is
# dlopen'd, never linked; only the CUDA headers are needed to build it.
add_library(kforge_kernel_launch STATIC
  ${CMAKE_CURRENT_LIST_DIR}/cuda_driver.cc
  ${CMAKE_CURRENT_LIST_DIR}/kernel_launch.cc)
target_include_directories(kforge_kernel_launch PUBLIC ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(kforge_kernel_launch PUBLIC
  kforge_launch_plan_core absl::status absl::statusor absl::strings absl::str_format
  ${CMAKE_DL_LIBS})
