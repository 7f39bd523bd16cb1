// Digests and candidate ids over the sha256 helper (sha256.h).
#include "common/digest.h"

namespace kforge {

v1::Digest MakeDigest(std::string_view data) {
  v1::Digest digest;
  digest.set_sha256(Sha256Hex(data));
  digest.set_size_bytes(static_cast<int64_t>(data.size()));
  return digest;
}

std::string CandidateId(std::string_view source, std::string_view launch_plan_json) {
  Sha256Hasher hasher;
  hasher.Update(source);
  hasher.Update(std::string_view("\0", 1));
  hasher.Update(launch_plan_json);
  return hasher.Finish();
}

}  // namespace kforge
