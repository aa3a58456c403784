#include "base/strings.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace flint {
namespace {

TEST(Strings, EditDistanceMatchesDefinition) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("--block-size", "--blok-size"), 1u);
}

TEST(Strings, ClosestMatchSuggestsOnlyNearWords) {
  std::vector<std::string> flags{"--block-size", "--max-model-len", "--kv-cache-dtype"};
  EXPECT_EQ(closest_match("--blok-size", flags), "--block-size");
  EXPECT_EQ(closest_match("--max-model-length", flags), "--max-model-len");
  EXPECT_EQ(closest_match("--completely-different", flags), "");
}

TEST(Strings, ParseIntList) {
  EXPECT_EQ(parse_int_list("0,15, 27", "--token-ids"), (std::vector<int64_t>{0, 15, 27}));
  EXPECT_TRUE(parse_int_list("", "x").empty());
  EXPECT_THROW(parse_int_list("1,,2", "--token-ids"), Error);
  EXPECT_THROW(parse_int_list("1,2x", "--token-ids"), Error);
}

TEST(Strings, SplitKeepsEmptyParts) {
  EXPECT_EQ(split("a..b", '.'), (std::vector<std::string>{"a", "", "b"}));
}

}  // namespace
}  // namespace flint
