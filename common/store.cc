// OpenStore: picks the Store backend from a URL.
#include "common/store.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/local_store.h"
#include "common/redis_store.h"

namespace kforge {

absl::StatusOr<std::unique_ptr<Store>> OpenStore(std::string_view url) {
  absl::string_view rest(url.data(), url.size());
  if (absl::StartsWith(rest, "redis://")) {
    auto store = RedisStore::Create(url);
    if (!store.ok()) return store.status();
    return std::unique_ptr<Store>(std::move(*store));
  }
  // A scheme other than dir: or redis:// is a typo, not a directory name.
  bool is_dir = absl::ConsumePrefix(&rest, "dir:");
  if (!is_dir && absl::StrContains(rest, "://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported store URL '", rest, "'; use dir:PATH, a plain path or redis://HOST:PORT[/DB]"));
  }
  if (rest.empty()) {
    return absl::InvalidArgumentError(
        "empty store URL; use dir:PATH, a plain path or redis://HOST:PORT[/DB]");
  }
  auto store = LocalStore::Create(std::string(rest));
  if (!store.ok()) return store.status();
  return std::unique_ptr<Store>(std::move(*store));
}

}  // namespace kforge
