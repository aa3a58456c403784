// Tokenizer speed: encoding (MB/s of input text) for English prose, source code, Chinese and
// a mix of the three, the pieces of encoding on their own (regex pre-tokenization, BPE without
// the word cache), decoding and streaming decoding (MB/s of output text), and loading.
//
// The texts are generated from a fixed seed (a few MB, no files committed): English and
// Chinese words follow a Zipf distribution over a large synthetic vocabulary, as natural text
// does, so the per-thread word cache sees realistic hit rates; the code has random identifiers.
// Uses the DeepSeek tokenizer of the npm fixture (V3 and V4 share vocabulary, merges and
// pre-tokenizer; they differ only in added tokens). Results: docs/tokenizer.md.
#include <benchmark/benchmark.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "text/byte_level.h"
#include "text/tokenizer.h"
#include "text/tokenizer_impl.h"

namespace {

using flint::text::Tokenizer;

const std::filesystem::path kModelDir =
    std::filesystem::path(FLINT_NPM_DIR) / "@lenml" / "tokenizer-deepseek_v3" / "models";

const Tokenizer& tokenizer() {
  static const Tokenizer t = Tokenizer::load(kModelDir);
  return t;
}

// Draws ranks 0..n-1 with probability proportional to 1 / (rank + 2.7) (Zipf-Mandelbrot).
class Zipf {
 public:
  explicit Zipf(std::size_t n) {
    double total = 0;
    for (std::size_t r = 0; r < n; ++r)
      cumulative_.push_back(total += 1.0 / (static_cast<double>(r) + 2.7));
  }
  std::size_t operator()(std::mt19937_64& rng) const {
    double x = std::uniform_real_distribution<double>(0, cumulative_.back())(rng);
    return static_cast<std::size_t>(std::lower_bound(cumulative_.begin(), cumulative_.end(), x) -
                                    cumulative_.begin());
  }

 private:
  std::vector<double> cumulative_;
};

std::string english(std::size_t bytes) {
  std::mt19937_64 rng(1);
  const char* syllables[] = {"the", "an",  "con", "ing", "er",  "pro", "ex",   "tion", "al",  "re",
                             "de",  "in",  "com", "ter", "ver", "ly",  "ment", "ous",  "ble", "sta",
                             "per", "for", "ma",  "li",  "ca",  "to",  "ri",   "na",   "ta",  "mo"};
  const char* common[] = {"the", "of",    "and", "to",   "a",    "in",  "is",   "that",
                          "for", "it",    "as",  "was",  "with", "be",  "by",   "on",
                          "not", "he",    "I",   "this", "are",  "or",  "his",  "from",
                          "at",  "which", "but", "have", "an",   "had", "they", "you"};
  std::vector<std::string> words(common, common + std::size(common));
  while (words.size() < 30000) {
    std::string w;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k) w += syllables[rng() % 30];
    words.push_back(w);
  }
  Zipf zipf(words.size());
  std::string text;
  bool sentence_start = true;
  while (text.size() < bytes) {
    std::string w = words[zipf(rng)];
    if (sentence_start) w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
    text += w;
    sentence_start = false;
    switch (rng() % 24) {
      case 0:
        text += ". ";
        sentence_start = true;
        break;
      case 1:
        text += ", ";
        break;
      case 2:
        text += ".\n\n";
        sentence_start = true;
        break;
      case 3:
        text += " " + std::to_string(rng() % 5000) + " ";
        break;
      default:
        text += ' ';
    }
  }
  return text;
}

std::string code(std::size_t bytes) {
  std::mt19937_64 rng(2);
  const char* parts[] = {"count", "index", "buffer", "value", "node", "size",   "result", "item",
                         "data",  "key",   "tmp",    "ptr",   "len",  "offset", "config", "user"};
  auto ident = [&] {
    std::string s = parts[rng() % 16];
    if (rng() % 2) s += std::string("_") + parts[rng() % 16];
    if (rng() % 4 == 0) s += std::to_string(rng() % 10);
    return s;
  };
  std::string text;
  while (text.size() < bytes) {
    std::string a = ident(), b = ident(), c = ident();
    switch (rng() % 5) {
      case 0:
        text +=
            "def " + a + "(" + b + ", " + c + "=None):\n    return " + b + " + len(" + c + ")\n\n";
        break;
      case 1:
        text += "  for (int " + a + " = 0; " + a + " < " + b + ".size(); ++" + a + ") {\n    " + c +
                "[" + a + "] += " + std::to_string(rng() % 100) + ";\n  }\n";
        break;
      case 2:
        text += "const " + a + " = await fetch(`/api/${" + b + "}`).then((r) => r.json());\n";
        break;
      case 3:
        text += "{\"" + a + "\": " + std::to_string(rng() % 100000) + ", \"" + b + "\": \"" + c +
                "\"}\n";
        break;
      default:
        text += "    if " + a + " is not None and " + b + " != " + c + ":  # " + ident() +
                "\n        " + a + ".append(" + c + ")\n";
        break;
    }
  }
  return text;
}

std::string chinese(std::size_t bytes) {
  std::mt19937_64 rng(3);
  Zipf zipf(3500);
  std::vector<char32_t> chars;
  for (char32_t cp = 0x4E00; chars.size() < 3500; cp += 1 + static_cast<char32_t>(rng() % 5))
    chars.push_back(cp);
  const char32_t punctuation[] = {U'，', U'。', U'、', U'；', U'：', U'“', U'”', U'！'};
  std::string text;
  while (text.size() < bytes) {
    for (int k = 0, n = 2 + static_cast<int>(rng() % 14); k < n; ++k)
      flint::text::append_utf8(text, chars[zipf(rng)]);
    flint::text::append_utf8(text, punctuation[rng() % 8]);
    if (rng() % 20 == 0) text += "\n";
  }
  return text;
}

const std::string& sample(int which) {
  static const std::string texts[] = {english(1 << 20), code(1 << 20), chinese(1 << 20),
                                      english(1 << 20) + code(1 << 20) + chinese(1 << 20)};
  return texts[which];
}
const char* kNames[] = {"english", "code", "chinese", "mixed"};

void BM_Encode(benchmark::State& state) {
  const std::string& text = sample(static_cast<int>(state.range(0)));
  const Tokenizer& t = tokenizer();
  std::vector<int32_t> ids;
  for (auto _ : state) {
    ids.clear();
    t.encode(text, false, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetLabel(kNames[state.range(0)]);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["bytes/token"] =
      static_cast<double>(text.size()) / static_cast<double>(ids.size());
}
BENCHMARK(BM_Encode)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

// The regex pre-tokenization alone (added-token scan and three PCRE2 passes).
void BM_PreTokenize(benchmark::State& state) {
  const std::string& text = sample(3);
  const Tokenizer::Impl& m = tokenizer().impl();
  std::vector<std::string_view> words;
  for (auto _ : state) {
    words.clear();
    m.pre_tokenizer.split(text, words);
    benchmark::DoNotOptimize(words.data());
  }
  state.SetLabel("mixed");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_PreTokenize)->Unit(benchmark::kMillisecond);

// BPE merging of every word with the word cache bypassed: the cost of first-seen words.
void BM_BpeUncached(benchmark::State& state) {
  const std::string& text = sample(3);
  const Tokenizer::Impl& m = tokenizer().impl();
  std::vector<std::string_view> words;
  m.pre_tokenizer.split(text, words);
  std::vector<int32_t> ids;
  for (auto _ : state) {
    ids.clear();
    for (std::string_view w : words) {
      m.bpe.encode_word_uncached(w,
                                 w.size() <= flint::text::BpeModel::kScanLimit
                                     ? flint::text::BpeModel::Algorithm::kScan
                                     : flint::text::BpeModel::Algorithm::kHeap,
                                 ids);
    }
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetLabel("mixed");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_BpeUncached)->Unit(benchmark::kMillisecond);

// One long word through the heap algorithm (a 64 kB run of letters).
void BM_BpeLongWord(benchmark::State& state) {
  std::string word;
  std::mt19937_64 rng(4);
  while (word.size() < 65536) word += static_cast<char>('a' + rng() % 26);
  const Tokenizer::Impl& m = tokenizer().impl();
  std::vector<int32_t> ids;
  for (auto _ : state) {
    ids.clear();
    m.bpe.encode_word_uncached(word, flint::text::BpeModel::Algorithm::kHeap, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * word.size()));
}
BENCHMARK(BM_BpeLongWord)->Unit(benchmark::kMillisecond);

void BM_Decode(benchmark::State& state) {
  const std::string& text = sample(3);
  const Tokenizer& t = tokenizer();
  std::vector<int32_t> ids = t.encode(text, false);
  for (auto _ : state) {
    std::string out = t.decode(ids);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel("mixed");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

void BM_StreamDecode(benchmark::State& state) {
  const std::string& text = sample(3);
  const Tokenizer& t = tokenizer();
  std::vector<int32_t> ids = t.encode(text, false);
  std::string out;
  for (auto _ : state) {
    flint::text::StreamDecoder stream(t);
    out.clear();
    for (int32_t id : ids) stream.push(id, out);
    stream.flush(out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel("mixed");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["ns/token"] = benchmark::Counter(
      static_cast<double>(ids.size()),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_StreamDecode)->Unit(benchmark::kMillisecond);

void BM_Load(benchmark::State& state) {
  for (auto _ : state) {
    Tokenizer t = Tokenizer::load(kModelDir);
    benchmark::DoNotOptimize(&t);
  }
}
BENCHMARK(BM_Load)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
