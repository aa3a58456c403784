// Regular expressions from tokenizer.json, matched with PCRE2 exactly as JavaScript would.
//
// tokenizer.json patterns are executed by the reference tokenizer (@lenml/tokenizers, the
// transformers.js port) as `new RegExp(pattern, "gu")`. PCRE2 (UTF mode, JIT when available)
// runs them here after a small translation where the two dialects differ:
//   - \s, \S: JavaScript means WhiteSpace + LineTerminator (TAB VT FF SP NBSP U+FEFF, every Zs,
//     LF CR U+2028 U+2029); PCRE2 does not count U+FEFF and, without UCP, only ASCII. Both are
//     rewritten as that exact set.
//   - \d, \w, \b stay ASCII as in JavaScript, which is why PCRE2_UCP is NOT set (UCP would make
//     them Unicode). \p{..} classes are Unicode in UTF mode regardless of UCP.
//   - \v is U+000B in JavaScript but "vertical space" in PCRE2; \uXXXX, \u{X} and surrogate
//     pairs become \x{X}; \# \& \~ lose their backslash (as transformers.js does).
//   - Empty matches advance by one code point, as String.prototype.matchAll does with /u.
// Constructs PCRE2 would read differently and JavaScript rejects or treats otherwise (\A, \z,
// \h, \R, \Q, possessive quantifiers, ...) raise flint::Error at compile time.
//
// Unicode data: PCRE2 10.42 (Debian 12) implements Unicode 14; Node 20 implements a newer
// version. Code points assigned after Unicode 14 can therefore fall in different \p{..}
// classes here and in the reference (see docs/tokenizer.md).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace flint::text {

// Rewrites a JavaScript /u pattern as an equivalent PCRE2 pattern (see above). Throws
// flint::Error naming `what` (e.g. "tokenizer.json pre_tokenizer.pretokenizers[0].pattern")
// for constructs that cannot be translated faithfully.
std::string translate_js_regex(std::string_view js_pattern, std::string_view what);

// A compiled pattern. Thread-safe: match() may be called from many threads at once (each
// thread uses its own match data and JIT stack).
class JsRegex {
 public:
  // Compiles `js_pattern` (JavaScript syntax). `what` names the pattern's origin for errors.
  JsRegex(std::string_view js_pattern, std::string_view what);
  ~JsRegex();
  JsRegex(JsRegex&&) noexcept;
  JsRegex& operator=(JsRegex&&) noexcept;

  // Finds the first match in subject[start..] (subject must be valid UTF-8 and `start` on a
  // code point boundary; lookarounds see only `subject`). Returns false when there is none.
  // Matches may be empty.
  bool find(std::string_view subject, std::size_t start, std::size_t* match_begin,
            std::size_t* match_end) const;

  // Calls fn(begin, end) for each match in `subject` from left to right, in JavaScript
  // matchAll order (after an empty match the search resumes one code point further).
  template <typename Fn>
  void for_each_match(std::string_view subject, Fn&& fn) const {
    std::size_t pos = 0;
    while (pos <= subject.size()) {
      std::size_t b = 0, e = 0;
      if (!find(subject, pos, &b, &e)) break;
      fn(b, e);
      if (e > b) {
        pos = e;
      } else if (e < subject.size()) {
        pos = e + static_cast<std::size_t>(code_point_length(subject, e));
      } else {
        break;
      }
    }
  }

  const std::string& pcre2_pattern() const { return translated_; }

 private:
  static int code_point_length(std::string_view s, std::size_t pos);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string translated_;
  std::string what_;
};

}  // namespace flint::text
