# `kforge export` (and the export at the end of `kforge optimize`): links the exporter, which
# brings libkforge_runtime.so (build/lib) along.
target_link_libraries(kforge PRIVATE kforge_export_cli)
