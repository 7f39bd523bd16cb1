# `kforge propose` and `kforge serve proposer`: link the proposer's service library.
target_link_libraries(kforge PRIVATE kforge_proposer_cli)
