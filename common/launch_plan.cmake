# kforge_launch_plan: the launch-plan JSON format and its expression language
# (docs/launch-plan.md). Read by the worker (compile checks, evaluation) and the runtime.
add_library(kforge_launch_plan STATIC
  ${CMAKE_CURRENT_LIST_DIR}/expression.cc
  ${CMAKE_CURRENT_LIST_DIR}/launch_plan.cc)
target_link_libraries(kforge_launch_plan PUBLIC
  kforge_protos
  absl::status absl::statusor absl::strings absl::str_format absl::flat_hash_map
  absl::flat_hash_set
  nlohmann_json::nlohmann_json)
