// Unit tests of the tokenizer pieces on small synthetic tokenizer.json files written here:
// byte-level alphabet, UTF-8 repair, JavaScript regex translation, BPE merge order, added
// tokens, BOS/EOS, decoding of ill-formed bytes and the streaming decoder, and load errors.
// The DeepSeek files themselves are tested in tokenizer_deepseek_test.cpp and, against the
// reference implementation, in tests/tokenizer_parity.
#include "text/tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "text/added_tokens.h"
#include "text/byte_level.h"
#include "text/js_regex.h"
#include "text/tokenizer_impl.h"

namespace flint::text {
namespace {

using nlohmann::json;

std::string spell(std::string_view bytes) { return ByteLevelAlphabet::get().encode(bytes); }

// A tiny byte-level tokenizer: all 256 bytes (ids 0..255), then the given merges (each merged
// token gets the next id), then the added tokens.
struct TinySpec {
  std::vector<std::pair<std::string, std::string>> merges;  // raw bytes
  json added = json::array();
  json pre_tokenizer = json::parse(R"({"type": "ByteLevel", "add_prefix_space": false,
                                       "trim_offsets": true, "use_regex": false})");
  json config = json::parse(R"({"add_bos_token": false, "clean_up_tokenization_spaces": false})");
  json normalizer = nullptr;
};

std::pair<std::string, std::string> tiny_files(const TinySpec& spec) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[spell(std::string(1, static_cast<char>(b)))] = b;
  json merges = json::array();
  int next = 256;
  for (const auto& [a, b] : spec.merges) {
    std::string merged = spell(a + b);
    if (!vocab.contains(merged)) vocab[merged] = next++;
    merges.push_back(spell(a) + " " + spell(b));
  }
  json root = {{"version", "1.0"},
               {"truncation", nullptr},
               {"padding", nullptr},
               {"added_tokens", spec.added},
               {"normalizer", spec.normalizer},
               {"pre_tokenizer", spec.pre_tokenizer},
               {"post_processor", {{"type", "ByteLevel"}}},
               {"decoder", {{"type", "ByteLevel"}}},
               {"model",
                {{"type", "BPE"},
                 {"dropout", nullptr},
                 {"unk_token", nullptr},
                 {"fuse_unk", false},
                 {"byte_fallback", false},
                 {"vocab", vocab},
                 {"merges", merges}}}};
  return {root.dump(), spec.config.dump()};
}

Tokenizer tiny(const TinySpec& spec) {
  auto [tokenizer_json, config_json] = tiny_files(spec);
  return Tokenizer::from_json(tokenizer_json, config_json, "tiny");
}

json added(int id, std::string content, bool special, bool lstrip = false, bool rstrip = false) {
  return {{"id", id},         {"content", content},  {"single_word", false}, {"lstrip", lstrip},
          {"rstrip", rstrip}, {"normalized", false}, {"special", special}};
}

// ---- byte-level alphabet and UTF-8 ----

TEST(ByteLevel, AlphabetMatchesGpt2) {
  const auto& a = ByteLevelAlphabet::get();
  EXPECT_EQ(a.code_point(' '), U'\u0120');   // Ġ
  EXPECT_EQ(a.code_point('\n'), U'\u010A');  // Ċ
  EXPECT_EQ(a.code_point('a'), U'a');
  EXPECT_EQ(a.code_point(0xA1), U'\u00A1');
  EXPECT_EQ(a.code_point(0xAD), U'\u0143');  // the last of the 68 remapped bytes
  EXPECT_EQ(a.code_point(0x7F), U'\u0121');
  int identity = 0;
  for (int b = 0; b < 256; ++b) {
    char32_t cp = a.code_point(static_cast<uint8_t>(b));
    identity += cp == static_cast<char32_t>(b);
    ASSERT_EQ(a.byte(cp), b);
  }
  EXPECT_EQ(identity, 188);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(a.decode(a.encode(all)), all);
  EXPECT_EQ(a.encode(" the"), "\xC4\xA0the");
  EXPECT_FALSE(a.decode("\xEF\xBD\x9C").has_value());  // '｜' is not in the alphabet
}

std::string utf8_decode_all(std::string_view bytes) {
  std::string out;
  Utf8Decoder d;
  d.push(bytes, out);
  d.finish(out);
  return out;
}

TEST(Utf8, DecoderReplacesMaximalSubparts) {
  const std::string r(kReplacementCharacter);
  EXPECT_EQ(utf8_decode_all("a\xE4\xB8\xAD"
                            "b"),
            "a中b");
  EXPECT_EQ(utf8_decode_all("\xE4\xB8"), r);  // truncated at the end
  EXPECT_EQ(utf8_decode_all("\xE4\xB8"
                            "A"),
            r + "A");                                             // cut short by ASCII
  EXPECT_EQ(utf8_decode_all("\xC0\x80"), r + r);                  // overlong lead
  EXPECT_EQ(utf8_decode_all("\xF0\x80\x80"), r + r + r);          // F0 needs 90..BF next
  EXPECT_EQ(utf8_decode_all("\xED\xA0\x80"), r + r + r);          // surrogate
  EXPECT_EQ(utf8_decode_all("\xF4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_EQ(utf8_decode_all("\xF0\x9F\x98"), r);                  // 3 of 4 bytes: one U+FFFD
  EXPECT_EQ(utf8_decode_all("\x80\xBF"), r + r);
  EXPECT_EQ(utf8_decode_all("\xEF\xBB\xBFx"), "\xEF\xBB\xBFx");  // a BOM is kept
}

TEST(Utf8, DecoderIsTheSameInAnyPieces) {
  std::mt19937 rng(7);
  const std::string alphabet =
      "a\x80\xBF\xC2\xC3\xDF\xE0\xE4\xED\xEF\xF0\xF4\xF5\xFF\xA0\x9F\x90\xB8";
  for (int round = 0; round < 2000; ++round) {
    std::string bytes;
    int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) bytes.push_back(alphabet[rng() % alphabet.size()]);
    std::string whole = utf8_decode_all(bytes);
    ASSERT_TRUE(is_valid_utf8(whole));
    std::string pieces;
    Utf8Decoder d;
    for (char c : bytes) {
      std::size_t before = pieces.size();
      d.push(static_cast<uint8_t>(c), pieces);
      ASSERT_TRUE(is_valid_utf8(std::string_view(pieces).substr(before)));
    }
    d.finish(pieces);
    ASSERT_EQ(pieces, whole);
  }
}

TEST(Utf8, ValidationAndRepair) {
  EXPECT_TRUE(is_valid_utf8("plain ascii text, longer than eight bytes"));
  EXPECT_TRUE(is_valid_utf8("中文 😀 \xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(is_valid_utf8("abcdefgh\xFF"));
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));
  EXPECT_FALSE(is_valid_utf8("\xE4\xB8"));
  std::string storage;
  std::string_view ok = "fine";
  EXPECT_EQ(to_valid_utf8(ok, storage).data(), ok.data());  // no copy
  EXPECT_EQ(to_valid_utf8("a\xFF"
                          "b",
                          storage),
            "a\xEF\xBF\xBD"
            "b");
}

// ---- JavaScript regular expressions on PCRE2 ----

std::vector<std::string> matches(std::string_view pattern, std::string_view subject) {
  JsRegex regex(pattern, "test");
  std::vector<std::string> out;
  regex.for_each_match(
      subject, [&](std::size_t b, std::size_t e) { out.emplace_back(subject.substr(b, e - b)); });
  return out;
}

TEST(JsRegex, WhitespaceIsJavaScriptWhitespace) {
  // U+FEFF and U+3000 are \s in JavaScript; U+0085 and U+200B are not.
  EXPECT_EQ(matches(R"(\s+)",
                    "a\xEF\xBB\xBF\xE3\x80\x80"
                    "b"),
            (std::vector<std::string>{"\xEF\xBB\xBF\xE3\x80\x80"}));
  EXPECT_TRUE(matches(R"(\s)", "\xC2\x85\xE2\x80\x8B").empty());
  EXPECT_EQ(matches(R"(\S+)", "a\xC2\x85 b"), (std::vector<std::string>{"a\xC2\x85", "b"}));
  EXPECT_EQ(matches(R"([\s,]+)", "a ,\tb"), (std::vector<std::string>{" ,\t"}));
}

TEST(JsRegex, AsciiClassesStayAscii) {
  // \d and \w are ASCII in JavaScript even with the u flag.
  EXPECT_EQ(matches(R"(\d+)", "12٣4"), (std::vector<std::string>{"12", "4"}));
  EXPECT_EQ(matches(R"(\w+)", "héllo"), (std::vector<std::string>{"h", "llo"}));
  EXPECT_EQ(matches(R"(\p{N}+)", "12٣4"), (std::vector<std::string>{"12٣4"}));
  // JavaScript's long and key=value property names.
  EXPECT_EQ(matches(R"(\p{Letter}+)", "ab1é"), (std::vector<std::string>{"ab", "é"}));
  EXPECT_EQ(matches(R"(\p{gc=Lu})", "aBc"), (std::vector<std::string>{"B"}));
  EXPECT_EQ(matches(R"(\p{Script=Han}+)", "ab中文"), (std::vector<std::string>{"中文"}));
}

TEST(JsRegex, LookaheadAndLineEnds) {
  // The DeepSeek pattern's `\s+(?!\S)` leaves the last space for the next word.
  EXPECT_EQ(matches(R"(\s+(?!\S)|\s+)", "a   b"), (std::vector<std::string>{"  ", " "}));
  EXPECT_EQ(matches(R"(\s*[\r\n]+)", "x \r\n\r\ny"), (std::vector<std::string>{" \r\n\r\n"}));
  EXPECT_EQ(matches("a$", "a\n"), std::vector<std::string>{});  // $ is the end only
  EXPECT_EQ(matches(".", "\n\r\xE2\x80\xA8x"), std::vector<std::string>{"x"});
}

TEST(JsRegex, EscapesAndEmptyMatches) {
  EXPECT_EQ(matches(R"(\u4e2d|\u{1F600}|\uD83D\uDE01)", "中😀😁"),
            (std::vector<std::string>{"中", "😀", "😁"}));
  EXPECT_EQ(matches(R"(\v)", "\v"), std::vector<std::string>{"\v"});
  EXPECT_EQ(matches(R"([^])", "中"), std::vector<std::string>{"中"});
  EXPECT_TRUE(matches(R"([])", "abc").empty());
  // An empty match moves on by one code point, never into the middle of one.
  EXPECT_EQ(matches("x*", "中x").size(), 3u);  // "", "x", "" (at the end)
  EXPECT_THROW(JsRegex(R"(\Aabc)", "test"), Error);
  EXPECT_THROW(JsRegex(R"([\S])", "test"), Error);
  EXPECT_THROW(JsRegex("(abc", "test"), Error);
}

// ---- BPE ----

TEST(Bpe, MergesLowestRankFirstAndLeftmostOnTies) {
  TinySpec spec;
  spec.merges = {{"a", "a"}, {"aa", "a"}, {"b", "c"}, {"a", "bc"}};
  Tokenizer t = tiny(spec);
  int32_t aa = t.token_id("aa"), aaa = t.token_id("aaa"), bc = t.token_id("bc"),
          abc = t.token_id("abc");
  ASSERT_GT(aa, 0);
  // "aaaa": (a,a) at 0 and 2 merge first (ties go left), then no (aa, aa) merge exists.
  EXPECT_EQ(t.encode("aaaa"), (std::vector<int32_t>{aa, aa}));
  EXPECT_EQ(t.encode("aaa"), (std::vector<int32_t>{aaa}));
  // "abc": (b,c) has a lower rank than any merge with the first a... then (a, bc).
  EXPECT_EQ(t.encode("abc"), (std::vector<int32_t>{abc}));
  EXPECT_EQ(t.encode("aabc"), (std::vector<int32_t>{aa, bc}));
  EXPECT_EQ(t.encode(""), std::vector<int32_t>{});
  EXPECT_EQ(t.decode(t.encode("aabc")), "aabc");
}

TEST(Bpe, ScanAndHeapAgreeOnRandomWords) {
  TinySpec spec;
  std::mt19937 rng(3);
  const std::string letters = "abcd";
  std::vector<std::string> known = {"a", "b", "c", "d"};
  while (spec.merges.size() < 80) {
    const std::string& x = known[rng() % known.size()];
    const std::string& y = known[rng() % known.size()];
    std::string xy = x + y;
    if (xy.size() > 6 || std::find(known.begin(), known.end(), xy) != known.end()) continue;
    spec.merges.emplace_back(x, y);
    known.push_back(xy);
  }
  Tokenizer t = tiny(spec);
  const BpeModel& bpe = t.impl().bpe;
  for (int round = 0; round < 3000; ++round) {
    std::string word;
    std::size_t n = 1 + rng() % 60;
    for (std::size_t i = 0; i < n; ++i) word += letters[rng() % 4];
    std::vector<int32_t> scan, heap, cached;
    bpe.encode_word_uncached(word, BpeModel::Algorithm::kScan, scan);
    bpe.encode_word_uncached(word, BpeModel::Algorithm::kHeap, heap);
    bpe.encode_word(word, cached);
    bpe.encode_word(word, cached);  // second time from the cache
    ASSERT_EQ(scan, heap) << word;
    ASSERT_EQ(cached.size(), 2 * scan.size());
    ASSERT_TRUE(std::equal(scan.begin(), scan.end(), cached.begin()));
    ASSERT_TRUE(std::equal(scan.begin(), scan.end(), cached.begin() + scan.size()));
  }
}

// ---- pre-tokenizer and added tokens ----

TEST(PreTokenize, IsolatedSplitsKeepEverything) {
  TinySpec spec;
  spec.pre_tokenizer = json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": false},
      {"type": "Split", "pattern": {"String": "."}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]})");
  spec.merges = {{"1", "2"}, {"3", "4"}, {"12", "3"}, {"a", "."}};
  Tokenizer t = tiny(spec);
  std::vector<std::string_view> words;
  t.impl().pre_tokenizer.split("ab12345.c", words);
  EXPECT_EQ(words, (std::vector<std::string_view>{"ab", "123", "45", ".", "c"}));
  // "1234" is split 123|4, so the (3,4) merge never applies; "a." is split too.
  EXPECT_EQ(t.encode("1234a."), (std::vector<int32_t>{t.token_id("123"), '4', 'a', '.'}));
}

TEST(AddedTokens, LongestMatchFromTheLeft) {
  TinySpec spec;
  spec.added = json::array(
      {added(300, "<|a|>", true), added(301, "<|a|>x", false), added(302, "<|", false)});
  Tokenizer t = tiny(spec);
  EXPECT_EQ(t.encode("q<|a|>xy<|a|>"), (std::vector<int32_t>{'q', 301, 'y', 300}));
  EXPECT_EQ(t.encode("<|<|a"), (std::vector<int32_t>{302, 302, 'a'}));
  // A partial token is plain text.
  EXPECT_EQ(t.encode("<|a"), (std::vector<int32_t>{302, 'a'}));
  // Untrusted text can be encoded with added tokens as plain text.
  std::vector<int32_t> plain;
  t.encode("q<|a|>", false, plain, /*match_added_tokens=*/false);
  EXPECT_EQ(plain, (std::vector<int32_t>{'q', '<', '|', 'a', '|', '>'}));
  EXPECT_EQ(t.token_id("<|a|>"), 300);
  EXPECT_EQ(t.token_text(300), "<|a|>");
  EXPECT_TRUE(t.is_special(300));
  EXPECT_FALSE(t.is_special(301));
  EXPECT_TRUE(t.is_added(301));
  EXPECT_EQ(t.vocab_size(), 303);
}

TEST(AddedTokens, StripTrimsJavaScriptWhitespace) {
  TinySpec spec;
  spec.added = json::array({added(300, "<L>", false, /*lstrip=*/true),
                            added(301, "<R>", false, false, /*rstrip=*/true)});
  Tokenizer t = tiny(spec);
  // "\xE3\x80\x80" is U+3000 (whitespace), "\xE2\x80\x8B" U+200B (not whitespace).
  EXPECT_EQ(t.encode("a \t<L>b"), (std::vector<int32_t>{'a', 300, 'b'}));
  EXPECT_EQ(t.encode("<R>\xE3\x80\x80 c"), (std::vector<int32_t>{301, 'c'}));
  EXPECT_EQ(t.encode("<R>  "), (std::vector<int32_t>{301}));
  EXPECT_EQ(t.encode("<R>\xE2\x80\x8B").size(), 4u);
}

TEST(SpecialTokens, BosAndEosFollowTheConfig) {
  TinySpec spec;
  spec.added = json::array({added(300, "<s>", true), added(301, "</s>", true)});
  spec.config = json::parse(R"({"add_bos_token": true, "add_eos_token": true,
      "bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>",
      "clean_up_tokenization_spaces": false, "model_max_length": 1e30})");
  Tokenizer t = tiny(spec);
  EXPECT_EQ(t.bos_id(), 300);
  EXPECT_EQ(t.eos_id(), 301);
  EXPECT_EQ(t.encode("x"), (std::vector<int32_t>{300, 'x', 301}));
  EXPECT_EQ(t.encode("x", /*add_special_tokens=*/false), (std::vector<int32_t>{'x'}));
  EXPECT_EQ(t.encode(""), (std::vector<int32_t>{300, 301}));
  EXPECT_EQ(t.model_max_length(), INT64_MAX);
  std::vector<int32_t> ids = {300, 'h', 'i', 301};
  EXPECT_EQ(t.decode(ids), "<s>hi</s>");
  EXPECT_EQ(t.decode(ids, /*skip_special_tokens=*/true), "hi");
}

TEST(Encode, InvalidUtf8BecomesReplacementCharacters) {
  TinySpec spec;
  Tokenizer t = tiny(spec);
  // U+FFFD is EF BF BD: three single-byte tokens in this vocabulary.
  EXPECT_EQ(t.encode("a\xFF"), (std::vector<int32_t>{'a', 0xEF, 0xBF, 0xBD}));
}

// ---- decoding ----

TEST(Decode, IllFormedBytesAndAddedTokens) {
  TinySpec spec;
  spec.added = json::array({added(300, "<|x|>", false), added(301, "<s>", true)});
  Tokenizer t = tiny(spec);
  const std::string r(kReplacementCharacter);
  std::vector<int32_t> whole = {0xE4, 0xB8, 0xAD};
  EXPECT_EQ(t.decode(whole), "中");
  // An added token ends the byte run: E4 B8 becomes one U+FFFD, AD another.
  std::vector<int32_t> split = {0xE4, 0xB8, 300, 0xAD};
  EXPECT_EQ(t.decode(split), r + "<|x|>" + r);
  // A skipped special token does not end the run.
  std::vector<int32_t> skipped = {0xE4, 0xB8, 301, 0xAD};
  EXPECT_EQ(t.decode(skipped, true), "中");
  EXPECT_EQ(t.decode(skipped, false), r + "<s>" + r);
  std::vector<int32_t> bad = {'a', 999};
  EXPECT_THROW(t.decode(bad), Error);
  std::vector<int32_t> negative = {-1};
  EXPECT_THROW(t.decode(negative), Error);
}

TEST(Decode, CleanUpTokenizationSpacesWhenConfigured) {
  TinySpec spec;
  spec.config = json::parse(R"({"add_bos_token": false})");  // clean-up defaults to true
  Tokenizer t = tiny(spec);
  auto bytes = [](std::string_view s) {
    std::vector<int32_t> ids;
    for (char c : s) ids.push_back(static_cast<uint8_t>(c));
    return ids;
  };
  EXPECT_EQ(t.decode(bytes("a , b . I do n't know it 's")), "a, b. I don't know it's");
}

// Feeds `ids` to a StreamDecoder and checks each piece is valid UTF-8 and the whole equals
// decode().
void expect_stream_matches_decode(const Tokenizer& t, const std::vector<int32_t>& ids,
                                  bool skip_special) {
  StreamDecoder stream(t, skip_special);
  std::string streamed;
  for (int32_t id : ids) {
    std::string piece = stream.push(id);
    ASSERT_TRUE(is_valid_utf8(piece));
    streamed += piece;
  }
  std::string last = stream.flush();
  ASSERT_TRUE(is_valid_utf8(last));
  streamed += last;
  EXPECT_FALSE(stream.has_pending());
  ASSERT_EQ(streamed, t.decode(ids, skip_special));
}

TEST(StreamDecoder, NeverEmitsPartOfACharacter) {
  TinySpec spec;
  Tokenizer t = tiny(spec);
  // Every split of every character of this text: one byte per token.
  const std::string text = "a中😀é\xEF\xBF\xBDz";
  std::vector<int32_t> ids;
  for (char c : text) ids.push_back(static_cast<uint8_t>(c));
  StreamDecoder stream(t);
  std::string out;
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(stream.push(id));
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "", "", "中", "", "", "", "😀", "", "é", "", "",
                                              "\xEF\xBF\xBD", "z"}));
  EXPECT_EQ(stream.flush(), "");
}

TEST(StreamDecoder, MatchesDecodeOnRandomBytesAndTokens) {
  TinySpec spec;
  spec.merges = {{"\xE4", "\xB8"}, {"\xF0\x9F", "\x98"}, {"\xF0", "\x9F"}};
  spec.added = json::array({added(300, "<|x|>", false), added(301, "<s>", true)});
  for (bool clean_up : {false, true}) {
    spec.config["clean_up_tokenization_spaces"] = clean_up;
    Tokenizer t = tiny(spec);
    std::vector<int32_t> pool = {0xE4,
                                 0xB8,
                                 0xAD,
                                 0xF0,
                                 0x9F,
                                 0x98,
                                 0x80,
                                 0xFF,
                                 'a',
                                 ' ',
                                 '.',
                                 '\'',
                                 'n',
                                 't',
                                 's',
                                 300,
                                 301,
                                 t.token_id(spell("\xE4\xB8")),
                                 t.token_id(spell("\xF0\x9F\x98"))};
    std::mt19937 rng(11);
    for (int round = 0; round < 3000; ++round) {
      std::vector<int32_t> ids;
      std::size_t n = rng() % 16;
      for (std::size_t i = 0; i < n; ++i) ids.push_back(pool[rng() % pool.size()]);
      expect_stream_matches_decode(t, ids, round % 2 == 0);
    }
  }
}

// ---- loading errors ----

TEST(Load, RejectsWhatItCannotReproduce) {
  auto expect_error = [](TinySpec spec, std::string_view fragment) {
    auto [tokenizer_json, config_json] = tiny_files(spec);
    try {
      Tokenizer::from_json(tokenizer_json, config_json, "dir");
      ADD_FAILURE() << "no error, expected one mentioning " << fragment;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  TinySpec nfc;
  nfc.normalizer = json::parse(R"({"type": "NFC"})");
  expect_error(nfc, "dir/tokenizer.json field normalizer");
  TinySpec metaspace;
  metaspace.pre_tokenizer = json::parse(R"({"type": "Metaspace"})");
  expect_error(metaspace, "field pre_tokenizer.type");
  TinySpec merged;
  merged.pre_tokenizer = json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "MergedWithPrevious"},
      {"type": "ByteLevel", "add_prefix_space": false}]})");
  expect_error(merged, "pretokenizers[0].behavior");
  TinySpec bad_regex;
  bad_regex.pre_tokenizer = json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "\\Aa"}, "behavior": "Isolated"},
      {"type": "ByteLevel", "add_prefix_space": false}]})");
  expect_error(bad_regex, "pretokenizers[0].pattern");
  TinySpec single_word;
  single_word.added = json::array({added(300, "x", false)});
  single_word.added[0]["single_word"] = true;
  expect_error(single_word, "added_tokens[0].single_word");
  TinySpec missing_bos;
  missing_bos.config = json::parse(R"({"add_bos_token": true})");
  expect_error(missing_bos, "dir/tokenizer_config.json sets add_bos_token");
  TinySpec unknown_bos;
  unknown_bos.config = json::parse(R"({"add_bos_token": true, "bos_token": "<nope>"})");
  expect_error(unknown_bos, "field bos_token");

  EXPECT_THROW(Tokenizer::from_json("{", "{}", "dir"), Error);
  try {
    Tokenizer::load("/nonexistent/flint/model");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/flint/model/tokenizer.json"),
              std::string::npos);
  }
}

TEST(Load, RejectsMalformedVocabularyAndMerges) {
  TinySpec spec;
  spec.merges = {{"a", "b"}};
  auto [tokenizer_json, config_json] = tiny_files(spec);
  auto expect_error = [&](const std::function<void(json&)>& edit, std::string_view fragment) {
    json root = json::parse(tokenizer_json);
    edit(root);
    try {
      Tokenizer::from_json(root.dump(), config_json, "dir");
      ADD_FAILURE() << "no error, expected one mentioning " << fragment;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_error([](json& r) { r["model"]["vocab"]["zz"] = "7"; }, "model.vocab: id of \"zz\"");
  expect_error([](json& r) { r["model"]["vocab"]["zz"] = json::array({7}); }, "model.vocab");
  expect_error([](json& r) { r["model"]["vocab"] = json::array(); }, "model.vocab: missing");
  expect_error([](json& r) { r["model"]["merges"][0] = 5; }, "model.merges[0]");
  expect_error([](json& r) { r["model"]["merges"][0] = json::array({"a"}); }, "model.merges[0]");
  expect_error([](json& r) { r["model"]["merges"][0] = "ab"; }, "model.merges[0]");
  expect_error([](json& r) { r["model"]["merges"][0] = "a q"; }, "\"aq\" is not in the vocabulary");
  expect_error([](json& r) { r["model"].erase("merges"); }, "model.merges: missing");
  // Keys named like the captured ones elsewhere in the file are ordinary fields.
  json root = json::parse(tokenizer_json);
  root["decoder"]["vocab"] = json::object({{"x", 1}});
  root["merges"] = json::array({"q r"});
  EXPECT_EQ(Tokenizer::from_json(root.dump(), config_json).encode("ab").size(), 1u);
}

TEST(Load, AcceptsPairMergesAndStringMerges) {
  TinySpec spec;
  spec.merges = {{"a", "b"}};
  auto [tokenizer_json, config_json] = tiny_files(spec);
  json root = json::parse(tokenizer_json);
  root["model"]["merges"] = json::array({json::array({"a", "b"})});
  Tokenizer t = Tokenizer::from_json(root.dump(), config_json);
  EXPECT_EQ(t.encode("ab"), std::vector<int32_t>{t.token_id("ab")});
}

}  // namespace
}  // namespace flint::text
