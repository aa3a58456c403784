#include "cli/flags.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace flint::cli {
namespace {

using Args = std::vector<std::string>;

// A parser with one flag of each kind, writing into plain variables.
struct Fixture {
  std::string model;
  std::string extra;
  int64_t count = 3;
  double ratio = 0.5;
  bool verbose = false;
  bool cache = true;
  std::optional<int64_t> limit;
  std::optional<std::string> name;
  std::vector<std::string> names;
  int list_calls = 0;
  std::vector<std::pair<std::string, std::string>> dotted;
  std::string level;
  FlagParser parser{"test MODEL [EXTRA] [flags]", "A parser for tests."};

  Fixture() {
    parser.positional("MODEL", "the model", &model);
    parser.positional("EXTRA", "optional", &extra, /*required=*/false);
    parser.add_int("--count", "how many", &count);
    parser.add_double("--ratio", "a ratio", &ratio);
    parser.add_bool("--verbose", "talk more", &verbose);
    parser.group("Cache");
    parser.add_bool("--enable-cache", "cache things", &cache);
    parser.add_optional_int("--limit", "a limit", &limit);
    parser.add_optional_string("--name", "a name", &name);
    parser.add_list("--names", "several names", [this](std::vector<std::string> v) {
      names = std::move(v);
      ++list_calls;
    });
    parser.add_prefix("--config.", "one key", [this](std::string_view k, std::string_view v) {
      dotted.emplace_back(std::string(k), std::string(v));
    });
    parser.add_custom(
        "--level", "optimisation level", true,
        [this](std::string_view v) { level = std::string(v); }, "N");
    parser.alias("-O", "--level");
    parser.alias("-n", "--names");
  }
  bool parse(const Args& args) { return parser.parse(args); }
};

std::string usage_error(const Args& args) {
  Fixture f;
  try {
    f.parse(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(FlagParser, ValueForms) {
  Fixture f;
  ASSERT_TRUE(f.parse({"m", "--count", "7", "--ratio=0.25", "--limit", "-4", "--name=a=b"}));
  EXPECT_EQ(f.model, "m");
  EXPECT_EQ(f.count, 7);
  EXPECT_DOUBLE_EQ(f.ratio, 0.25);
  EXPECT_EQ(f.limit, -4);    // a negative number is a value, not a flag
  EXPECT_EQ(f.name, "a=b");  // split at the first '=' only
  EXPECT_TRUE(f.parser.was_set("--count"));
  EXPECT_FALSE(f.parser.was_set("--verbose"));
}

TEST(FlagParser, UnderscoresReadAsDashes) {
  Fixture f;
  ASSERT_TRUE(f.parse({"m", "--enable_cache=false", "--config.some_key", "1"}));
  EXPECT_FALSE(f.cache);
  // Keys after the first '.' keep their underscores.
  ASSERT_EQ(f.dotted.size(), 1u);
  EXPECT_EQ(f.dotted[0].first, "some_key");
}

TEST(FlagParser, SwitchForms) {
  Fixture a;
  ASSERT_TRUE(a.parse({"m", "--verbose", "--no-enable-cache"}));
  EXPECT_TRUE(a.verbose);
  EXPECT_FALSE(a.cache);
  Fixture b;
  ASSERT_TRUE(b.parse({"m", "--verbose=false", "--enable-cache=yes"}));
  EXPECT_FALSE(b.verbose);
  EXPECT_TRUE(b.cache);
  // A switch never takes the next argument: it is the positional.
  Fixture c;
  ASSERT_TRUE(c.parse({"--verbose", "m"}));
  EXPECT_EQ(c.model, "m");
  EXPECT_NE(usage_error({"m", "--verbose=maybe"}).find("expects true or false"), std::string::npos);
  // --no- applies only to switches.
  EXPECT_NE(usage_error({"m", "--no-count"}).find("unknown flag"), std::string::npos);
}

TEST(FlagParser, MissingValue) {
  // Only a value-taking flag at the end of the line has no value.
  EXPECT_NE(usage_error({"m", "--count"}).find("--count expects a value (N)"), std::string::npos);
  EXPECT_NE(usage_error({"m", "--name"}).find("--name expects a value (TEXT)"), std::string::npos);
  EXPECT_NE(usage_error({"m", "--verbose", "--level"}).find("--level expects a value (N)"),
            std::string::npos);
  EXPECT_NE(usage_error({"m", "-O"}).find("--level expects a value"), std::string::npos);
  EXPECT_NE(usage_error({"m", "--count", "x"}).find("expects an integer"), std::string::npos);
  EXPECT_NE(usage_error({"m", "--config.k"}).find("--config.k expects a value"),
            std::string::npos);
  EXPECT_NE(usage_error({"m", "--names"}).find("--names expects one or more values"),
            std::string::npos);
  // The next argument is the value even when it is a flag (as getopt): a forgotten value
  // shows up as a bad value that names both.
  EXPECT_NE(usage_error({"m", "--count", "--verbose"})
                .find("--count expects an integer, got '--verbose'"),
            std::string::npos);
}

TEST(FlagParser, ValuesMayStartWithADash) {
  Fixture f;
  ASSERT_TRUE(f.parse({"m", "--name", "- item", "--count", "-5", "--ratio", "-0.25", "--level",
                       "-x", "--config.k", "--v", "--verbose"}));
  EXPECT_EQ(f.name, "- item");
  EXPECT_EQ(f.count, -5);
  EXPECT_DOUBLE_EQ(f.ratio, -0.25);
  EXPECT_EQ(f.level, "-x");
  ASSERT_EQ(f.dotted.size(), 1u);
  EXPECT_EQ(f.dotted[0], (std::pair<std::string, std::string>{"k", "--v"}));
  EXPECT_TRUE(f.verbose);  // the parser goes on after the values
  EXPECT_EQ(f.parser.given(), (std::vector<std::string>{"--name", "--count", "--ratio", "--level",
                                                        "--config.k", "--verbose"}));
  // A string flag whose value looks like a long flag, or is "--" itself, or "-".
  Fixture g;
  ASSERT_TRUE(g.parse({"m", "--name", "--verbose", "--limit", "-1", "e"}));
  EXPECT_EQ(g.name, "--verbose");
  EXPECT_FALSE(g.verbose);
  EXPECT_EQ(g.limit, -1);
  EXPECT_EQ(g.extra, "e");
  Fixture h;
  ASSERT_TRUE(h.parse({"m", "--name", "--", "--level", "-"}));
  EXPECT_EQ(h.name, "--");  // a value, not the end of the flags
  EXPECT_EQ(h.level, "-");
  EXPECT_NE(usage_error({"m", "--name", "--", "--level", "-", "-e"}).find("unknown flag '-e'"),
            std::string::npos);
  // The same with an alias and a list: the first value is taken as is, the list then stops
  // at the next flag.
  Fixture k;
  ASSERT_TRUE(k.parse({"m", "-O", "-1", "-n", "-a", "b", "--verbose"}));
  EXPECT_EQ(k.level, "-1");
  EXPECT_EQ(k.names, (std::vector<std::string>{"-a", "b"}));
  EXPECT_TRUE(k.verbose);
  // A switch never takes the next argument: a number after it is a positional, anything else
  // starting with '-' a flag.
  Fixture s;
  ASSERT_TRUE(s.parse({"m", "--verbose", "-5"}));
  EXPECT_TRUE(s.verbose);
  EXPECT_EQ(s.extra, "-5");
  EXPECT_NE(usage_error({"m", "--verbose", "-x"}).find("unknown flag '-x'"), std::string::npos);
}

TEST(FlagParser, Positionals) {
  Fixture f;
  ASSERT_TRUE(f.parse({"--count", "1", "m", "e"}));
  EXPECT_EQ(f.model, "m");
  EXPECT_EQ(f.extra, "e");
  EXPECT_NE(usage_error({"--count", "1"}).find("missing MODEL"), std::string::npos);
  EXPECT_NE(usage_error({"m", "e", "f"}).find("unexpected argument 'f'"), std::string::npos);
  // After "--" everything is positional.
  Fixture g;
  ASSERT_TRUE(g.parse({"--", "-m"}));
  EXPECT_EQ(g.model, "-m");
}

TEST(FlagParser, UnknownFlagSuggestsClosest) {
  std::string message = usage_error({"m", "--cuont", "1"});
  EXPECT_NE(message.find("unknown flag '--cuont'"), std::string::npos);
  EXPECT_NE(message.find("did you mean '--count'?"), std::string::npos);
  EXPECT_NE(usage_error({"m", "--no-enable-cach"}).find("'--no-enable-cache'"), std::string::npos);
  // A misspelt prefix family keeps its key.
  EXPECT_NE(usage_error({"m", "--confg.key", "1"}).find("'--config.key'"), std::string::npos);
  EXPECT_EQ(usage_error({"m", "--completely-unrelated-flag"}).find("did you mean"),
            std::string::npos);
}

TEST(FlagParser, AliasesAndAttachedValues) {
  Fixture f;
  ASSERT_TRUE(f.parse({"m", "-O3", "-n", "a", "b"}));
  EXPECT_EQ(f.level, "3");
  EXPECT_EQ(f.names, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(f.parser.was_set("--level"));
  Fixture g;
  ASSERT_TRUE(g.parse({"m", "-O", "2"}));
  EXPECT_EQ(g.level, "2");
  Fixture h;
  ASSERT_TRUE(h.parse({"m", "-O=1"}));
  EXPECT_EQ(h.level, "1");
}

TEST(FlagParser, ListsStopAtTheNextFlag) {
  Fixture f;
  ASSERT_TRUE(f.parse({"m", "--names", "a", "b", "--verbose", "--names=c"}));
  EXPECT_EQ(f.names, (std::vector<std::string>{"c"}));
  EXPECT_EQ(f.list_calls, 2);
  EXPECT_TRUE(f.verbose);
  // argparse's nargs='+' is greedy too: the model must come first.
  Fixture g;
  ASSERT_TRUE(g.parse({"m", "--names", "a", "e"}));
  EXPECT_EQ(g.names, (std::vector<std::string>{"a", "e"}));
}

TEST(FlagParser, PrefixFamilies) {
  Fixture f;
  ASSERT_TRUE(f.parse({"m", "--config.a", "1", "--config.b.c={\"x\": 2}"}));
  ASSERT_EQ(f.dotted.size(), 2u);
  EXPECT_EQ(f.dotted[0], (std::pair<std::string, std::string>{"a", "1"}));
  EXPECT_EQ(f.dotted[1], (std::pair<std::string, std::string>{"b.c", "{\"x\": 2}"}));
  EXPECT_EQ(f.parser.given(), (std::vector<std::string>{"--config.a", "--config.b.c"}));
}

TEST(FlagParser, JsonFlagsTakeBothForms) {
  nlohmann::json config = nlohmann::json::object();
  FlagParser parser("test [flags]", "JSON flags.");
  parser.add_json("--config", "a JSON object", [&](const nlohmann::json& update) {
    merge_json_object(config, "--config", update);
  });
  ASSERT_TRUE(
      parser.parse(Args{"--config", R"({"a": {"x": 1}, "b": 2})", "--config.a.y", "true",
                        "--config.name", "dspark", "--config.size=16k", "--config.b", "[1, 2]"}));
  EXPECT_EQ(config, nlohmann::json::parse(
                        R"({"a": {"x": 1, "y": true}, "b": [1, 2], "name": "dspark",
                            "size": 16000})"));
  EXPECT_EQ(parser.given(), (std::vector<std::string>(5, "--config")));
  FlagParser bad("test [flags]", "JSON flags.");
  bad.add_json("--config", "a JSON object",
               [&](const nlohmann::json& u) { merge_json_object(config, "--config", u); });
  EXPECT_THROW(bad.parse(Args{"--config", "{not json"}), UsageError);
  EXPECT_THROW(bad.parse(Args{"--config", "5"}), UsageError);
  EXPECT_THROW(bad.parse(Args{"--config..x", "5"}), UsageError);
  EXPECT_EQ(parse_json_flag_value("/models/x"), "/models/x");
  EXPECT_EQ(parse_json_flag_value("\"quoted\""), "quoted");
  EXPECT_EQ(parse_json_flag_value("2.5"), 2.5);
}

TEST(FlagParser, HelpListsEverythingByGroup) {
  Fixture f;
  std::string help = f.parser.help();
  for (const auto& name : f.parser.flag_names()) EXPECT_NE(help.find(name), std::string::npos);
  EXPECT_NE(help.find("--config.KEY VALUE"), std::string::npos);
  EXPECT_NE(help.find("--level, -O N"), std::string::npos);
  EXPECT_NE(help.find("\nCache:\n"), std::string::npos);
  EXPECT_LT(help.find("--verbose"), help.find("\nCache:\n"));
  EXPECT_GT(help.find("--enable-cache"), help.find("\nCache:\n"));
  EXPECT_NE(help.find("(default: 3)"), std::string::npos);
  EXPECT_NE(f.parser.help_matching("cache").find("--limit"), std::string::npos);
  EXPECT_EQ(f.parser.help_matching("ratio").find("--count"), std::string::npos);
  EXPECT_NE(f.parser.help_matching("nothing-like-it").find("no group or flag"), std::string::npos);
  Fixture g;
  testing::internal::CaptureStdout();
  EXPECT_FALSE(g.parse({"--help"}));  // no MODEL needed
  EXPECT_NE(testing::internal::GetCapturedStdout().find("usage: flint test"), std::string::npos);
}

TEST(FlagValues, HumanReadableIntegers) {
  EXPECT_EQ(parse_human_int("f", "4096"), 4096);
  EXPECT_EQ(parse_human_int("f", "-1"), -1);
  EXPECT_EQ(parse_human_int("f", "16k"), 16000);
  EXPECT_EQ(parse_human_int("f", "16K"), 16384);
  EXPECT_EQ(parse_human_int("f", "25.6k"), 25600);
  EXPECT_EQ(parse_human_int("f", "8G"), int64_t{8} << 30);
  EXPECT_EQ(parse_human_int("f", "1m"), 1000000);
  EXPECT_THROW(parse_human_int("f", "1.5K"), UsageError);
  EXPECT_THROW(parse_human_int("f", "k"), UsageError);
  EXPECT_THROW(parse_human_int("f", "12x"), UsageError);
  EXPECT_THROW(parse_human_int("f", "99999999T"), UsageError);
}

TEST(FlagValues, Choices) {
  static constexpr std::string_view kChoices[] = {"fcfs", "priority"};
  EXPECT_EQ(parse_choice("--policy", "fcfs", kChoices), "fcfs");
  try {
    parse_choice("--policy", "priorty", kChoices);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'priority'?"), std::string::npos);
  }
  EXPECT_THROW(parse_double("--x", "nan"), UsageError);
  EXPECT_TRUE(parse_bool("--x", "ON"));
}

}  // namespace
}  // namespace flint::cli
