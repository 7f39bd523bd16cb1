// RedisStore against a real redis-server: SET NX, TTL, pipelined GetMany, SCAN listing,
// reconnect after a restart on the same port, and fast UNAVAILABLE on a dead port.
#include "common/redis_store.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/redis_server.h"

namespace kforge {
namespace {

// Polls `condition` until it holds or ~10 s pass (no timing is asserted).
template <typename Condition>
bool Eventually(Condition condition) {
  for (int i = 0; i < 200; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

// Asks the server directly, bypassing RedisStore.
long long RawTtl(int port, const std::string& key) {
  redisContext* context = redisConnect("127.0.0.1", port);
  auto* reply = static_cast<redisReply*>(redisCommand(context, "TTL %s", key.c_str()));
  long long ttl = reply != nullptr && reply->type == REDIS_REPLY_INTEGER ? reply->integer : -100;
  if (reply != nullptr) freeReplyObject(reply);
  redisFree(context);
  return ttl;
}

class RedisStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.status().ok()) << redis_.status();
    RedisOptions options;
    options.initial_backoff = absl::Milliseconds(20);
    options.max_backoff = absl::Milliseconds(200);
    auto store = RedisStore::Create(redis_.url(), options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  RedisServerProcess redis_;
  std::unique_ptr<RedisStore> store_;
};

TEST_F(RedisStoreTest, SetNxKeepsTheFirstWriter) {
  std::string binary("cu\0bin", 6);
  ASSERT_TRUE(store_->Put("compile/k", binary).ok());
  ASSERT_TRUE(store_->Put("compile/k", "second").ok());
  EXPECT_EQ(**store_->Get("compile/k"), binary);
  ASSERT_TRUE(store_->Put("compile/k", "forced", PutOptions{.if_absent = false}).ok());
  EXPECT_EQ(**store_->Get("compile/k"), "forced");
  ASSERT_TRUE(store_->Overwrite("job/1", "running").ok());
  ASSERT_TRUE(store_->Overwrite("job/1", "done").ok());
  EXPECT_EQ(**store_->Get("job/1"), "done");
  ASSERT_TRUE(store_->Delete("job/1").ok());
  EXPECT_FALSE(store_->Get("job/1")->has_value());
  EXPECT_EQ(store_->Describe(), redis_.url());
}

TEST_F(RedisStoreTest, TtlIsSetAndEntriesExpire) {
  ASSERT_TRUE(store_->Put("eval/fail", "timeout", PutOptions{.ttl = std::chrono::seconds(1)}).ok());
  ASSERT_TRUE(store_->Put("eval/ok", "result").ok());
  long long ttl = RawTtl(redis_.port(), "eval/fail");
  EXPECT_GE(ttl, 0);
  EXPECT_LE(ttl, 1);
  EXPECT_EQ(RawTtl(redis_.port(), "eval/ok"), -1);  // no expiry
  EXPECT_TRUE(Eventually([&] { return !store_->Get("eval/fail")->has_value(); }));
  EXPECT_TRUE(store_->Get("eval/ok")->has_value());
}

TEST_F(RedisStoreTest, GetManyIsPipelinedAndOrdered) {
  std::vector<std::string> keys;
  for (int i = 0; i < 200; ++i) {
    keys.push_back("chunk/" + std::to_string(i));
    if (i % 3 == 0) {
      ASSERT_TRUE(store_->Put(keys.back(), absl::StrCat("v", i)).ok());
    }
  }
  auto values = store_->GetMany(keys);
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), keys.size());
  for (int i = 0; i < 200; ++i) {
    if (i % 3 == 0) {
      EXPECT_EQ((*values)[i], absl::StrCat("v", i));
    } else {
      EXPECT_FALSE((*values)[i].has_value()) << i;
    }
  }
  EXPECT_TRUE(store_->GetMany({})->empty());
}

TEST_F(RedisStoreTest, ListScansByLiteralPrefix) {
  for (const char* key : {"job/a", "job/b", "job*x", "jobs", "tree/a"}) {
    ASSERT_TRUE(store_->Overwrite(key, "x").ok());
  }
  for (int i = 0; i < 2500; ++i) ASSERT_TRUE(store_->Put("chunk/" + std::to_string(i), "c").ok());
  EXPECT_EQ(*store_->List("job/"), (std::vector<std::string>{"job/a", "job/b"}));
  EXPECT_EQ(*store_->List("job*"), std::vector<std::string>{"job*x"});
  EXPECT_EQ(store_->List("chunk/")->size(), 2500u);
}

TEST_F(RedisStoreTest, DatabaseNumberSelectsADatabase) {
  auto db1 = RedisStore::Create(redis_.url() + "/1");
  ASSERT_TRUE(db1.ok()) << db1.status();
  ASSERT_TRUE((*db1)->Put("k", "in db1").ok());
  EXPECT_FALSE(store_->Get("k")->has_value());
  EXPECT_EQ(**(*db1)->Get("k"), "in db1");
  EXPECT_EQ((*db1)->Describe(), redis_.url() + "/1");
}

TEST_F(RedisStoreTest, ConcurrentClientsShareThePool) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        std::string key = "k/" + std::to_string(t) + "/" + std::to_string(i);
        if (!store_->Put(key, key).ok()) ++failures;
        auto got = store_->Get(key);
        if (!got.ok() || *got != key) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store_->List("k/")->size(), 800u);
}

TEST_F(RedisStoreTest, ReconnectsAfterRestartOnTheSamePort) {
  ASSERT_TRUE(store_->Put("before", "1").ok());
  redis_.Stop();
  auto down = store_->Get("before");
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(down.status().message().find(redis_.url()), absl::string_view::npos) << down.status();
  EXPECT_NE(down.status().message().find("GET"), absl::string_view::npos) << down.status();
  EXPECT_EQ(store_->Put("during", "x").code(), absl::StatusCode::kUnavailable);

  ASSERT_TRUE(redis_.Start().ok());
  // The restarted server has no persistence: the old key is gone, the store works again.
  EXPECT_TRUE(Eventually([&] {
    auto got = store_->Get("before");
    return got.ok() && !got->has_value();
  }));
  ASSERT_TRUE(store_->Put("after", "2").ok());
  EXPECT_EQ(**store_->Get("after"), "2");
}

TEST(RedisStoreCreateTest, DeadPortIsUnavailableWithAHint) {
  int port = FreeLoopbackPort();
  std::string url = "redis://127.0.0.1:" + std::to_string(port);
  auto store = RedisStore::Create(url);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(store.status().message().find("cannot reach Redis at " + url), absl::string_view::npos)
      << store.status();
  EXPECT_NE(store.status().message().find("Connection refused"), absl::string_view::npos)
      << store.status();
  EXPECT_NE(store.status().message().find("--store dir:PATH"), absl::string_view::npos);
  EXPECT_EQ(OpenStore(url).status().code(), absl::StatusCode::kUnavailable);
}

TEST(RedisStoreCreateTest, BadUrls) {
  for (const char* url : {"redis://", "redis://:6379", "redis://host:notaport",
                          "redis://host:6379/x", "http://host:6379"}) {
    auto store = RedisStore::Create(url);
    EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument) << url;
  }
}

}  // namespace
}  // namespace kforge
