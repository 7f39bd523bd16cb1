# kforge_torch_rows: a target as a torch_compile_times.py row (no LibTorch), shared
# by kforge-synth-sweep and `kforge report`.
add_library(kforge_torch_rows STATIC ${CMAKE_CURRENT_LIST_DIR}/torch_rows.cc)
target_link_libraries(kforge_torch_rows PUBLIC
  kforge_protos nlohmann_json::nlohmann_json absl::status absl::statusor absl::strings)
