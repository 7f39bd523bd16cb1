// PutBlob/GetBlob over a LocalStore: chunking beyond 4 MiB, verification, LookupOrMiss.
#include "common/blob_store.h"

#include <random>

#include "common/digest.h"
#include "common/local_store.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

std::string RandomBytes(size_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string data(size, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  return data;
}

class BlobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = LocalStore::Create(dir_.str());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  TempDir dir_;
  std::unique_ptr<LocalStore> store_;
};

TEST_F(BlobStoreTest, LargeBlobRoundTripsInChunks) {
  std::string data = RandomBytes(2 * kBlobChunkBytes + 12345, 1);
  auto digest = PutBlob(*store_, data);
  ASSERT_TRUE(digest.ok()) << digest.status();
  EXPECT_EQ(digest->sha256(), Sha256Hex(data));
  EXPECT_EQ(digest->size_bytes(), static_cast<int64_t>(data.size()));
  EXPECT_EQ(store_->List("chunk/")->size(), 3u);
  EXPECT_EQ(*store_->List("blob/"), std::vector<std::string>{"blob/" + digest->sha256()});
  auto back = GetBlob(*store_, *digest);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == data);
  // Idempotent.
  EXPECT_EQ(PutBlob(*store_, data)->sha256(), digest->sha256());
}

TEST_F(BlobStoreTest, SmallAndEmptyBlobs) {
  for (std::string data : {std::string(), std::string("tiny")}) {
    auto digest = PutBlob(*store_, data);
    ASSERT_TRUE(digest.ok()) << digest.status();
    EXPECT_EQ(*GetBlob(*store_, *digest), data);
  }
}

TEST_F(BlobStoreTest, CorruptChunkIsDetected) {
  std::string data = RandomBytes(kBlobChunkBytes + 10, 2);
  auto digest = PutBlob(*store_, data);
  ASSERT_TRUE(digest.ok());
  std::string second_chunk_key = "chunk/" + Sha256Hex(std::string_view(data).substr(kBlobChunkBytes));
  ASSERT_TRUE(store_->Overwrite(second_chunk_key, "flipped!!!").ok());
  auto back = GetBlob(*store_, *digest);
  EXPECT_EQ(back.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(back.status().message().find("chunk 1"), absl::string_view::npos) << back.status();
}

TEST_F(BlobStoreTest, MissingChunkAndMissingBlobAreNotFound) {
  std::string data = RandomBytes(kBlobChunkBytes + 10, 3);
  auto digest = PutBlob(*store_, data);
  ASSERT_TRUE(digest.ok());
  ASSERT_TRUE(store_->Delete("chunk/" + Sha256Hex(std::string_view(data).substr(0, kBlobChunkBytes))).ok());
  auto back = GetBlob(*store_, *digest);
  EXPECT_EQ(back.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(back.status().message().find("chunk 0"), absl::string_view::npos) << back.status();

  EXPECT_EQ(GetBlob(*store_, MakeDigest("never stored")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(BlobStoreTest, WrongSizeInDigestIsDataLoss) {
  auto digest = PutBlob(*store_, "payload");
  ASSERT_TRUE(digest.ok());
  v1::Digest wrong = *digest;
  wrong.set_size_bytes(digest->size_bytes() + 1);
  EXPECT_EQ(GetBlob(*store_, wrong).status().code(), absl::StatusCode::kDataLoss);
}

// A Store whose backend is down, to drive LookupOrMiss's error path (no real store fails
// on demand in a unit test).
class FakeUnavailableStore final : public Store {
 public:
  absl::StatusOr<std::optional<std::string>> Get(std::string_view) override { return Down(); }
  absl::StatusOr<std::vector<std::optional<std::string>>> GetMany(
      const std::vector<std::string>&) override {
    return Down();
  }
  absl::Status Put(std::string_view, std::string_view, const PutOptions&) override {
    return Down();
  }
  absl::Status Overwrite(std::string_view, std::string_view) override { return Down(); }
  absl::Status Delete(std::string_view) override { return Down(); }
  absl::StatusOr<std::vector<std::string>> List(std::string_view) override { return Down(); }
  std::string Describe() const override { return "fake-down"; }

 private:
  static absl::Status Down() { return absl::UnavailableError("backend down"); }
};

TEST_F(BlobStoreTest, LookupOrMissTurnsErrorsIntoMisses) {
  ASSERT_TRUE(store_->Put("compile/x", "cubin").ok());
  EXPECT_EQ(LookupOrMiss(*store_, "compile/x"), "cubin");
  EXPECT_FALSE(LookupOrMiss(*store_, "compile/y").has_value());
  FakeUnavailableStore down;
  EXPECT_FALSE(LookupOrMiss(down, "compile/x").has_value());
}

}  // namespace
}  // namespace kforge
