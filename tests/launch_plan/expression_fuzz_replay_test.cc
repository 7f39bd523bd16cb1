// Replays the fuzzer entry point over the seed corpus and a few thousand deterministic
// pseudo-random strings, so the normal (gcc) build exercises what the fuzzer checks.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int RunOne(const std::string& input) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

TEST(ExpressionFuzzReplayTest, SeedCorpus) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(KFORGE_FUZZ_CORPUS_DIR)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream content;
    content << in.rdbuf();
    EXPECT_EQ(RunOne(content.str()), 0) << entry.path();
    ++files;
  }
  EXPECT_GE(files, 5);
}

TEST(ExpressionFuzzReplayTest, PseudoRandomStrings) {
  // Biased towards the grammar's own tokens so inputs get past the first character.
  static const char* const kTokens[] = {"(",
                                        ")",
                                        "+",
                                        "-",
                                        "*",
                                        "/",
                                        "%",
                                        ",",
                                        " ",
                                        "0",
                                        "1",
                                        "7",
                                        "9223372036854775807",
                                        "N",
                                        "M",
                                        "ZERO",
                                        "BIG",
                                        "SMALL",
                                        "ceil_div",
                                        "min",
                                        "max",
                                        "in0_numel",
                                        "x",
                                        "{",
                                        "}",
                                        "[",
                                        "]",
                                        "\"",
                                        ":",
                                        "\"launches\"",
                                        "\"entry\"",
                                        "\"grid\"",
                                        "\"block\"",
                                        "\"let\"",
                                        "\"cluster\"",
                                        "\"shared_bytes\"",
                                        "\"k\"",
                                        "\xff",
                                        "\0"};
  std::mt19937_64 rng(20240611);
  for (int i = 0; i < 5000; ++i) {
    std::string input;
    int length = static_cast<int>(rng() % 40);
    for (int t = 0; t < length; ++t) {
      if (rng() % 8 == 0) {
        input.push_back(static_cast<char>(rng() % 256));
      } else {
        input += kTokens[rng() % std::size(kTokens)];
      }
    }
    ASSERT_EQ(RunOne(input), 0) << input;
  }
}

}  // namespace
