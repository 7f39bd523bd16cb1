# kforge_report_cli: `kforge report` (the run directory's summary and torch rows). No LibTorch.
add_library(kforge_report_cli STATIC ${CMAKE_CURRENT_LIST_DIR}/report_cli.cc)
target_link_libraries(kforge_report_cli PUBLIC
  kforge_embedded_runner kforge_torch_rows kforge_common CLI11::CLI11)
