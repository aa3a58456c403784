// A SAX reader for tokenizer.json (internal to the text library: tokenizer_load.cpp,
// tokenizer_files.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace flint::text {

// Reads tokenizer.json in one pass: model.vocab and model.merges (the bulk of the file,
// 128k entries each for DeepSeek) go straight into flat vectors, everything else into a small
// JSON document. About twice as fast as building the whole document, and much less memory.
class TokenizerJsonReader {
 public:
  struct Merge {
    std::string left, right;
    bool malformed = false;
    bool pair_form = false;  // written as ["a", "b"] rather than "a b"
  };
  explicit TokenizerJsonReader(nlohmann::json& root) : dom_(root) {}

  bool vocab_seen = false;  // model.vocab was an object (else it is left in the document)
  std::vector<std::pair<std::string, int64_t>> vocab;
  std::string vocab_error;   // the first entry that is not an integer id
  bool merges_seen = false;  // model.merges was an array
  std::vector<Merge> merges;

  bool null() {
    return value([&] { return dom_.null(); });
  }
  bool boolean(bool v) {
    return value([&] { return dom_.boolean(v); });
  }
  bool number_integer(nlohmann::json::number_integer_t v) {
    if (mode_ == Mode::kVocab && skip_ == 0) return add_vocab(v);
    return value([&] { return dom_.number_integer(v); });
  }
  bool number_unsigned(nlohmann::json::number_unsigned_t v) {
    if (mode_ == Mode::kVocab && skip_ == 0) {
      return add_vocab(v > static_cast<nlohmann::json::number_unsigned_t>(INT64_MAX)
                           ? -1
                           : static_cast<int64_t>(v));
    }
    return value([&] { return dom_.number_unsigned(v); });
  }
  bool number_float(nlohmann::json::number_float_t v, const std::string& text) {
    return value([&] { return dom_.number_float(v, text); });
  }
  bool string(std::string& v) {
    if (mode_ == Mode::kMerges && skip_ == 0) {
      Merge m;
      auto space = v.find(' ');
      if (space == std::string::npos) {
        m.malformed = true;
      } else {
        // "a b" (tokenizers < 0.20); like the reference, ignore anything after a second space.
        m.left = v.substr(0, space);
        m.right = v.substr(space + 1, v.find(' ', space + 1) - space - 1);
      }
      merges.push_back(std::move(m));
      return true;
    }
    if (mode_ == Mode::kMergePair && skip_ == 0) {
      pair_.push_back(std::move(v));
      return true;
    }
    return value([&] { return dom_.string(v); });
  }
  bool binary(nlohmann::json::binary_t& v) {
    return value([&] { return dom_.binary(v); });
  }
  bool key(std::string& k) {
    if (mode_ == Mode::kVocab && skip_ == 0) {
      key_ = std::move(k);
      return true;
    }
    if (mode_ != Mode::kNone) return true;
    if (depth_ < keys_.size()) keys_[depth_] = k;
    return dom_.key(k);
  }
  bool start_object(std::size_t n) { return start(/*object=*/true, n); }
  bool start_array(std::size_t n) { return start(/*object=*/false, n); }
  bool end_object() { return end(); }
  bool end_array() { return end(); }
  bool parse_error(std::size_t position, const std::string& token,
                   const nlohmann::detail::exception& e) {
    return dom_.parse_error(position, token, e);
  }

 private:
  enum class Mode { kNone, kVocab, kMerges, kMergePair };

  bool add_vocab(int64_t id) {
    vocab.emplace_back(std::move(key_), id);
    return true;
  }
  // A scalar: into the document, or an error / part of a malformed entry while capturing.
  template <typename Fn>
  bool value(Fn&& forward) {
    switch (mode_) {
      case Mode::kNone:
        return forward();
      case Mode::kVocab:
        if (skip_ == 0 && vocab_error.empty()) vocab_error = key_;
        return true;
      case Mode::kMerges:
        if (skip_ == 0) merges.push_back(Merge{{}, {}, true});
        return true;
      case Mode::kMergePair:
        pair_malformed_ = pair_malformed_ || skip_ == 0;
        return true;
    }
    return true;
  }
  bool start(bool object, std::size_t n) {
    if (mode_ == Mode::kNone) {
      bool in_model = depth_ == 2 && keys_[1] == "model" && model_is_object_;
      if (in_model && object && keys_[2] == "vocab") {
        mode_ = Mode::kVocab;
        vocab_seen = true;
        capture_depth_ = ++depth_;
        return true;
      }
      if (in_model && !object && keys_[2] == "merges") {
        mode_ = Mode::kMerges;
        merges_seen = true;
        capture_depth_ = ++depth_;
        return true;
      }
      if (depth_ == 1) model_is_object_ = object && keys_[1] == "model";
      ++depth_;
      if (depth_ < keys_.size()) keys_[depth_].clear();
      return object ? dom_.start_object(n) : dom_.start_array(n);
    }
    if (mode_ == Mode::kMerges && skip_ == 0 && !object) {
      mode_ = Mode::kMergePair;
      pair_.clear();
      pair_malformed_ = false;
      ++depth_;
      return true;
    }
    // A container where a scalar belongs: the entry is malformed; skip its contents.
    if (skip_ == 0) value([] { return true; });
    ++skip_;
    ++depth_;
    return true;
  }
  bool end() {
    --depth_;
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    if (mode_ == Mode::kMergePair) {
      mode_ = Mode::kMerges;
      Merge m;
      m.pair_form = true;
      if (pair_malformed_ || pair_.size() != 2) {
        m.malformed = true;
      } else {
        m.left = std::move(pair_[0]);
        m.right = std::move(pair_[1]);
      }
      merges.push_back(std::move(m));
      return true;
    }
    if (mode_ != Mode::kNone && depth_ + 1 == capture_depth_) {
      mode_ = Mode::kNone;
      return dom_.null();  // the document keeps a placeholder for the captured value
    }
    return dom_.end_object_or_array();
  }

  struct DomParser : nlohmann::detail::json_sax_dom_parser<nlohmann::json> {
    using nlohmann::detail::json_sax_dom_parser<nlohmann::json>::json_sax_dom_parser;
    // The document parser needs to know which kind of container closes.
    std::vector<bool> open_objects;
    bool start_object(std::size_t n) {
      open_objects.push_back(true);
      return json_sax_dom_parser::start_object(n);
    }
    bool start_array(std::size_t n) {
      open_objects.push_back(false);
      return json_sax_dom_parser::start_array(n);
    }
    bool end_object_or_array() {
      bool object = open_objects.back();
      open_objects.pop_back();
      return object ? end_object() : end_array();
    }
  };

  DomParser dom_;
  Mode mode_ = Mode::kNone;
  std::size_t depth_ = 0;
  std::size_t capture_depth_ = 0;
  std::size_t skip_ = 0;
  bool model_is_object_ = false;
  std::array<std::string, 3> keys_{};  // the current key of the objects at depths 1 and 2
  std::string key_;                    // the pending vocab key
  std::vector<std::string> pair_;
  bool pair_malformed_ = false;
};

}  // namespace flint::text
