#include "text/js_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <fmt/format.h>

#include "base/check.h"
#include "base/error.h"
#include "text/byte_level.h"

namespace flint::text {

namespace {

// JavaScript's \s: WhiteSpace (TAB, VT, FF, U+FEFF and every Zs) plus LineTerminator (LF, CR,
// U+2028, U+2029), written as the inside of a PCRE2 character class.
constexpr std::string_view kJsSpaceClassBody =
    "\\t\\n\\x{0B}\\f\\r\\x{2028}\\x{2029}\\x{FEFF}\\p{Zs}";

// Long General_Category names JavaScript accepts, mapped to the short names PCRE2 knows.
std::string_view short_category(std::string_view name) {
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"Letter", "L"},
      {"Cased_Letter", "L&"},
      {"Uppercase_Letter", "Lu"},
      {"Lowercase_Letter", "Ll"},
      {"Titlecase_Letter", "Lt"},
      {"Modifier_Letter", "Lm"},
      {"Other_Letter", "Lo"},
      {"Mark", "M"},
      {"Combining_Mark", "M"},
      {"Nonspacing_Mark", "Mn"},
      {"Spacing_Mark", "Mc"},
      {"Enclosing_Mark", "Me"},
      {"Number", "N"},
      {"Decimal_Number", "Nd"},
      {"digit", "Nd"},
      {"Letter_Number", "Nl"},
      {"Other_Number", "No"},
      {"Punctuation", "P"},
      {"punct", "P"},
      {"Connector_Punctuation", "Pc"},
      {"Dash_Punctuation", "Pd"},
      {"Open_Punctuation", "Ps"},
      {"Close_Punctuation", "Pe"},
      {"Initial_Punctuation", "Pi"},
      {"Final_Punctuation", "Pf"},
      {"Other_Punctuation", "Po"},
      {"Symbol", "S"},
      {"Math_Symbol", "Sm"},
      {"Currency_Symbol", "Sc"},
      {"Modifier_Symbol", "Sk"},
      {"Other_Symbol", "So"},
      {"Separator", "Z"},
      {"Space_Separator", "Zs"},
      {"Line_Separator", "Zl"},
      {"Paragraph_Separator", "Zp"},
      {"Other", "C"},
      {"Control", "Cc"},
      {"cntrl", "Cc"},
      {"Format", "Cf"},
      {"Surrogate", "Cs"},
      {"Private_Use", "Co"},
      {"Unassigned", "Cn"},
  };
  for (const auto& [long_name, short_name] : kNames) {
    if (name == long_name) return short_name;
  }
  return name;
}

std::string translate_property(std::string_view body) {
  auto eq = body.find('=');
  if (eq == std::string_view::npos) return std::string(short_category(body));
  std::string_view key = body.substr(0, eq), value = body.substr(eq + 1);
  if (key == "General_Category" || key == "gc") return std::string(short_category(value));
  if (key == "Script" || key == "sc") return fmt::format("sc:{}", value);
  if (key == "Script_Extensions" || key == "scx") return fmt::format("scx:{}", value);
  return std::string(body);  // let PCRE2 accept or reject it
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Translator {
 public:
  Translator(std::string_view pattern, std::string_view what) : p_(pattern), what_(what) {}

  std::string run() {
    while (i_ < p_.size()) {
      char c = p_[i_];
      if (c == '\\') {
        escape();
      } else if (in_class_) {
        class_char(c);
      } else if (c == '[') {
        open_class();
      } else if (c == '.') {
        out_ += "[^\\n\\r\\x{2028}\\x{2029}]";
        ++i_;
      } else {
        out_ += c;
        ++i_;
      }
    }
    if (in_class_) fail("unterminated character class");
    return out_;
  }

 private:
  [[noreturn]] void fail(std::string_view why) const {
    throw Error("{}: unsupported regular expression /{}/ ({} at offset {})", what_, p_, why, i_);
  }

  void open_class() {
    ++i_;
    bool negated = i_ < p_.size() && p_[i_] == '^';
    if (negated) ++i_;
    // JavaScript's [] matches nothing and [^] anything; PCRE2 would read the ']' literally.
    if (i_ < p_.size() && p_[i_] == ']') {
      out_ += negated ? "[\\x{0}-\\x{10FFFF}]" : "(?!)";
      ++i_;
      return;
    }
    out_ += negated ? "[^" : "[";
    in_class_ = true;
  }

  void class_char(char c) {
    ++i_;
    if (c == ']') {
      in_class_ = false;
      out_ += ']';
    } else if (c == '[') {
      out_ += "\\[";  // literal in JavaScript; PCRE2 would look for a POSIX class
    } else {
      out_ += c;
    }
  }

  void code_point(uint32_t cp) { out_ += fmt::format("\\x{{{:X}}}", cp); }

  // \uXXXX (with surrogate pairs combined) or \u{X...}; i_ is just after the 'u'.
  uint32_t unicode_escape() {
    if (i_ < p_.size() && p_[i_] == '{') {
      auto close = p_.find('}', i_);
      if (close == std::string_view::npos || close == i_ + 1) fail("bad \\u{} escape");
      uint32_t cp = 0;
      for (std::size_t k = i_ + 1; k < close; ++k) {
        int h = hex_value(p_[k]);
        if (h < 0 || cp > 0x10FFFF) fail("bad \\u{} escape");
        cp = cp * 16 + static_cast<uint32_t>(h);
      }
      if (cp > 0x10FFFF) fail("code point out of range");
      i_ = close + 1;
      return cp;
    }
    auto four = [&](std::size_t at) -> int32_t {
      if (at + 4 > p_.size()) return -1;
      int32_t v = 0;
      for (std::size_t k = at; k < at + 4; ++k) {
        int h = hex_value(p_[k]);
        if (h < 0) return -1;
        v = v * 16 + h;
      }
      return v;
    };
    int32_t hi = four(i_);
    if (hi < 0) fail("bad \\u escape");
    i_ += 4;
    if (hi >= 0xD800 && hi <= 0xDBFF) {
      int32_t lo = (i_ + 6 <= p_.size() && p_[i_] == '\\' && p_[i_ + 1] == 'u') ? four(i_ + 2) : -1;
      if (lo < 0xDC00 || lo > 0xDFFF) fail("lone surrogate");
      i_ += 6;
      return 0x10000 + ((static_cast<uint32_t>(hi) - 0xD800) << 10) +
             (static_cast<uint32_t>(lo) - 0xDC00);
    }
    if (hi >= 0xDC00 && hi <= 0xDFFF) fail("lone surrogate");
    return static_cast<uint32_t>(hi);
  }

  void escape() {
    if (i_ + 1 >= p_.size()) fail("trailing backslash");
    char c = p_[i_ + 1];
    i_ += 2;
    switch (c) {
      case 'd':
      case 'D':
      case 'w':
      case 'W':
      case 'b':
      case 'B':
      case 't':
      case 'n':
      case 'r':
      case 'f':
        out_ += '\\';
        out_ += c;
        return;
      case 's':
        if (in_class_) {
          out_ += kJsSpaceClassBody;
        } else {
          out_ += fmt::format("[{}]", kJsSpaceClassBody);
        }
        return;
      case 'S':
        if (in_class_) fail("\\S inside a character class");
        out_ += fmt::format("[^{}]", kJsSpaceClassBody);
        return;
      case 'v':
        code_point(0x0B);
        return;
      case '0':
        if (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') fail("octal escape");
        code_point(0);
        return;
      case 'x': {
        int h1 = i_ + 1 < p_.size() ? hex_value(p_[i_]) : -1;
        int h2 = i_ + 1 < p_.size() ? hex_value(p_[i_ + 1]) : -1;
        if (h1 < 0 || h2 < 0) fail("bad \\x escape");
        i_ += 2;
        code_point(static_cast<uint32_t>(h1 * 16 + h2));
        return;
      }
      case 'u':
        code_point(unicode_escape());
        return;
      case 'c': {
        char letter = i_ < p_.size() ? p_[i_] : '\0';
        if (!((letter >= 'a' && letter <= 'z') || (letter >= 'A' && letter <= 'Z')))
          fail("bad \\c escape");
        ++i_;
        code_point(static_cast<uint32_t>(letter) % 32);
        return;
      }
      case 'p':
      case 'P': {
        auto close = p_.find('}', i_);
        if (i_ >= p_.size() || p_[i_] != '{' || close == std::string_view::npos)
          fail("bad \\p escape");
        out_ += fmt::format("\\{}{{{}}}", c, translate_property(p_.substr(i_ + 1, close - i_ - 1)));
        i_ = close + 1;
        return;
      }
      case 'k':
        if (in_class_) fail("\\k inside a character class");
        out_ += "\\k";
        return;
      case '#':
      case '&':
      case '~':
        // transformers.js strips these escapes (valid in Python, invalid in JavaScript /u).
        out_ += '\\';
        out_ += c;
        return;
      default:
        break;
    }
    if (c >= '1' && c <= '9' && !in_class_) {
      out_ += '\\';
      out_ += c;
      return;
    }
    // JavaScript /u allows identity escapes only for syntax characters (and '-' in classes).
    static constexpr std::string_view kSyntax = "^$\\.*+?()[]{}|/-";
    if (kSyntax.find(c) != std::string_view::npos) {
      out_ += '\\';
      out_ += c;
      return;
    }
    --i_;
    fail(fmt::format("escape \\{}", c));
  }

  std::string_view p_;
  std::string_view what_;
  std::size_t i_ = 0;
  bool in_class_ = false;
  std::string out_;
};

// Per-thread PCRE2 match state, shared by every pattern (we only read the whole-match offsets).
struct ThreadMatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  ThreadMatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    FLINT_CHECK(data && context && jit_stack, "PCRE2 allocation failed");
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

ThreadMatchState& thread_match_state() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

std::string translate_js_regex(std::string_view js_pattern, std::string_view what) {
  return Translator(js_pattern, what).run();
}

struct JsRegex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() { pcre2_code_free(code); }
};

JsRegex::JsRegex(std::string_view js_pattern, std::string_view what)
    : impl_(std::make_unique<Impl>()),
      translated_(translate_js_regex(js_pattern, what)),
      what_(what) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated_.data()), translated_.size(),
                              PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_NEVER_BACKSLASH_C, &error,
                              &offset, nullptr);
  if (impl_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw Error(
        "{}: cannot compile regular expression /{}/: {} (at offset {} of the PCRE2 form /{}/)",
        what, js_pattern, reinterpret_cast<const char*>(message), offset, translated_);
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

JsRegex::~JsRegex() = default;
JsRegex::JsRegex(JsRegex&&) noexcept = default;
JsRegex& JsRegex::operator=(JsRegex&&) noexcept = default;

int JsRegex::code_point_length(std::string_view s, std::size_t pos) {
  return utf8_length(static_cast<uint8_t>(s[pos]));
}

bool JsRegex::find(std::string_view subject, std::size_t start, std::size_t* match_begin,
                   std::size_t* match_end) const {
  ThreadMatchState& state = thread_match_state();
  auto subject_ptr = reinterpret_cast<PCRE2_SPTR>(subject.data());
  int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject_ptr, subject.size(), start, 0,
                                        state.data, state.context)
                      : pcre2_match(impl_->code, subject_ptr, subject.size(), start,
                                    PCRE2_NO_UTF_CHECK, state.data, state.context);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    // A pathological input for the JIT stack: the interpreter keeps its frames on the heap.
    rc = pcre2_match(impl_->code, subject_ptr, subject.size(), start,
                     PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, state.data, state.context);
  }
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof(message));
    throw Error("{}: regular expression /{}/ failed on a {}-byte input: {}", what_, translated_,
                subject.size(), reinterpret_cast<const char*>(message));
  }
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
  *match_begin = ovector[0];
  *match_end = ovector[1];
  return true;
}

}  // namespace flint::text
