# kforge_tensor_io: torch.save-compatible tensor files (the only common library on LibTorch).
add_library(kforge_tensor_io STATIC ${CMAKE_CURRENT_LIST_DIR}/tensor_io.cc)
target_link_libraries(kforge_tensor_io PUBLIC kforge_torch absl::status absl::statusor
                                              absl::strings)
