// RedisStore over hiredis 0.14: pooled blocking connections with timeouts and backoff.
#include "common/redis_store.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "spdlog/spdlog.h"

namespace kforge {
namespace {

// Debian's abseil has its own string_view type, not std::string_view.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Keys in errors: long keys are cut so a log line stays readable.
std::string ShortKey(std::string_view key) {
  constexpr size_t kMax = 80;
  return key.size() <= kMax ? std::string(key) : absl::StrCat(Av(key.substr(0, kMax)), "...");
}

// SCAN MATCH uses glob syntax; a literal prefix must escape its special characters.
std::string GlobEscape(std::string_view text) {
  std::string escaped;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') escaped.push_back('\\');
    escaped.push_back(c);
  }
  return escaped;
}

}  // namespace

void RedisStore::ReplyDeleter::operator()(redisReply* reply) const { freeReplyObject(reply); }

absl::StatusOr<std::unique_ptr<RedisStore>> RedisStore::Create(std::string_view url,
                                                               RedisOptions options) {
  absl::string_view rest = Av(url);
  if (!absl::ConsumePrefix(&rest, "redis://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad Redis URL '", Av(url), "'; expected redis://HOST:PORT[/DB]"));
  }
  int db = 0;
  if (size_t slash = rest.find('/'); slash != absl::string_view::npos) {
    absl::string_view db_text = rest.substr(slash + 1);
    if (!db_text.empty() && (!absl::SimpleAtoi(db_text, &db) || db < 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad Redis database '", db_text, "' in URL '", Av(url), "'; expected a number >= 0"));
    }
    rest = rest.substr(0, slash);
  }
  std::string host(rest);
  int port = 6379;
  if (size_t colon = rest.rfind(':'); colon != absl::string_view::npos) {
    host = std::string(rest.substr(0, colon));
    if (!absl::SimpleAtoi(rest.substr(colon + 1), &port) || port <= 0 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad Redis port in URL '", Av(url), "'; expected redis://HOST:PORT[/DB]"));
    }
  }
  if (host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Redis URL '", Av(url), "' has no host; expected redis://HOST:PORT[/DB]"));
  }
  options.pool_size = std::max(1, options.pool_size);
  std::unique_ptr<RedisStore> store(
      new RedisStore(absl::StrCat("redis://", host, ":", port, db != 0 ? absl::StrCat("/", db) : ""),
                     host, port, db, options));
  Connection* connection = store->Acquire();
  absl::Status status = store->Connect(*connection);
  store->Release(connection);
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot reach Redis at ", store->url_, ": ",
                                               status.message(),
                                               "; start redis-server or pass --store dir:PATH"));
  }
  return store;
}

RedisStore::RedisStore(std::string url, std::string host, int port, int db,
                       RedisOptions options)
    : url_(std::move(url)),
      host_(std::move(host)),
      port_(port),
      db_(db),
      options_(options),
      pool_(options.pool_size) {
  for (Connection& connection : pool_) idle_.push_back(&connection);
}

RedisStore::~RedisStore() {
  for (Connection& connection : pool_) Disconnect(connection);
}

std::string RedisStore::Describe() const { return url_; }

absl::Status RedisStore::Error(std::string_view command, std::string_view detail) const {
  std::string message = absl::StrCat("Redis ", url_, " failed ", Av(command), ": ", Av(detail));
  spdlog::warn("{}", message);
  return absl::UnavailableError(message);
}

void RedisStore::Disconnect(Connection& connection) {
  if (connection.context != nullptr) redisFree(connection.context);
  connection.context = nullptr;
}

// Plain message (no URL): callers add context.
absl::Status RedisStore::Connect(Connection& connection) {
  Disconnect(connection);
  absl::Time now = absl::Now();
  if (now < connection.next_connect) {
    return absl::UnavailableError(absl::StrCat(
        "not reconnecting for another ", absl::FormatDuration(connection.next_connect - now),
        " after a failed attempt"));
  }
  auto fail = [&](std::string detail) {
    Disconnect(connection);
    connection.backoff = connection.backoff == absl::ZeroDuration()
                             ? options_.initial_backoff
                             : std::min(connection.backoff * 2, options_.max_backoff);
    connection.next_connect = absl::Now() + connection.backoff;
    return absl::UnavailableError(std::move(detail));
  };
  timeval connect_timeout = absl::ToTimeval(options_.connect_timeout);
  connection.context = redisConnectWithTimeout(host_.c_str(), port_, connect_timeout);
  if (connection.context == nullptr) return fail("cannot allocate a Redis context");
  if (connection.context->err != 0) return fail(connection.context->errstr);
  if (redisSetTimeout(connection.context, absl::ToTimeval(options_.operation_timeout)) != REDIS_OK) {
    return fail(absl::StrCat("cannot set the operation timeout: ", connection.context->errstr));
  }
  std::vector<std::string> setup = {"PING"};
  if (db_ != 0) setup.push_back(absl::StrCat("SELECT ", db_));
  for (const std::string& command : setup) {
    Reply reply(static_cast<redisReply*>(redisCommand(connection.context, command.c_str())));
    if (reply == nullptr) return fail(connection.context->errstr);
    if (reply->type == REDIS_REPLY_ERROR) {
      return fail(absl::StrCat(command, ": ", absl::string_view(reply->str, reply->len)));
    }
  }
  connection.backoff = absl::ZeroDuration();
  connection.next_connect = absl::InfinitePast();
  return absl::OkStatus();
}

RedisStore::Connection* RedisStore::Acquire() {
  std::unique_lock lock(mutex_);
  available_.wait(lock, [this] { return !idle_.empty(); });
  Connection* connection = idle_.back();
  idle_.pop_back();
  return connection;
}

void RedisStore::Release(Connection* connection) {
  {
    std::lock_guard lock(mutex_);
    idle_.push_back(connection);
  }
  available_.notify_one();
}

absl::StatusOr<std::vector<RedisStore::Reply>> RedisStore::RunOn(
    Connection& connection, const std::vector<Command>& commands) {
  redisContext* context = connection.context;
  for (const Command& command : commands) {
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    for (const std::string& arg : command.argv) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    if (redisAppendCommandArgv(context, static_cast<int>(argv.size()), argv.data(),
                               lengths.data()) != REDIS_OK) {
      return absl::UnavailableError(context->errstr);
    }
  }
  std::vector<Reply> replies;
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(context, &raw) != REDIS_OK) {
      if (raw != nullptr) freeReplyObject(raw);
      return absl::UnavailableError(context->errstr);
    }
    replies.emplace_back(static_cast<redisReply*>(raw));
  }
  return replies;
}

absl::StatusOr<std::vector<RedisStore::Reply>> RedisStore::Run(
    const std::vector<Command>& commands) {
  std::string what = commands.size() == 1
                         ? commands[0].description
                         : absl::StrCat(commands.size(), " pipelined commands (",
                                        commands[0].description, ", ...)");
  Connection* connection = Acquire();
  absl::StatusOr<std::vector<Reply>> replies;
  bool was_connected = connection->context != nullptr;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (connection->context == nullptr) {
      absl::Status connected = Connect(*connection);
      if (!connected.ok()) {
        replies = connected;
        break;
      }
    }
    replies = RunOn(*connection, commands);
    if (replies.ok()) break;
    // The connection is unusable after an I/O error; a stale pooled connection gets one
    // immediate retry on a fresh one, a fresh connection does not.
    Disconnect(*connection);
    if (!was_connected) break;
    was_connected = false;
  }
  Release(connection);
  if (!replies.ok()) return Error(what, std::string(replies.status().message()));
  for (size_t i = 0; i < replies->size(); ++i) {
    const redisReply* reply = (*replies)[i].get();
    if (reply->type == REDIS_REPLY_ERROR) {
      return Error(commands[i].description, std::string_view(reply->str, reply->len));
    }
  }
  return replies;
}

absl::StatusOr<std::optional<std::string>> RedisStore::Get(std::string_view key) {
  auto values = GetMany({std::string(key)});
  if (!values.ok()) return values.status();
  return std::move((*values)[0]);
}

absl::StatusOr<std::vector<std::optional<std::string>>> RedisStore::GetMany(
    const std::vector<std::string>& keys) {
  std::vector<std::optional<std::string>> values;
  if (keys.empty()) return values;
  std::vector<Command> commands;
  for (const std::string& key : keys) {
    commands.push_back({{"GET", key}, absl::StrCat("GET ", ShortKey(key))});
  }
  auto replies = Run(commands);
  if (!replies.ok()) return replies.status();
  for (size_t i = 0; i < keys.size(); ++i) {
    const redisReply* reply = (*replies)[i].get();
    if (reply->type == REDIS_REPLY_NIL) {
      values.emplace_back(std::nullopt);
    } else if (reply->type == REDIS_REPLY_STRING) {
      values.emplace_back(std::string(reply->str, reply->len));
    } else {
      return Error(commands[i].description,
                   absl::StrCat("unexpected reply type ", reply->type, " (key holds a non-string?)"));
    }
  }
  return values;
}

absl::Status RedisStore::Put(std::string_view key, std::string_view value,
                             const PutOptions& options) {
  Command command{{"SET", std::string(key), std::string(value)}, ""};
  if (options.if_absent) command.argv.push_back("NX");
  if (options.ttl.count() > 0) {
    command.argv.push_back("EX");
    command.argv.push_back(absl::StrCat(options.ttl.count()));
  }
  command.description = absl::StrCat("SET ", ShortKey(key), options.if_absent ? " NX" : "",
                                     options.ttl.count() > 0 ? " EX" : "");
  // NX on a present key answers nil: the first writer won, which is success.
  return Run({std::move(command)}).status();
}

absl::Status RedisStore::Overwrite(std::string_view key, std::string_view value) {
  return Run({{{"SET", std::string(key), std::string(value)},
               absl::StrCat("SET ", ShortKey(key))}})
      .status();
}

absl::Status RedisStore::Delete(std::string_view key) {
  return Run({{{"DEL", std::string(key)}, absl::StrCat("DEL ", ShortKey(key))}}).status();
}

absl::StatusOr<std::vector<std::string>> RedisStore::List(std::string_view prefix) {
  std::vector<std::string> keys;
  std::string pattern = absl::StrCat(GlobEscape(prefix), "*");
  std::string cursor = "0";
  do {
    auto replies = Run({{{"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"},
                         absl::StrCat("SCAN MATCH ", ShortKey(pattern))}});
    if (!replies.ok()) return replies.status();
    const redisReply* reply = (*replies)[0].get();
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_STRING ||
        reply->element[1]->type != REDIS_REPLY_ARRAY) {
      return Error("SCAN", "unexpected reply shape");
    }
    cursor.assign(reply->element[0]->str, reply->element[0]->len);
    const redisReply* batch = reply->element[1];
    for (size_t i = 0; i < batch->elements; ++i) {
      keys.emplace_back(batch->element[i]->str, batch->element[i]->len);
    }
  } while (cursor != "0");
  // SCAN may return a key more than once.
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

}  // namespace kforge
