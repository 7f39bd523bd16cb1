// Digests (sha256 + size) and candidate ids; the hashing itself is sha256.h, the one hashing
// helper of kforge (store keys, digests, ids, bundle checksums).
#pragma once

#include <string>
#include <string_view>

#include "common/sha256.h"
#include "kforge/v1/common.pb.h"

namespace kforge {

// Digest (sha256 + size) of `data`.
v1::Digest MakeDigest(std::string_view data);

// The id of a candidate kernel: sha256 over its source and launch plan, separated so that no
// (source, plan) split collides. Every proposer and tool names candidates with it.
std::string CandidateId(std::string_view source, std::string_view launch_plan_json);

}  // namespace kforge
