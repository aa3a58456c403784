// The DeepSeek tokenizer: byte-level BPE loaded from a checkpoint's tokenizer.json and
// tokenizer_config.json, with ids identical to the reference implementation
// (@lenml/tokenizers, the transformers.js port of Hugging Face tokenizers).
//
// encode(text):
//   1. invalid UTF-8 in `text` becomes U+FFFD (WHATWG rule; JSON and JavaScript strings cannot
//      hold invalid UTF-8, so this is what any caller of the reference would have sent);
//   2. added tokens ("<｜User｜>", "<think>", ...) are cut out first, longest match leftmost;
//   3. the rest is pre-tokenized (regex splits, see pre_tokenizer.h) and each word is merged
//      by BPE rank (bpe.h);
//   4. with add_special_tokens, BOS / EOS are added as tokenizer_config.json's add_bos_token /
//      add_eos_token say (DeepSeek-V4: neither; V3: BOS). The reference JavaScript port never
//      adds them for this tokenizer class; Hugging Face transformers does, and so does flint.
// decode(ids): added tokens give their text; runs of byte-level tokens give their bytes decoded
// as UTF-8 with U+FFFD for ill-formed parts, each run decoded on its own (as the reference
// does), so "E4 B8 <｜User｜> AD" gives "\uFFFD<｜User｜>\uFFFD".
//
// A Tokenizer is immutable after load; every method is thread-safe. Loading the DeepSeek files
// (8 MB of JSON) takes a few hundred milliseconds; encoding runs at tens of MB/s per thread
// (docs/tokenizer.md has measurements).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/byte_level.h"
#include "text/text_span.h"

namespace flint::text {

class Tokenizer {
 public:
  static constexpr int32_t kNoToken = -1;

  // Reads model_dir/tokenizer.json and model_dir/tokenizer_config.json. Throws flint::Error
  // naming the file and field for anything missing, malformed or unsupported.
  static Tokenizer load(const std::filesystem::path& model_dir);
  // The same from the two files' contents; `source` names their directory in errors.
  static Tokenizer from_json(std::string_view tokenizer_json,
                             std::string_view tokenizer_config_json,
                             std::string_view source = "<memory>");

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // Appends the ids of `text` to `out` (reuses its capacity). With match_added_tokens false,
  // strings such as "<｜User｜>" in `text` are ordinary text (BPE pieces), as Hugging Face's
  // split_special_tokens does: for untrusted content that must not inject control tokens.
  void encode(std::string_view text, bool add_special_tokens, std::vector<int32_t>& out,
              bool match_added_tokens = true) const;
  // Added tokens are matched everywhere but inside `literal` (sorted, disjoint byte ranges of
  // `text`): a chat prompt whose client text must not inject control tokens. Where no added
  // token string falls inside a literal range, the ids equal encode(text). `text` must be valid
  // UTF-8 (throws flint::Error otherwise, since repairing it would move the ranges).
  void encode_with_literals(std::string_view text, std::span<const TextSpan> literal,
                            std::vector<int32_t>& out) const;

  // Throws flint::Error for an id outside the vocabulary.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // The id of a token spelled as in tokenizer.json ("Ġthe", "<｜User｜>"), or kNoToken.
  int32_t token_id(std::string_view piece) const;
  // The spelling of a token as in tokenizer.json ("Ġthe"); "" for an unknown id.
  std::string_view token_text(int32_t id) const;
  // What the token decodes to: raw bytes for byte-level tokens (" the"; may be part of a UTF-8
  // character), the content for added tokens. "" for an unknown id.
  std::string_view token_bytes(int32_t id) const;

  bool is_valid_id(int32_t id) const;
  bool is_added(int32_t id) const;    // listed in "added_tokens"
  bool is_special(int32_t id) const;  // dropped by decode(..., skip_special_tokens = true)

  // One past the largest id (129280 for DeepSeek-V4, 128815 for V3).
  int32_t vocab_size() const;
  int32_t bos_id() const;  // kNoToken if the config names no BOS token
  int32_t eos_id() const;  // kNoToken if the config names no EOS token
  bool add_bos() const;
  bool add_eos() const;
  int64_t model_max_length() const;  // 0 if unset

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Incremental detokenization for streaming responses. push() returns the text that `id` makes
// complete: never part of a UTF-8 character (bytes are held until the character is complete).
// The concatenation of every push() and the final flush() equals
// tokenizer.decode(all ids, skip_special_tokens) exactly, ill-formed bytes included.
// Holds a reference to the tokenizer, which must outlive it. Not thread-safe (one per request).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  std::string push(int32_t id);
  // Appends instead of returning (no allocation once `out` has capacity).
  void push(int32_t id, std::string& out);
  // Ends the stream: emits U+FFFD for a pending incomplete character, and any held-back text.
  std::string flush();
  void flush(std::string& out);
  // True while bytes of an incomplete character are held back.
  bool has_pending() const;

 private:
  void emit(std::string& out, bool final);

  const Tokenizer* tokenizer_;
  bool skip_special_;
  bool clean_up_;     // tokenizer_config.json clean_up_tokenization_spaces
  Utf8Decoder utf8_;  // bytes of the current byte-level run
  std::string held_;  // decoded text not yet emitted (only when clean_up_)
};

}  // namespace flint::text
