// Capture reports: the op table and summary as text, and the --out directory layout
// (profile.json, graph.json, summary.txt, targets/<id>/{target.json, inputs.pt}).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kforge/v1/common.pb.h"
#include "services/capture/capturer.h"

namespace kforge {

// Protobuf JSON (field names as in the .proto, defaults printed).
absl::StatusOr<std::string> ProfileToJson(const google::protobuf::Message& message);

// The op table sorted by time: op, overload, calls, total, mean, share, family, signature.
// At most `max_rows` rows (0: all); the rest are summed in one line.
std::string FormatOpTable(const v1::OperatorProfile& profile, int max_rows);

// What a person reads: forward times, coverage and how it is computed, the op table, the
// targets (id, share, captured inputs, family) and the notes.
std::string FormatSummary(const CaptureResult& result, int max_rows);

// Writes the capture into `dir` (created if needed).
absl::Status WriteCaptureDir(const std::string& dir, const CaptureResult& result);

}  // namespace kforge
