// Frame I/O for the evaluator protocol: plain read/write/poll on pipe descriptors.
#include "services/worker/evaluator_protocol.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

absl::Status WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(
          absl::StrCat("evaluator pipe: write failed: ", std::strerror(errno)));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Waits until `fd` is readable or the deadline passes.
absl::Status WaitReadable(int fd, std::optional<absl::Time> deadline) {
  if (!deadline.has_value()) return absl::OkStatus();
  while (true) {
    absl::Duration left = *deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError("evaluator pipe: no reply before the deadline");
    }
    int timeout_ms = static_cast<int>(
        std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 60'000));
    pollfd pfd{fd, POLLIN, 0};
    int rc = ::poll(&pfd, 1, timeout_ms);
    if (rc < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(
          absl::StrCat("evaluator pipe: poll failed: ", std::strerror(errno)));
    }
    if (rc > 0) return absl::OkStatus();  // readable, or hung up (read sees EOF)
  }
}

absl::Status ReadAll(int fd, char* data, size_t size, std::optional<absl::Time> deadline) {
  while (size > 0) {
    if (absl::Status s = WaitReadable(fd, deadline); !s.ok()) return s;
    ssize_t n = ::read(fd, data, size);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError(
          absl::StrCat("evaluator pipe: read failed: ", std::strerror(errno)));
    }
    if (n == 0) return absl::UnavailableError("evaluator pipe: the peer closed the pipe");
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFrame(int fd, const google::protobuf::MessageLite& message) {
  std::string body;
  if (!message.SerializeToString(&body)) {
    return absl::InvalidArgumentError(
        absl::StrCat("evaluator pipe: cannot serialize ", message.GetTypeName()));
  }
  if (body.size() > kMaxEvaluatorFrameBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "evaluator pipe: a ", message.GetTypeName(), " of ", body.size(),
        " bytes is over the 2 GiB frame limit; cap the captured inputs"));
  }
  unsigned char header[8];
  uint64_t size = body.size();
  for (int i = 0; i < 8; ++i) header[i] = static_cast<unsigned char>(size >> (8 * i));
  if (absl::Status s = WriteAll(fd, reinterpret_cast<const char*>(header), 8); !s.ok()) {
    return s;
  }
  return WriteAll(fd, body.data(), body.size());
}

absl::Status ReadFrame(int fd, google::protobuf::MessageLite* message,
                       std::optional<absl::Time> deadline) {
  unsigned char header[8];
  if (absl::Status s = ReadAll(fd, reinterpret_cast<char*>(header), 8, deadline); !s.ok()) {
    return s;
  }
  uint64_t size = 0;
  for (int i = 0; i < 8; ++i) size |= static_cast<uint64_t>(header[i]) << (8 * i);
  if (size > kMaxEvaluatorFrameBytes) {
    return absl::DataLossError(
        absl::StrCat("evaluator pipe: frame length ", size, " is over the 2 GiB limit"));
  }
  std::string body(size, '\0');
  if (absl::Status s = ReadAll(fd, body.data(), body.size(), deadline); !s.ok()) return s;
  if (!message->ParseFromString(body)) {
    return absl::DataLossError(
        absl::StrCat("evaluator pipe: a frame does not parse as ", message->GetTypeName()));
  }
  return absl::OkStatus();
}

}  // namespace kforge
