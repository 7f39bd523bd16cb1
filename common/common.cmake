# kforge_common: status helpers, hashing, config, logging, stores (local dir, Redis, blobs),
# metrics and the gRPC server/channel helpers every service uses.
add_library(kforge_common STATIC
  ${CMAKE_CURRENT_LIST_DIR}/blob_store.cc
  ${CMAKE_CURRENT_LIST_DIR}/cli.cc
  ${CMAKE_CURRENT_LIST_DIR}/config.cc
  ${CMAKE_CURRENT_LIST_DIR}/digest.cc
  ${CMAKE_CURRENT_LIST_DIR}/file_io.cc
  ${CMAKE_CURRENT_LIST_DIR}/grpc_server.cc
  ${CMAKE_CURRENT_LIST_DIR}/local_store.cc
  ${CMAKE_CURRENT_LIST_DIR}/logging.cc
  ${CMAKE_CURRENT_LIST_DIR}/metrics.cc
  ${CMAKE_CURRENT_LIST_DIR}/op_cost.cc
  ${CMAKE_CURRENT_LIST_DIR}/redis_store.cc
  ${CMAKE_CURRENT_LIST_DIR}/serve_flags.cc
  ${CMAKE_CURRENT_LIST_DIR}/status.cc
  ${CMAKE_CURRENT_LIST_DIR}/store.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_signature.cc)
target_link_libraries(kforge_common PUBLIC
  kforge_sha256 kforge_protos
  absl::status absl::statusor absl::strings absl::str_format absl::time absl::synchronization
  OpenSSL::Crypto
  PkgConfig::HIREDIS
  prometheus-cpp::core PkgConfig::HTTPLIB
  spdlog::spdlog
  CLI11::CLI11
  nlohmann_json::nlohmann_json
  gRPC::grpc++ gRPC::grpc++_reflection)

# kforge_sha256: the hashing helper alone (OpenSSL only), for the runtime library that users
# load into their processes.
add_library(kforge_sha256 STATIC ${CMAKE_CURRENT_LIST_DIR}/sha256.cc)
target_link_libraries(kforge_sha256 PUBLIC OpenSSL::Crypto)
