// Length-prefixed protobuf frames on pipes: how the Evaluator and its kforge-evaluator
// children talk (services/worker/evaluator_protocol.proto). A frame is an 8-byte
// little-endian length followed by the serialized message.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "google/protobuf/message_lite.h"

namespace kforge {

// Protobuf refuses messages of 2 GiB and more; captured inputs are capped well below this.
inline constexpr uint64_t kMaxEvaluatorFrameBytes = (uint64_t{1} << 31) - 1;

// Writes one frame, retrying short writes and EINTR. An error names the pipe's peer.
absl::Status WriteFrame(int fd, const google::protobuf::MessageLite& message);

// Reads one frame into `message`. With a deadline, waits at most until then
// (DEADLINE_EXCEEDED); without one, blocks. UNAVAILABLE when the peer closed the pipe
// (end of file before or inside a frame), DATA_LOSS for a frame that does not parse.
absl::Status ReadFrame(int fd, google::protobuf::MessageLite* message,
                       std::optional<absl::Time> deadline = std::nullopt);

}  // namespace kforge
