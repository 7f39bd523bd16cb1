# kforge_bench_anchor_rows (tools/bench/anchor_rows.cc): GPU.md's anchor rows as targets with
# seeded inputs, the enumeration of a family's valid configs, and the compile cache and
# compiler (bench_compiler.cc) — shared by kforge-synth-sweep and kforge-bench-search.
# Included from synth_sweep.cmake.
add_library(kforge_bench_anchor_rows STATIC ${CMAKE_SOURCE_DIR}/tools/bench/anchor_rows.cc
  ${CMAKE_SOURCE_DIR}/tools/bench/bench_compiler.cc)
target_link_libraries(kforge_bench_anchor_rows PUBLIC
  kforge_compiler kforge_synth kforge_reference kforge_tensor_io kforge_common kforge_protos
  absl::status absl::statusor absl::strings absl::str_format)
