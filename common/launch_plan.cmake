# kforge_launch_plan_core: the launch-plan JSON format and its expression language
# (docs/launch-plan.md) without protobuf: what the runtime library (libkforge_runtime.so) links.
# kforge_launch_plan: the same plus BindSymbols over the protos' TensorSignature, read by the
# worker (compile checks, evaluation).
add_library(kforge_launch_plan_core STATIC
  ${CMAKE_CURRENT_LIST_DIR}/expression.cc
  ${CMAKE_CURRENT_LIST_DIR}/launch_plan.cc)
target_link_libraries(kforge_launch_plan_core PUBLIC
  absl::status absl::statusor absl::strings absl::str_format absl::flat_hash_map
  absl::flat_hash_set
  nlohmann_json::nlohmann_json)
# launch_plan.h names the protos' TensorSignature (the proto overload of BindSymbols), so the
# generated header must exist before this compiles; nothing of protobuf is linked.
add_dependencies(kforge_launch_plan_core kforge_protos)

add_library(kforge_launch_plan STATIC ${CMAKE_CURRENT_LIST_DIR}/launch_plan_proto.cc)
target_link_libraries(kforge_launch_plan PUBLIC kforge_launch_plan_core kforge_protos)
