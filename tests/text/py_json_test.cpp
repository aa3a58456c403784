#include "text/py_json.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace flint {
namespace {

using Json = nlohmann::ordered_json;

// Expected strings are what CPython 3.11's json.dumps(value, ensure_ascii=False) prints.
TEST(PyJson, FloatsUseReprRules) {
  EXPECT_EQ(py_float_repr(1.0), "1.0");
  EXPECT_EQ(py_float_repr(-0.0), "-0.0");
  EXPECT_EQ(py_float_repr(0.1), "0.1");
  EXPECT_EQ(py_float_repr(2.5), "2.5");
  EXPECT_EQ(py_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(py_float_repr(1e16), "1e+16");
  EXPECT_EQ(py_float_repr(1.5e16), "1.5e+16");
  EXPECT_EQ(py_float_repr(123456789.125), "123456789.125");
  EXPECT_EQ(py_float_repr(0.0001), "0.0001");
  EXPECT_EQ(py_float_repr(0.00001), "1e-05");
  EXPECT_EQ(py_float_repr(1.25e-7), "1.25e-07");
  EXPECT_EQ(py_float_repr(1e300), "1e+300");
  EXPECT_EQ(py_float_repr(5e-324), "5e-324");
  EXPECT_EQ(py_float_repr(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(py_float_repr(-1234.5), "-1234.5");
  EXPECT_EQ(py_float_repr(std::numeric_limits<double>::infinity()), "Infinity");
  EXPECT_EQ(py_float_repr(std::numeric_limits<double>::quiet_NaN()), "NaN");
}

TEST(PyJson, DumpsSeparatorsOrderAndEscapes) {
  Json value = Json::parse(
      R"({"z": 1, "a": [true, false, null, 1.5, -3, 18446744073709551615],
          "s": "é中😀 \"q\" \\ \n\t\r\b\f \u0001 \u007f /", "e": {}, "l": []})");
  EXPECT_EQ(py_json_dumps(value),
            "{\"z\": 1, \"a\": [true, false, null, 1.5, -3, 18446744073709551615], "
            "\"s\": \"é中😀 \\\"q\\\" \\\\ \\n\\t\\r\\b\\f \\u0001 \x7f /\", \"e\": {}, "
            "\"l\": []}");
}

TEST(PyJson, EscapingInPiecesEqualsEscapingWhole) {
  const std::string text = "a\"b\\c\nd中😀";
  std::string whole, pieces;
  append_py_json_escaped(whole, text);
  for (std::size_t i = 0; i < text.size();) {  // one code point at a time
    std::size_t n = 1;
    while (i + n < text.size() && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80) ++n;
    append_py_json_escaped(pieces, std::string_view(text).substr(i, n));
    i += n;
  }
  EXPECT_EQ(whole, pieces);
}

TEST(PyJson, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  std::string out;
  // A lone continuation byte, a truncated sequence, an overlong form, a surrogate.
  append_py_json_escaped(out,
                         "a\x80"
                         "b\xE2\x82"
                         "c\xC0\xAF"
                         "d\xED\xA0\x80"
                         "e");
  EXPECT_EQ(out, "a\uFFFDb\uFFFD\uFFFDc\uFFFD\uFFFDd\uFFFD\uFFFD\uFFFDe");
  EXPECT_TRUE(nlohmann::json::accept("\"" + out + "\""));
}

TEST(PyJson, DeepNestingThrowsInsteadOfOverflowing) {
  Json value = Json::array();
  Json* inner = &value;
  for (int i = 0; i < 1100; ++i) {
    inner->push_back(Json::array());
    inner = &(*inner)[0];
  }
  EXPECT_THROW(py_json_dumps(value), Error);
}

}  // namespace
}  // namespace flint
