#include "text/tokenizer.h"

#include <fmt/format.h>

#include "base/error.h"
#include "text/tokenizer_impl.h"

namespace flint::text {

namespace {

// Added tokens give their id; plain sections are pre-tokenized and merged by BPE.
void encode_sections(const Tokenizer::Impl& m, const std::vector<TextSection>& sections,
                     std::vector<int32_t>& out) {
  thread_local std::vector<std::string_view> words;
  for (const TextSection& section : sections) {
    if (section.token_index >= 0) {
      out.push_back(m.added.tokens()[static_cast<std::size_t>(section.token_index)].id);
      continue;
    }
    words.clear();
    m.pre_tokenizer.split(section.text, words);
    for (std::string_view word : words) m.bpe.encode_word(word, out);
  }
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  encode(text, add_special_tokens, ids);
  return ids;
}

void Tokenizer::encode(std::string_view text, bool add_special_tokens, std::vector<int32_t>& out,
                       bool match_added_tokens) const {
  const Impl& m = *impl_;
  std::string repaired;
  text = to_valid_utf8(text, repaired);
  if (add_special_tokens && m.add_bos) out.push_back(m.bos);

  thread_local std::vector<TextSection> sections;
  if (match_added_tokens) {
    m.added.split(text, sections);
  } else {
    sections.assign(1, TextSection{text, -1});
  }
  encode_sections(m, sections, out);
  if (add_special_tokens && m.add_eos) out.push_back(m.eos);
}

void Tokenizer::encode_with_literals(std::string_view text, std::span<const TextSpan> literal,
                                     std::vector<int32_t>& out) const {
  const Impl& m = *impl_;
  std::string repaired;
  if (to_valid_utf8(text, repaired).data() != text.data()) {
    throw Error("encode_with_literals: the text is not valid UTF-8");
  }
  for (std::size_t i = 0; i < literal.size(); ++i) {
    if (literal[i].begin > literal[i].end || literal[i].end > text.size() ||
        (i > 0 && literal[i].begin < literal[i - 1].end)) {
      throw Error("encode_with_literals: literal ranges must be sorted, disjoint and inside the text");
    }
  }
  thread_local std::vector<TextSection> sections;
  m.added.split(text, sections, literal);
  encode_sections(m, sections, out);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& m = *impl_;
  std::string out;
  out.reserve(ids.size() * 4);
  Utf8Decoder utf8;
  for (int32_t id : ids) {
    if (!is_valid_id(id)) {
      throw Error("token id {} is not in the vocabulary (valid ids: 0..{})", id, vocab_size() - 1);
    }
    const auto index = static_cast<std::size_t>(id);
    if (skip_special_tokens && (m.flags[index] & Impl::kSpecial)) continue;
    if (m.flags[index] & Impl::kAdded) {
      // Each run of byte-level tokens is decoded on its own, as the reference does.
      utf8.finish(out);
      out += m.bytes[index];
    } else {
      m.append_bytes(index, utf8, out);
    }
  }
  utf8.finish(out);
  if (m.clean_up_spaces) clean_up_tokenization(out);
  return out;
}

int32_t Tokenizer::token_id(std::string_view piece) const {
  auto it = impl_->ids.find(piece);
  return it == impl_->ids.end() ? kNoToken : it->second;
}

std::string_view Tokenizer::token_text(int32_t id) const {
  return is_valid_id(id) ? std::string_view(impl_->spelling[static_cast<std::size_t>(id)]) : "";
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  return is_valid_id(id) ? std::string_view(impl_->bytes[static_cast<std::size_t>(id)]) : "";
}

bool Tokenizer::is_valid_id(int32_t id) const { return impl_->has_flag(id, Impl::kValid); }
bool Tokenizer::is_added(int32_t id) const { return impl_->has_flag(id, Impl::kAdded); }
bool Tokenizer::is_special(int32_t id) const { return impl_->has_flag(id, Impl::kSpecial); }
int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->flags.size()); }
int32_t Tokenizer::bos_id() const { return impl_->bos; }
int32_t Tokenizer::eos_id() const { return impl_->eos; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }
int64_t Tokenizer::model_max_length() const { return impl_->model_max_length; }

void clean_up_tokenization(std::string& text) {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
  };
  // Each rule is one left-to-right global replacement over the previous rule's output.
  for (const auto& [from, to] : kRules) {
    if (text.find(from) == std::string::npos) continue;
    std::string result;
    result.reserve(text.size());
    std::size_t pos = 0;
    while (true) {
      std::size_t hit = text.find(from, pos);
      if (hit == std::string::npos) break;
      result.append(text, pos, hit - pos);
      result += to;
      pos = hit + from.size();
    }
    result.append(text, pos, std::string::npos);
    text.swap(result);
  }
}

// ---- StreamDecoder ----

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer),
      skip_special_(skip_special_tokens),
      clean_up_(tokenizer.impl().clean_up_spaces) {}

std::string StreamDecoder::push(int32_t id) {
  std::string out;
  push(id, out);
  return out;
}

void StreamDecoder::push(int32_t id, std::string& out) {
  const Tokenizer::Impl& m = tokenizer_->impl();
  if (!tokenizer_->is_valid_id(id)) {
    throw Error("token id {} is not in the vocabulary (valid ids: 0..{})", id,
                tokenizer_->vocab_size() - 1);
  }
  const auto index = static_cast<std::size_t>(id);
  if (skip_special_ && (m.flags[index] & Tokenizer::Impl::kSpecial)) return;
  std::string& sink = clean_up_ ? held_ : out;
  if (m.flags[index] & Tokenizer::Impl::kAdded) {
    utf8_.finish(sink);
    sink += m.bytes[index];
  } else {
    m.append_bytes(index, utf8_, sink);
  }
  if (clean_up_) emit(out, false);
}

std::string StreamDecoder::flush() {
  std::string out;
  flush(out);
  return out;
}

void StreamDecoder::flush(std::string& out) {
  utf8_.finish(clean_up_ ? held_ : out);
  if (clean_up_) emit(out, true);
}

bool StreamDecoder::has_pending() const { return utf8_.pending() || !held_.empty(); }

// Clean-up rules are at most 4 bytes long and start with a space, so no rule can match across
// a cut that follows three non-space bytes: the text before such a cut can be cleaned and
// emitted without waiting for what comes next (see clean_up_tokenization).
void StreamDecoder::emit(std::string& out, bool final) {
  std::size_t cut = 0;
  if (final) {
    cut = held_.size();
  } else {
    for (std::size_t p = held_.size(); p >= 3; --p) {
      bool boundary = p == held_.size() || (static_cast<uint8_t>(held_[p]) & 0xC0) != 0x80;
      if (boundary && held_[p - 1] != ' ' && held_[p - 2] != ' ' && held_[p - 3] != ' ') {
        cut = p;
        break;
      }
    }
  }
  if (cut == 0) return;
  std::string ready = held_.substr(0, cut);
  held_.erase(0, cut);
  clean_up_tokenization(ready);
  out += ready;
}

}  // namespace flint::text
