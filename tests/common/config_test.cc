// Config: layer precedence, typed getters and the errors that name key, value and origin.
#include "common/config.h"

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(ConfigTest, LayersDefaultsFileEnvFlags) {
  TempDir dir;
  WriteFile(dir / "kforge.json",
            R"({"store_url": "dir:/from/file", "workers": 3, "slots": 2,
                "worker": {"gpus": 8}, "tags": ["a", "b"]})");
  setenv("KFORGE_STORE_URL", "redis://from-env:6379", 1);
  setenv("KFORGE_SLOTS", "5", 1);
  Config config;
  config.SetDefault("store_url", "dir:/default");
  config.SetDefault("log_level", "info");
  config.SetDefault("workers", "1");
  ASSERT_TRUE(config.LoadFile((dir / "kforge.json").string()).ok());
  config.LoadEnvironment();
  config.Set("slots", "7", ConfigLayer::kFlag);
  // A later call from a lower layer must not override a higher one.
  config.Set("slots", "9", ConfigLayer::kFile, "late file");
  unsetenv("KFORGE_STORE_URL");
  unsetenv("KFORGE_SLOTS");

  EXPECT_EQ(*config.GetString("log_level"), "info");
  EXPECT_EQ(*config.GetInt("workers"), 3);
  EXPECT_EQ(*config.GetString("store_url"), "redis://from-env:6379");
  EXPECT_EQ(*config.GetInt("slots"), 7);
  EXPECT_EQ(*config.GetInt("worker.gpus"), 8);
  EXPECT_EQ(*config.GetString("tags"), R"(["a","b"])");
  EXPECT_NE(config.Origin("workers").find("kforge.json"), std::string::npos);
  EXPECT_NE(config.Origin("store_url").find("KFORGE_STORE_URL"), std::string::npos);
  EXPECT_EQ(config.Origin("missing"), "");
}

TEST(ConfigTest, TypedGetters) {
  Config config;
  config.Set("ratio", "0.25");
  config.Set("on", "YES");
  config.Set("off", "0");
  config.Set("timeout", "1m30s");
  config.Set("bare_timeout", "2.5");
  EXPECT_DOUBLE_EQ(*config.GetDouble("ratio"), 0.25);
  EXPECT_TRUE(*config.GetBool("on"));
  EXPECT_FALSE(*config.GetBool("off"));
  EXPECT_EQ(*config.GetDuration("timeout"), absl::Seconds(90));
  EXPECT_EQ(*config.GetDuration("bare_timeout"), absl::Milliseconds(2500));
}

TEST(ConfigTest, ErrorsNameKeyValueAndOrigin) {
  setenv("KFORGE_WORKERS", "many", 1);
  Config config;
  config.LoadEnvironment();
  unsetenv("KFORGE_WORKERS");
  config.Set("timeout", "soon", ConfigLayer::kFlag, "flag --timeout");

  absl::Status bad_int = config.GetInt("workers").status();
  EXPECT_EQ(bad_int.code(), absl::StatusCode::kInvalidArgument);
  for (const char* part : {"workers", "many", "KFORGE_WORKERS"}) {
    EXPECT_NE(bad_int.message().find(part), absl::string_view::npos) << bad_int;
  }
  absl::Status bad_duration = config.GetDuration("timeout").status();
  EXPECT_NE(bad_duration.message().find("--timeout"), absl::string_view::npos) << bad_duration;
  EXPECT_EQ(config.GetBool("timeout").status().code(), absl::StatusCode::kInvalidArgument);

  absl::Status missing = config.GetString("store_url").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("KFORGE_STORE_URL"), absl::string_view::npos) << missing;
}

TEST(ConfigTest, FileErrors) {
  TempDir dir;
  Config config;
  absl::Status missing = config.LoadFile((dir / "absent.json").string());
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("absent.json"), absl::string_view::npos);

  WriteFile(dir / "broken.json", "{\"workers\": 3,");
  absl::Status broken = config.LoadFile((dir / "broken.json").string());
  EXPECT_EQ(broken.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(broken.message().find("broken.json"), absl::string_view::npos);

  WriteFile(dir / "list.json", "[1, 2]");
  EXPECT_EQ(config.LoadFile((dir / "list.json").string()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(config.Get("workers").has_value());
}

}  // namespace
}  // namespace kforge
