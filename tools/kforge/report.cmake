# `kforge report`: an optimize run directory's summary and torch rows.
target_link_libraries(kforge PRIVATE kforge_report_cli)
