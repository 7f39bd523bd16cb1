// LocalStore: put/get, if_absent, TTL expiry, overwrite, delete, list and concurrent writers.
#include "common/local_store.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

// A clock the test moves by hand, so TTL tests never sleep.
struct ManualClock {
  std::atomic<int64_t> seconds{1'700'000'000};
  std::chrono::system_clock::time_point Now() const {
    return std::chrono::system_clock::time_point(std::chrono::seconds(seconds.load()));
  }
};

class LocalStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = LocalStore::Create((dir_ / "store").string(),
                                    LocalStoreOptions{[this] { return clock_.Now(); }});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  TempDir dir_;
  ManualClock clock_;
  std::unique_ptr<LocalStore> store_;
};

TEST_F(LocalStoreTest, PutGetAndBinaryValues) {
  std::string value("bin\0ary\nvalue", 13);
  ASSERT_TRUE(store_->Put("compile/abc", value).ok());
  auto got = store_->Get("compile/abc");
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, value);
  EXPECT_FALSE(store_->Get("compile/other")->has_value());
  ASSERT_TRUE(store_->Put("empty", "").ok());
  EXPECT_EQ(**store_->Get("empty"), "");
  EXPECT_EQ(store_->Describe(), "dir:" + (dir_ / "store").string());
}

TEST_F(LocalStoreTest, IfAbsentKeepsTheFirstWriter) {
  ASSERT_TRUE(store_->Put("eval/k", "first").ok());
  ASSERT_TRUE(store_->Put("eval/k", "second").ok());
  EXPECT_EQ(**store_->Get("eval/k"), "first");
  ASSERT_TRUE(store_->Put("eval/k", "third", PutOptions{.if_absent = false}).ok());
  EXPECT_EQ(**store_->Get("eval/k"), "third");
}

TEST_F(LocalStoreTest, TtlExpiryMakesKeysAbsent) {
  ASSERT_TRUE(store_->Put("eval/fail", "timeout", PutOptions{.ttl = std::chrono::seconds(60)}).ok());
  ASSERT_TRUE(store_->Put("eval/ok", "result").ok());
  clock_.seconds += 59;
  EXPECT_TRUE(store_->Get("eval/fail")->has_value());
  clock_.seconds += 2;
  EXPECT_FALSE(store_->Get("eval/fail")->has_value());
  EXPECT_TRUE(store_->Get("eval/ok")->has_value());
  EXPECT_EQ(*store_->List("eval/"), std::vector<std::string>{"eval/ok"});
  // An expired entry counts as absent for if_absent writes.
  ASSERT_TRUE(store_->Put("eval/fail", "retried").ok());
  EXPECT_EQ(**store_->Get("eval/fail"), "retried");
}

TEST_F(LocalStoreTest, OverwriteAndDelete) {
  ASSERT_TRUE(store_->Overwrite("job/1", "queued").ok());
  ASSERT_TRUE(store_->Overwrite("job/1", "running").ok());
  EXPECT_EQ(**store_->Get("job/1"), "running");
  ASSERT_TRUE(store_->Delete("job/1").ok());
  EXPECT_FALSE(store_->Get("job/1")->has_value());
  EXPECT_TRUE(store_->Delete("job/1").ok());  // deleting an absent key is fine
}

TEST_F(LocalStoreTest, ListReturnsOriginalKeysByPrefix) {
  for (const char* key : {"job/a", "job/b", "job/c/d", "jobs", "tree/a", "job/*?["}) {
    ASSERT_TRUE(store_->Overwrite(key, "x").ok());
  }
  auto jobs = store_->List("job/");
  ASSERT_TRUE(jobs.ok());
  std::sort(jobs->begin(), jobs->end());
  EXPECT_EQ(*jobs, (std::vector<std::string>{"job/*?[", "job/a", "job/b", "job/c/d"}));
  EXPECT_EQ(store_->List("")->size(), 6u);
  EXPECT_TRUE(store_->List("none/")->empty());
}

TEST_F(LocalStoreTest, GetManyAnswersInOrder) {
  ASSERT_TRUE(store_->Put("a", "1").ok());
  ASSERT_TRUE(store_->Put("c", "3").ok());
  auto values = store_->GetMany({"a", "b", "c"});
  ASSERT_TRUE(values.ok());
  ASSERT_EQ(values->size(), 3u);
  EXPECT_EQ((*values)[0], "1");
  EXPECT_FALSE((*values)[1].has_value());
  EXPECT_EQ((*values)[2], "3");
}

TEST_F(LocalStoreTest, ConcurrentWritersAgreeOnOneValuePerKey) {
  constexpr int kThreads = 8;
  constexpr int kKeys = 50;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kKeys; ++k) {
        std::string key = "compile/" + std::to_string(k);
        if (!store_->Put(key, "writer" + std::to_string(t) + std::string(1000, 'x')).ok()) {
          ++failures;
        }
        if (!store_->Overwrite("job/shared", std::string(4096, static_cast<char>('a' + t))).ok()) {
          ++failures;
        }
        auto got = store_->Get(key);
        if (!got.ok() || !got->has_value()) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store_->List("compile/")->size(), static_cast<size_t>(kKeys));
  // The mutable record holds exactly one writer's value, never a mix.
  std::string shared = **store_->Get("job/shared");
  ASSERT_EQ(shared.size(), 4096u);
  EXPECT_EQ(shared, std::string(4096, shared[0]));
  // No temp files are left behind.
  for (auto& entry : std::filesystem::recursive_directory_iterator(dir_ / "store")) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

TEST(LocalStoreCreateTest, UnwritableRootIsAClearError) {
  TempDir dir;
  std::ofstream(dir / "file") << "not a directory";
  auto store = LocalStore::Create((dir / "file" / "store").string());
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("--store"), absl::string_view::npos) << store.status();
}

TEST(OpenStoreTest, Urls) {
  TempDir dir;
  auto by_scheme = OpenStore("dir:" + (dir / "a").string());
  ASSERT_TRUE(by_scheme.ok()) << by_scheme.status();
  EXPECT_EQ((*by_scheme)->Describe(), "dir:" + (dir / "a").string());
  auto by_path = OpenStore((dir / "b").string());
  ASSERT_TRUE(by_path.ok()) << by_path.status();
  EXPECT_EQ(OpenStore("s3://bucket/x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenStore("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenStore("redis://").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kforge
