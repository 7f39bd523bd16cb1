# `kforge compile`: links the worker's compile library; kforge-nvrtc is built beside kforge.
target_link_libraries(kforge PRIVATE kforge_compile_cli)
add_dependencies(kforge kforge-nvrtc)
