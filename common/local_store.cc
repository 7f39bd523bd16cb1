// LocalStore: files under a directory, written atomically.
#include "common/local_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/digest.h"

namespace kforge {
namespace fs = std::filesystem;
namespace {

// Debian's abseil has its own string_view type, not std::string_view.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// File layout: "kforge-store-v1 <expires_ms> <key_bytes>\n" then the key, then the value.
constexpr std::string_view kMagic = "kforge-store-v1";
constexpr std::string_view kTempMarker = ".tmp.";

absl::Status ErrnoError(std::string_view what, const fs::path& path) {
  return absl::UnavailableError(
      absl::StrCat(Av(what), " ", path.string(), ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalStore>> LocalStore::Create(std::string root,
                                                                LocalStoreOptions options) {
  if (root.empty()) {
    return absl::InvalidArgumentError("local store directory is empty; pass --store dir:PATH");
  }
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec || access(root.c_str(), W_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot use ", root, " as a store directory: ",
                     ec ? ec.message() : std::strerror(errno),
                     "; pick a writable directory with --store dir:PATH"));
  }
  return std::unique_ptr<LocalStore>(new LocalStore(fs::path(root), std::move(options)));
}

LocalStore::LocalStore(fs::path root, LocalStoreOptions options)
    : root_(std::move(root)), options_(std::move(options)) {}

std::string LocalStore::Describe() const { return absl::StrCat("dir:", root_.string()); }

int64_t LocalStore::NowMs() const {
  auto now = options_.clock ? options_.clock() : std::chrono::system_clock::now();
  return std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
}

fs::path LocalStore::PathFor(std::string_view key) const {
  std::string hash = Sha256Hex(key);
  return root_ / hash.substr(0, 2) / hash.substr(2, 2) / hash;
}

absl::StatusOr<std::optional<LocalStore::Record>> LocalStore::ReadRecord(
    const fs::path& path) const {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    return ErrnoError("cannot read store file", path);
  }
  std::string contents;
  char buffer[1 << 16];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) contents.append(buffer, n);
  int read_errno = errno;
  close(fd);
  if (n < 0) {
    errno = read_errno;
    return ErrnoError("cannot read store file", path);
  }
  size_t newline = contents.find('\n');
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(contents).substr(0, newline), ' ');
  Record record;
  size_t key_size = 0;
  if (newline == std::string::npos || fields.size() != 3 || fields[0] != Av(kMagic) ||
      !absl::SimpleAtoi(fields[1], &record.expires_ms) ||
      !absl::SimpleAtoi(fields[2], &key_size) || contents.size() - newline - 1 < key_size) {
    return absl::DataLossError(absl::StrCat("store file ", path.string(),
                                            " is corrupt or truncated; delete it"));
  }
  record.key = contents.substr(newline + 1, key_size);
  record.value = contents.substr(newline + 1 + key_size);
  return record;
}

absl::StatusOr<fs::path> LocalStore::WriteTemp(const fs::path& final_path, std::string_view key,
                                               int64_t expires_ms, std::string_view value) {
  static std::atomic<uint64_t> counter{0};
  std::error_code ec;
  fs::create_directories(final_path.parent_path(), ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot create ", final_path.parent_path().string(),
                                               ": ", ec.message()));
  }
  fs::path temp = final_path;
  temp += absl::StrCat(Av(kTempMarker), getpid(), ".",
                       std::hash<std::thread::id>{}(std::this_thread::get_id()), ".",
                       counter.fetch_add(1));
  std::string header = absl::StrCat(Av(kMagic), " ", expires_ms, " ", key.size(), "\n");
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create store file", temp);
  bool written = true;
  for (std::string_view part : {std::string_view(header), key, value}) {
    while (written && !part.empty()) {
      ssize_t n = write(fd, part.data(), part.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) written = false;
      else part.remove_prefix(static_cast<size_t>(n));
    }
  }
  int write_errno = errno;
  if (close(fd) != 0) written = false;
  if (!written) {
    errno = write_errno;
    absl::Status error = ErrnoError("cannot write store file", temp);
    unlink(temp.c_str());
    return error;
  }
  return temp;
}

absl::StatusOr<std::optional<std::string>> LocalStore::Get(std::string_view key) {
  auto record = ReadRecord(PathFor(key));
  if (!record.ok()) return record.status();
  if (!record->has_value()) return std::nullopt;
  const Record& found = **record;
  // A different key with the same sha256 is not a real possibility; the check guards
  // against files copied between directories by hand.
  if (found.key != key) return std::nullopt;
  if (found.expires_ms != 0 && found.expires_ms <= NowMs()) return std::nullopt;
  return found.value;
}

absl::StatusOr<std::vector<std::optional<std::string>>> LocalStore::GetMany(
    const std::vector<std::string>& keys) {
  std::vector<std::optional<std::string>> values;
  values.reserve(keys.size());
  for (const std::string& key : keys) {
    auto value = Get(key);
    if (!value.ok()) return value.status();
    values.push_back(std::move(*value));
  }
  return values;
}

absl::Status LocalStore::Put(std::string_view key, std::string_view value,
                             const PutOptions& options) {
  int64_t expires_ms = options.ttl.count() > 0 ? NowMs() + options.ttl.count() * 1000 : 0;
  if (!options.if_absent) return Replace(key, value, expires_ms);
  fs::path path = PathFor(key);
  auto temp = WriteTemp(path, key, expires_ms, value);
  if (!temp.ok()) return temp.status();
  // link() fails with EEXIST when the key is present, which makes first-writer-wins atomic
  // across threads and processes.
  if (link(temp->c_str(), path.c_str()) == 0) {
    unlink(temp->c_str());
    return absl::OkStatus();
  }
  if (errno != EEXIST) {
    absl::Status error = ErrnoError("cannot write store file", path);
    unlink(temp->c_str());
    return error;
  }
  auto existing = Get(key);
  if (existing.ok() && existing->has_value()) {
    unlink(temp->c_str());
    return absl::OkStatus();
  }
  // The present entry is expired (or unreadable): replace it.
  if (rename(temp->c_str(), path.c_str()) != 0) {
    absl::Status error = ErrnoError("cannot write store file", path);
    unlink(temp->c_str());
    return error;
  }
  return absl::OkStatus();
}

absl::Status LocalStore::Overwrite(std::string_view key, std::string_view value) {
  return Replace(key, value, /*expires_ms=*/0);
}

absl::Status LocalStore::Replace(std::string_view key, std::string_view value,
                                 int64_t expires_ms) {
  fs::path path = PathFor(key);
  auto temp = WriteTemp(path, key, expires_ms, value);
  if (!temp.ok()) return temp.status();
  if (rename(temp->c_str(), path.c_str()) != 0) {
    absl::Status error = ErrnoError("cannot write store file", path);
    unlink(temp->c_str());
    return error;
  }
  return absl::OkStatus();
}

absl::Status LocalStore::Delete(std::string_view key) {
  fs::path path = PathFor(key);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError("cannot delete store file", path);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> LocalStore::List(std::string_view prefix) {
  std::vector<std::string> keys;
  std::error_code ec;
  int64_t now_ms = NowMs();
  for (auto it = fs::recursive_directory_iterator(root_, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file() || it->path().filename().string().find(kTempMarker) != std::string::npos) {
      continue;
    }
    auto record = ReadRecord(it->path());
    // Files deleted while listing, or foreign files, are not keys.
    if (!record.ok() || !record->has_value()) continue;
    const Record& found = **record;
    if (found.expires_ms != 0 && found.expires_ms <= now_ms) continue;
    if (found.key.compare(0, prefix.size(), prefix) == 0) keys.push_back(found.key);
  }
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot list store directory ", root_.string(), ": ", ec.message()));
  }
  return keys;
}

}  // namespace kforge
