// Stop strings over streamed text pieces.
#include "text/stop_strings.h"

#include <gtest/gtest.h>

namespace flint::text {
namespace {

std::string feed(StopStrings& s, std::vector<std::string> pieces, bool flush = true) {
  std::string out;
  for (const auto& p : pieces) out += s.push(p);
  if (flush) out += s.flush();
  return out;
}

TEST(StopStrings, SpanningSeveralPiecesIsHeldBackThenCut) {
  StopStrings s({"END"}, false);
  EXPECT_EQ(s.push("abc E"), "abc ");  // "E" may begin the stop string
  EXPECT_EQ(s.push("N"), "");
  EXPECT_EQ(s.push("D tail"), "");
  EXPECT_TRUE(s.matched());
  EXPECT_EQ(s.push("more"), "");
  EXPECT_EQ(s.flush(), "");
}

TEST(StopStrings, ReleasedWhenItTurnsOutNotToMatch) {
  StopStrings s({"END"}, false);
  EXPECT_EQ(feed(s, {"x E", "Nx", "y"}), "x ENxy");
  EXPECT_FALSE(s.matched());
}

TEST(StopStrings, OverlappingCandidatesAndInclusion) {
  StopStrings a({"abc", "ab"}, false);
  EXPECT_EQ(feed(a, {"1a", "b", "c"}), "1");  // "ab" completes first
  EXPECT_EQ(a.matched_string(), "ab");
  StopStrings b({"abc"}, true);
  EXPECT_EQ(feed(b, {"1ab", "c2"}), "1abc");
}

TEST(StopStrings, MultibyteAndEmptyList) {
  StopStrings s({"é!"}, false);
  EXPECT_EQ(feed(s, {"caf", "é", "! x"}), "caf");
  StopStrings none({}, false);
  EXPECT_EQ(feed(none, {"a", "b"}, false), "ab");
}

}  // namespace
}  // namespace flint::text
