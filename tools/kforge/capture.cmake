# `kforge capture`: links the capture service library into the CLI.
target_link_libraries(kforge PRIVATE kforge_capture)
