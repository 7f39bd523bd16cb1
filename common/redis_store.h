// RedisStore: the Store on a Redis server (clusters), over hiredis with a connection pool.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/store.h"

struct redisContext;
struct redisReply;

namespace kforge {

struct RedisOptions {
  absl::Duration connect_timeout = absl::Seconds(2);
  absl::Duration operation_timeout = absl::Seconds(5);
  int pool_size = 4;
  // Reconnect backoff after a failed connect: doubles from initial to max. While it runs,
  // operations on that connection fail fast with UNAVAILABLE instead of blocking.
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
};

// Every Redis failure is UNAVAILABLE naming the server and the command, and is logged as
// a warning; callers treat it as a cache miss.
class RedisStore final : public Store {
 public:
  // url: "redis://HOST:PORT[/DB]". Connects and PINGs once so an unreachable server is
  // reported at startup.
  static absl::StatusOr<std::unique_ptr<RedisStore>> Create(std::string_view url,
                                                            RedisOptions options = {});
  ~RedisStore() override;

  absl::StatusOr<std::optional<std::string>> Get(std::string_view key) override;
  absl::StatusOr<std::vector<std::optional<std::string>>> GetMany(
      const std::vector<std::string>& keys) override;
  // SET key value NX [EX ttl] when if_absent, else SET key value [EX ttl].
  absl::Status Put(std::string_view key, std::string_view value,
                   const PutOptions& options = {}) override;
  absl::Status Overwrite(std::string_view key, std::string_view value) override;
  absl::Status Delete(std::string_view key) override;
  // SCAN MATCH prefix* (glob characters in the prefix are escaped).
  absl::StatusOr<std::vector<std::string>> List(std::string_view prefix) override;
  std::string Describe() const override;

 private:
  struct Connection {
    redisContext* context = nullptr;
    absl::Time next_connect = absl::InfinitePast();
    absl::Duration backoff = absl::ZeroDuration();
  };
  struct ReplyDeleter {
    void operator()(redisReply* reply) const;
  };
  using Reply = std::unique_ptr<redisReply, ReplyDeleter>;
  // One command: its argv and a short description for errors ("GET compile/ab12…").
  struct Command {
    std::vector<std::string> argv;
    std::string description;
  };

  RedisStore(std::string url, std::string host, int port, int db, RedisOptions options);

  absl::Status Connect(Connection& connection);
  void Disconnect(Connection& connection);
  Connection* Acquire();
  void Release(Connection* connection);
  // Runs the commands pipelined on one connection; retries once on a fresh connection
  // when a pooled one turns out to be stale (server restarted).
  absl::StatusOr<std::vector<Reply>> Run(const std::vector<Command>& commands);
  absl::StatusOr<std::vector<Reply>> RunOn(Connection& connection,
                                           const std::vector<Command>& commands);
  absl::Status Error(std::string_view command, std::string_view detail) const;

  const std::string url_;
  const std::string host_;
  const int port_;
  const int db_;
  const RedisOptions options_;

  std::mutex mutex_;
  std::condition_variable available_;
  std::vector<Connection> pool_;
  std::vector<Connection*> idle_;
};

}  // namespace kforge
