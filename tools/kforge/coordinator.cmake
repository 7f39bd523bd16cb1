# `kforge serve coordinator`, `kforge submit|watch|jobs`: link the coordinator's service library.
target_link_libraries(kforge PRIVATE kforge_coordinator_cli)
