# kforge_synth: the built-in kernel synthesizer (families, parameter spaces, cost-model prior,
# source + launch-plan generation). No LibTorch: the proposer never links it.
# Device code that the host compiles too is kept in .cuh files and embedded as text.
set(_kforge_synth_device_code
  ${CMAKE_CURRENT_LIST_DIR}/synth/device/fast_divide.cuh
  ${CMAKE_CURRENT_LIST_DIR}/synth/device/broadcast_groups.cuh
  ${CMAKE_CURRENT_LIST_DIR}/synth/device/elementwise_path.cuh
  ${CMAKE_CURRENT_LIST_DIR}/synth/device/copy_view.cuh
  ${CMAKE_CURRENT_LIST_DIR}/synth/device/ticket_order.cuh
  ${CMAKE_CURRENT_LIST_DIR}/synth/device/spread_operand.cuh
  ${CMAKE_CURRENT_LIST_DIR}/synth/device/softmax_exp.cuh)
file(READ ${CMAKE_CURRENT_LIST_DIR}/synth/device/fast_divide.cuh KFORGE_EMBED_FAST_DIVIDE)
file(READ ${CMAKE_CURRENT_LIST_DIR}/synth/device/broadcast_groups.cuh KFORGE_EMBED_BROADCAST_GROUPS)
file(READ ${CMAKE_CURRENT_LIST_DIR}/synth/device/elementwise_path.cuh KFORGE_EMBED_ELEMENTWISE_PATH)
file(READ ${CMAKE_CURRENT_LIST_DIR}/synth/device/copy_view.cuh KFORGE_EMBED_COPY_VIEW)
file(READ ${CMAKE_CURRENT_LIST_DIR}/synth/device/ticket_order.cuh KFORGE_EMBED_TICKET_ORDER)
file(READ ${CMAKE_CURRENT_LIST_DIR}/synth/device/spread_operand.cuh KFORGE_EMBED_SPREAD_OPERAND)
file(READ ${CMAKE_CURRENT_LIST_DIR}/synth/device/softmax_exp.cuh KFORGE_EMBED_SOFTMAX_EXP)
configure_file(${CMAKE_CURRENT_LIST_DIR}/synth/device/device_code.cc.in
               ${CMAKE_CURRENT_BINARY_DIR}/synth/device_code.cc @ONLY)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_kforge_synth_device_code})

add_library(kforge_synth STATIC
  ${CMAKE_CURRENT_BINARY_DIR}/synth/device_code.cc
  ${CMAKE_CURRENT_LIST_DIR}/synth/batch_norm_family.cc
  ${CMAKE_CURRENT_LIST_DIR}/synth/cost_model.cc
  ${CMAKE_CURRENT_LIST_DIR}/synth/elementwise_family.cc
  ${CMAKE_CURRENT_LIST_DIR}/synth/family_registry.cc
  ${CMAKE_CURRENT_LIST_DIR}/synth/group_norm_family.cc
  ${CMAKE_CURRENT_LIST_DIR}/synth/kernel_source.cc
  ${CMAKE_CURRENT_LIST_DIR}/synth/layout_family.cc
  ${CMAKE_CURRENT_LIST_DIR}/synth/occupancy.cc
  ${CMAKE_CURRENT_LIST_DIR}/synth/param_space.cc
  ${CMAKE_CURRENT_LIST_DIR}/synth/pooling_family.cc
  ${CMAKE_CURRENT_LIST_DIR}/synth/prior_calibration.cc
  ${CMAKE_CURRENT_LIST_DIR}/synth/reduction_family.cc
  ${CMAKE_CURRENT_LIST_DIR}/synth/pointwise_chain.cc
  ${CMAKE_CURRENT_LIST_DIR}/synth/row_kernel.cc
  ${CMAKE_CURRENT_LIST_DIR}/synth/rowwise_family.cc
  ${CMAKE_CURRENT_LIST_DIR}/synth/synthesizer.cc
  ${CMAKE_CURRENT_LIST_DIR}/synth/target_args.cc)
target_link_libraries(kforge_synth PUBLIC
  kforge_protos kforge_common
  absl::status absl::statusor absl::strings absl::str_format
  nlohmann_json::nlohmann_json)

# The synthesizer sweep benchmark lives in tools/bench/.
include(${CMAKE_SOURCE_DIR}/tools/bench/synth_sweep.cmake)
