# kforge_llm: the LLM proposer backends (OpenAI-compatible chat completions and Anthropic
# Messages over HTTP(S) with cpp-httplib), their prompt builder and response parser.
# No LibTorch.

# Debian's cpp-httplib is a compiled library; its pkg-config file carries the feature defines
# (OpenSSL, zlib, brotli) that must match the library's build.

# The kernel ABI header and the launch-plan format go into prompts verbatim.
set(_kforge_llm_embedded_sources
  ${PROJECT_SOURCE_DIR}/common/kforge_device.h
  ${PROJECT_SOURCE_DIR}/docs/launch-plan.md)
file(READ ${PROJECT_SOURCE_DIR}/common/kforge_device.h KFORGE_EMBED_ABI_HEADER)
file(READ ${PROJECT_SOURCE_DIR}/docs/launch-plan.md KFORGE_EMBED_LAUNCH_PLAN_DOC)
configure_file(${CMAKE_CURRENT_LIST_DIR}/llm/embedded_docs.cc.in
               ${CMAKE_CURRENT_BINARY_DIR}/llm/embedded_docs.cc @ONLY)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_kforge_llm_embedded_sources})

add_library(kforge_llm STATIC
  ${CMAKE_CURRENT_LIST_DIR}/llm/aten_op_descriptions.cc
  ${CMAKE_CURRENT_LIST_DIR}/llm/chat_protocol.cc
  ${CMAKE_CURRENT_LIST_DIR}/llm/llm_client.cc
  ${CMAKE_CURRENT_LIST_DIR}/llm/llm_options.cc
  ${CMAKE_CURRENT_LIST_DIR}/llm/llm_proposer.cc
  ${CMAKE_CURRENT_LIST_DIR}/llm/llm_transcript.cc
  ${CMAKE_CURRENT_LIST_DIR}/llm/prompt_builder.cc
  ${CMAKE_CURRENT_LIST_DIR}/llm/response_parser.cc
  ${CMAKE_CURRENT_LIST_DIR}/llm/retry_policy.cc
  ${CMAKE_CURRENT_BINARY_DIR}/llm/embedded_docs.cc)
target_link_libraries(kforge_llm
  PUBLIC kforge_common kforge_launch_plan kforge_protos
         absl::status absl::statusor absl::strings absl::str_format absl::time
         absl::synchronization absl::flat_hash_map absl::flat_hash_set
  PRIVATE PkgConfig::HTTPLIB OpenSSL::SSL OpenSSL::Crypto nlohmann_json::nlohmann_json
          spdlog::spdlog Threads::Threads)
