# `kforge optimize`: links the coordinator's embedded job (capture + search + local GPUs).
target_link_libraries(kforge PRIVATE kforge_optimize_cli)
