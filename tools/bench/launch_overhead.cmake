# kforge-launch-overhead (tools/bench/launch_overhead.cc): what the kernel parameter's size
# (KfArgs by value) costs a launch, beside the same kernel taking three tensors or two pointers.
# Run on a GPU machine. Included from services/worker/evaluate.cmake.
add_executable(kforge-launch-overhead ${CMAKE_SOURCE_DIR}/tools/bench/launch_overhead.cc)
target_link_libraries(kforge-launch-overhead PRIVATE kforge_compiler kforge_evaluator_core CLI11::CLI11 CUDA::cuda_driver)
