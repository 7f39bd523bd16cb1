# kforge_pool: the worker pool's lease table (queue, leases, lapses, results). Pure logic:
# the WorkerPool gRPC service adapts it; no LibTorch, no gRPC code here.
add_library(kforge_pool STATIC
  ${CMAKE_CURRENT_LIST_DIR}/pool/lease_table.cc)
target_link_libraries(kforge_pool PUBLIC
  kforge_protos
  absl::status absl::statusor absl::strings Threads::Threads)
