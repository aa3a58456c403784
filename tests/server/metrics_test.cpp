// The /metrics exposition: read back with a small parser written here (not the renderer's
// helpers), checking the text format's rules (HELP and TYPE per family, cumulative buckets
// ending in +Inf == _count), where observations land, label escaping, the engine's gauges and
// counters, and concurrent observation while scraping (also run under ThreadSanitizer).
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace flint::server {
namespace {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::map<std::string, std::string> help, type;  // by family name
  std::vector<Sample> samples;                    // in order of appearance
  std::vector<std::string> errors;                // lines the parser could not read

  // Samples of `name` whose labels include every pair of `match`.
  std::vector<Sample> find(const std::string& name,
                           const std::map<std::string, std::string>& match = {}) const {
    std::vector<Sample> out;
    for (const Sample& s : samples) {
      if (s.name != name) continue;
      bool ok = true;
      for (const auto& [k, v] : match) {
        auto it = s.labels.find(k);
        ok = ok && it != s.labels.end() && it->second == v;
      }
      if (ok) out.push_back(s);
    }
    return out;
  }
  // The one sample of `name` with `match`; NaN (and a test failure) unless exactly one.
  double value(const std::string& name,
               const std::map<std::string, std::string>& match = {}) const {
    const auto found = find(name, match);
    EXPECT_EQ(found.size(), 1u) << name;
    return found.size() == 1 ? found[0].value : std::numeric_limits<double>::quiet_NaN();
  }
};

bool is_name_char(char c, bool first) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
         (!first && std::isdigit(static_cast<unsigned char>(c)));
}

// Reads `name{label="value",...} number` lines and `# HELP` / `# TYPE` comments.
Exposition parse(const std::string& text) {
  Exposition e;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      const std::string rest = line.substr(7);
      const size_t space = rest.find(' ');
      if (space == std::string::npos) {
        e.errors.push_back(line);
        continue;
      }
      auto& map = line[2] == 'H' ? e.help : e.type;
      if (!map.emplace(rest.substr(0, space), rest.substr(space + 1)).second) {
        e.errors.push_back("repeated: " + line);
      }
      continue;
    }
    if (line[0] == '#') continue;
    Sample s;
    size_t i = 0;
    while (i < line.size() && is_name_char(line[i], i == 0)) ++i;
    s.name = line.substr(0, i);
    bool ok = !s.name.empty();
    if (ok && i < line.size() && line[i] == '{') {
      ++i;
      while (ok && i < line.size() && line[i] != '}') {
        const size_t eq = line.find('=', i);
        ok = eq != std::string::npos && eq + 1 < line.size() && line[eq + 1] == '"';
        if (!ok) break;
        const std::string key = line.substr(i, eq - i);
        std::string value;
        for (i = eq + 2; i < line.size() && line[i] != '"'; ++i) {
          if (line[i] == '\\' && i + 1 < line.size()) {
            const char next = line[++i];
            value += next == 'n' ? '\n' : next;
          } else {
            value += line[i];
          }
        }
        ok = i < line.size() && s.labels.emplace(key, value).second;
        ++i;  // the closing quote
        if (ok && i < line.size() && line[i] == ',') ++i;
      }
      ok = ok && i < line.size() && line[i] == '}';
      ++i;
    }
    ok = ok && i < line.size() && line[i] == ' ';
    if (ok) {
      const std::string number = line.substr(i + 1);
      char* end = nullptr;
      s.value = std::strtod(number.c_str(), &end);
      ok = !number.empty() && end == number.c_str() + number.size();
    }
    if (ok) {
      e.samples.push_back(std::move(s));
    } else {
      e.errors.push_back(line);
    }
  }
  return e;
}

std::string family_of(const Exposition& e, const std::string& sample_name) {
  if (e.type.count(sample_name)) return sample_name;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (sample_name.size() > s.size() &&
        sample_name.compare(sample_name.size() - s.size(), s.size(), s) == 0) {
      const std::string base = sample_name.substr(0, sample_name.size() - s.size());
      if (e.type.count(base) && e.type.at(base) == "histogram") return base;
    }
  }
  return "";
}

const std::map<std::string, std::string> kExpectedTypes = {
    {"flint:num_requests_running", "gauge"},
    {"flint:num_requests_waiting", "gauge"},
    {"flint:kv_cache_usage_perc", "gauge"},
    {"flint:prefix_cache_queries_total", "counter"},
    {"flint:prefix_cache_hits_total", "counter"},
    {"flint:num_preemptions_total", "counter"},
    {"flint:spec_decode_num_drafts_total", "counter"},
    {"flint:spec_decode_num_draft_tokens_total", "counter"},
    {"flint:spec_decode_num_accepted_tokens_total", "counter"},
    {"flint:prompt_tokens_total", "counter"},
    {"flint:generation_tokens_total", "counter"},
    {"flint:request_success_total", "counter"},
    {"flint:time_to_first_token_seconds", "histogram"},
    {"flint:inter_token_latency_seconds", "histogram"},
    {"flint:e2e_request_latency_seconds", "histogram"},
    {"flint:request_queue_time_seconds", "histogram"},
    {"flint:request_prompt_tokens", "histogram"},
    {"flint:request_generation_tokens", "histogram"},
    {"flint:request_params_max_tokens", "histogram"},
};

Metrics::FinishedRequest finished(std::string reason, double e2e = 1.0, int64_t prompt = 10,
                                  int64_t generated = 20) {
  Metrics::FinishedRequest r;
  r.e2e_seconds = e2e;
  r.queue_seconds = 0.1;
  r.prompt_tokens = prompt;
  r.generation_tokens = generated;
  r.max_tokens = 100;
  r.finish_reason = std::move(reason);
  return r;
}

// Buckets of a histogram in order: (le, cumulative count).
std::vector<std::pair<std::string, double>> buckets(const Exposition& e, const std::string& name) {
  std::vector<std::pair<std::string, double>> out;
  for (const Sample& s : e.find(name + "_bucket")) out.emplace_back(s.labels.at("le"), s.value);
  return out;
}

double bucket(const Exposition& e, const std::string& name, const std::string& le) {
  return e.value(name + "_bucket", {{"le", le}});
}

TEST(Metrics, EveryFamilyHasHelpAndType) {
  Metrics metrics("m");
  metrics.observe_time_to_first_token(0.2);
  metrics.observe_finished(finished("stop"));
  const std::string text = metrics.render({});
  const Exposition e = parse(text);
  EXPECT_TRUE(e.errors.empty()) << e.errors.front();
  EXPECT_EQ(text.back(), '\n');

  for (const auto& [name, type] : kExpectedTypes) {
    ASSERT_TRUE(e.type.count(name)) << name;
    EXPECT_EQ(e.type.at(name), type) << name;
    EXPECT_TRUE(e.help.count(name) && !e.help.at(name).empty()) << name;
  }
  for (const auto& [name, type] : e.type) EXPECT_TRUE(e.help.count(name)) << name;
  for (const auto& [name, help] : e.help) EXPECT_TRUE(e.type.count(name)) << name;
  std::set<std::string> with_samples;
  for (const Sample& s : e.samples) {
    const std::string family = family_of(e, s.name);
    EXPECT_FALSE(family.empty()) << "sample of no declared family: " << s.name;
    with_samples.insert(family);
    EXPECT_EQ(s.labels.count("model_name"), 1u) << s.name;
    EXPECT_EQ(s.labels.at("model_name"), "m");
  }
  for (const auto& [name, type] : e.type) EXPECT_TRUE(with_samples.count(name)) << name;
}

TEST(Metrics, HelpAndTypeComeBeforeTheirSamples) {
  Metrics metrics("m");
  std::istringstream in(metrics.render({}));
  std::set<std::string> declared;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      declared.insert(line.substr(7, line.find(' ', 7) - 7));
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    const std::string name = line.substr(0, line.find_first_of("{ "));
    bool ok = declared.count(name) > 0;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const size_t n = std::string(suffix).size();
      ok = ok || (name.size() > n && declared.count(name.substr(0, name.size() - n)));
    }
    EXPECT_TRUE(ok) << line;
  }
}

TEST(Metrics, BucketsAreCumulativeAndEndAtCount) {
  Metrics metrics("m");
  for (double s : {0.0005, 0.003, 0.3, 0.3, 2.0, 9.0, 100.0, 5000.0}) {
    metrics.observe_time_to_first_token(s);
    metrics.observe_inter_token_latency(s, 2);
    metrics.observe_finished(
        finished("stop", s, static_cast<int64_t>(s * 1000), static_cast<int64_t>(s * 10)));
  }
  const Exposition e = parse(metrics.render({}));
  ASSERT_TRUE(e.errors.empty()) << e.errors.front();
  for (const auto& [name, type] : kExpectedTypes) {
    if (type != "histogram") continue;
    const auto b = buckets(e, name);
    ASSERT_GE(b.size(), 2u) << name;
    EXPECT_EQ(b.back().first, "+Inf") << name;
    double previous_le = -std::numeric_limits<double>::infinity(), previous_count = 0;
    for (const auto& [le, count] : b) {
      const double bound = std::strtod(le.c_str(), nullptr);
      EXPECT_GT(bound, previous_le) << name << " le=" << le;
      EXPECT_GE(count, previous_count) << name << " le=" << le;
      previous_le = bound;
      previous_count = count;
    }
    EXPECT_EQ(b.back().second, e.value(name + "_count")) << name;
    EXPECT_GT(b.back().second, 0) << name;
  }
  EXPECT_EQ(e.value("flint:time_to_first_token_seconds_count"), 8);
  EXPECT_EQ(e.value("flint:inter_token_latency_seconds_count"), 16);
  EXPECT_EQ(e.value("flint:e2e_request_latency_seconds_count"), 8);
}

TEST(Metrics, TimeToFirstTokenLandsInItsBuckets) {
  Metrics metrics("m");
  metrics.observe_time_to_first_token(0.3);
  const Exposition e = parse(metrics.render({}));
  const std::string h = "flint:time_to_first_token_seconds";
  for (const auto& [le, count] : buckets(e, h)) {
    const bool above = le == "+Inf" || std::strtod(le.c_str(), nullptr) >= 0.3;
    EXPECT_EQ(count, above ? 1 : 0) << "le=" << le;
  }
  EXPECT_EQ(bucket(e, h, "0.25"), 0);
  EXPECT_EQ(bucket(e, h, "0.5"), 1);
  EXPECT_EQ(bucket(e, h, "2560.0"), 1);
  EXPECT_EQ(e.value(h + "_count"), 1);
  EXPECT_DOUBLE_EQ(e.value(h + "_sum"), 0.3);
}

TEST(Metrics, ValueOnABoundCountsInThatBucket) {
  Metrics metrics("m");
  metrics.observe_time_to_first_token(0.5);  // le means "less than or equal"
  const Exposition e = parse(metrics.render({}));
  EXPECT_EQ(bucket(e, "flint:time_to_first_token_seconds", "0.25"), 0);
  EXPECT_EQ(bucket(e, "flint:time_to_first_token_seconds", "0.5"), 1);
}

TEST(Metrics, BucketBoundsAreVllms) {
  Metrics metrics("m");
  const Exposition e = parse(metrics.render({}));
  auto les = [&](const std::string& name) {
    std::vector<std::string> out;
    for (const auto& [le, count] : buckets(e, name)) out.push_back(le);
    return out;
  };
  EXPECT_EQ(les("flint:time_to_first_token_seconds"),
            (std::vector<std::string>{"0.001", "0.005", "0.01",  "0.02",   "0.04", "0.06",
                                      "0.08",  "0.1",   "0.25",  "0.5",    "0.75", "1.0",
                                      "2.5",   "5.0",   "7.5",   "10.0",   "20.0", "40.0",
                                      "80.0",  "160.0", "640.0", "2560.0", "+Inf"}));
  EXPECT_EQ(les("flint:inter_token_latency_seconds"),
            (std::vector<std::string>{"0.01", "0.025", "0.05", "0.075", "0.1",  "0.15", "0.2",
                                      "0.3",  "0.4",   "0.5",  "0.75",  "1.0",  "2.5",  "5.0",
                                      "7.5",  "10.0",  "20.0", "40.0",  "80.0", "+Inf"}));
  const std::vector<std::string> latency = {"0.3",   "0.5",    "0.8",    "1.0",   "1.5",   "2.0",
                                            "2.5",   "5.0",    "10.0",   "15.0",  "20.0",  "30.0",
                                            "40.0",  "50.0",   "60.0",   "120.0", "240.0", "480.0",
                                            "960.0", "1920.0", "7680.0", "+Inf"};
  EXPECT_EQ(les("flint:e2e_request_latency_seconds"), latency);
  EXPECT_EQ(les("flint:request_queue_time_seconds"), latency);
  const std::vector<std::string> tokens = {"1.0",      "2.0",      "5.0",      "10.0",    "20.0",
                                           "50.0",     "100.0",    "200.0",    "500.0",   "1000.0",
                                           "2000.0",   "5000.0",   "10000.0",  "20000.0", "50000.0",
                                           "100000.0", "200000.0", "500000.0", "1e+06",   "+Inf"};
  EXPECT_EQ(les("flint:request_prompt_tokens"), tokens);
  EXPECT_EQ(les("flint:request_generation_tokens"), tokens);
  EXPECT_EQ(les("flint:request_params_max_tokens"), tokens);
}

TEST(Metrics, SumsAddUpObservations) {
  Metrics metrics("m");
  metrics.observe_time_to_first_token(0.25);
  metrics.observe_time_to_first_token(1.5);
  metrics.observe_inter_token_latency(0.2);
  metrics.observe_inter_token_latency(0.09, 3);  // three tokens of 0.03 s
  metrics.observe_inter_token_latency(1.0, 0);   // no tokens: nothing to observe
  Metrics::FinishedRequest a = finished("stop", 2.0, 1000, 30);
  a.queue_seconds = 0.5;
  a.max_tokens = 64;
  Metrics::FinishedRequest b = finished("length", 3.5, 24, 2000);
  b.queue_seconds = 0.25;
  b.max_tokens = 0;  // unset: not in request_params_max_tokens
  Metrics::FinishedRequest c = finished("abort", 0.5, 7, 0);
  c.queue_seconds = -1;  // never scheduled: not in request_queue_time_seconds
  c.max_tokens = 10;
  for (const auto& r : {a, b, c}) metrics.observe_finished(r);

  const Exposition e = parse(metrics.render({}));
  EXPECT_DOUBLE_EQ(e.value("flint:time_to_first_token_seconds_sum"), 1.75);
  EXPECT_EQ(e.value("flint:time_to_first_token_seconds_count"), 2);
  EXPECT_NEAR(e.value("flint:inter_token_latency_seconds_sum"), 0.29, 1e-12);
  EXPECT_EQ(e.value("flint:inter_token_latency_seconds_count"), 4);
  EXPECT_EQ(bucket(e, "flint:inter_token_latency_seconds", "0.01"), 0);
  EXPECT_EQ(bucket(e, "flint:inter_token_latency_seconds", "0.05"), 3);
  EXPECT_EQ(bucket(e, "flint:inter_token_latency_seconds", "0.2"), 4);
  EXPECT_DOUBLE_EQ(e.value("flint:e2e_request_latency_seconds_sum"), 6.0);
  EXPECT_EQ(e.value("flint:e2e_request_latency_seconds_count"), 3);
  EXPECT_DOUBLE_EQ(e.value("flint:request_queue_time_seconds_sum"), 0.75);
  EXPECT_EQ(e.value("flint:request_queue_time_seconds_count"), 2);
  EXPECT_EQ(e.value("flint:request_prompt_tokens_sum"), 1031);
  EXPECT_EQ(e.value("flint:request_prompt_tokens_count"), 3);
  EXPECT_EQ(bucket(e, "flint:request_prompt_tokens", "1000.0"), 3);
  EXPECT_EQ(bucket(e, "flint:request_prompt_tokens", "500.0"), 2);
  EXPECT_EQ(e.value("flint:request_generation_tokens_sum"), 2030);
  EXPECT_EQ(bucket(e, "flint:request_generation_tokens", "1.0"), 1);  // the 0
  EXPECT_EQ(bucket(e, "flint:request_generation_tokens", "2000.0"), 3);
  EXPECT_EQ(e.value("flint:request_params_max_tokens_sum"), 74);
  EXPECT_EQ(e.value("flint:request_params_max_tokens_count"), 2);
  EXPECT_EQ(e.value("flint:prompt_tokens_total"), 1031);
  EXPECT_EQ(e.value("flint:generation_tokens_total"), 2030);
}

TEST(Metrics, NonFiniteObservationsAreDropped) {
  Metrics metrics("m");
  metrics.observe_time_to_first_token(std::numeric_limits<double>::quiet_NaN());
  metrics.observe_time_to_first_token(std::numeric_limits<double>::infinity());
  metrics.observe_time_to_first_token(0.1);
  const Exposition e = parse(metrics.render({}));
  EXPECT_EQ(e.value("flint:time_to_first_token_seconds_count"), 1);
  EXPECT_DOUBLE_EQ(e.value("flint:time_to_first_token_seconds_sum"), 0.1);
}

TEST(Metrics, EscapesTheModelName) {
  const std::string name = "my \"best\" model\\v4\nnext";
  Metrics metrics(name);
  const std::string text = metrics.render({});
  EXPECT_NE(text.find(R"(model_name="my \"best\" model\\v4\nnext")"), std::string::npos);
  const Exposition e = parse(text);
  ASSERT_TRUE(e.errors.empty()) << e.errors.front();
  ASSERT_FALSE(e.samples.empty());
  for (const Sample& s : e.samples) EXPECT_EQ(s.labels.at("model_name"), name) << s.name;
}

TEST(Metrics, GaugesAndCountersFromEngineStats) {
  engine::EngineStats stats;
  stats.running = 3;
  stats.waiting = 7;
  stats.kv_pages_total = 200;
  stats.kv_pages_used = 50;
  stats.kv_pages_free = 150;
  stats.prefix_queries = 12345;
  stats.prefix_hits = 678;
  stats.preemptions = 4;
  stats.spec_drafts = 11;
  stats.spec_draft_tokens = 33;
  stats.spec_accepted_tokens = 22;
  stats.generated_tokens = 999;  // not a series of its own
  Metrics metrics("m");
  const Exposition e = parse(metrics.render(stats));
  EXPECT_EQ(e.value("flint:num_requests_running"), 3);
  EXPECT_EQ(e.value("flint:num_requests_waiting"), 7);
  EXPECT_DOUBLE_EQ(e.value("flint:kv_cache_usage_perc"), 0.25);
  EXPECT_EQ(e.value("flint:prefix_cache_queries_total"), 12345);
  EXPECT_EQ(e.value("flint:prefix_cache_hits_total"), 678);
  EXPECT_EQ(e.value("flint:num_preemptions_total"), 4);
  EXPECT_EQ(e.value("flint:spec_decode_num_drafts_total"), 11);
  EXPECT_EQ(e.value("flint:spec_decode_num_draft_tokens_total"), 33);
  EXPECT_EQ(e.value("flint:spec_decode_num_accepted_tokens_total"), 22);
  EXPECT_EQ(e.value("flint:generation_tokens_total"), 0);  // counted from finished requests

  // Large counts stay exact (prometheus_client's exponent spelling keeps every digit).
  stats.prefix_queries = 123456789012;
  EXPECT_EQ(parse(metrics.render(stats)).value("flint:prefix_cache_queries_total"), 123456789012);
}

TEST(Metrics, KvCacheUsageIsZeroWithoutPages) {
  Metrics metrics("m");
  engine::EngineStats stats;
  stats.kv_pages_used = 5;  // inconsistent, but must not divide by zero
  const Exposition e = parse(metrics.render(stats));
  EXPECT_EQ(e.value("flint:kv_cache_usage_perc"), 0);
}

TEST(Metrics, FinishedRequestsCountUnderTheirReason) {
  Metrics metrics("m");
  const auto success = [&](const std::string& reason) {
    return parse(metrics.render({}))
        .value("flint:request_success_total", {{"finished_reason", reason}});
  };
  for (const char* reason : {"stop", "length", "abort", "error"}) EXPECT_EQ(success(reason), 0);
  EXPECT_EQ(parse(metrics.render({})).find("flint:request_success_total").size(), 4u);

  metrics.observe_finished(finished("length"));
  EXPECT_EQ(success("length"), 1);
  EXPECT_EQ(success("stop"), 0);
  metrics.observe_finished(finished("stop"));
  metrics.observe_finished(finished("stop"));
  metrics.observe_finished(finished("abort"));
  metrics.observe_finished(finished("error"));
  metrics.observe_finished(finished("mystery"));  // unknown: an error
  metrics.observe_finished(finished(""));
  EXPECT_EQ(success("stop"), 2);
  EXPECT_EQ(success("length"), 1);
  EXPECT_EQ(success("abort"), 1);
  EXPECT_EQ(success("error"), 3);
  EXPECT_EQ(parse(metrics.render({})).value("flint:e2e_request_latency_seconds_count"), 7);
}

TEST(Metrics, ConcurrentObservationsWhileScraping) {
  Metrics metrics("m");
  constexpr int kThreads = 4, kPerThread = 5000;
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    while (!done.load()) {
      const Exposition e = parse(metrics.render({}));
      EXPECT_TRUE(e.errors.empty());
      const auto b = buckets(e, "flint:time_to_first_token_seconds");
      if (!b.empty()) {
        EXPECT_EQ(b.back().second, e.value("flint:time_to_first_token_seconds_count"));
      }
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        metrics.observe_time_to_first_token(0.3);
        metrics.observe_inter_token_latency(0.02, 2);
        metrics.observe_finished(finished(t % 2 ? "stop" : "length", 1.0, 3, 5));
      }
    });
  }
  for (auto& th : threads) th.join();
  done = true;
  scraper.join();

  const Exposition e = parse(metrics.render({}));
  constexpr double n = kThreads * kPerThread;
  EXPECT_EQ(e.value("flint:time_to_first_token_seconds_count"), n);
  EXPECT_NEAR(e.value("flint:time_to_first_token_seconds_sum"), 0.3 * n, 1e-6 * n);
  EXPECT_EQ(bucket(e, "flint:time_to_first_token_seconds", "0.25"), 0);
  EXPECT_EQ(bucket(e, "flint:time_to_first_token_seconds", "0.5"), n);
  EXPECT_EQ(e.value("flint:inter_token_latency_seconds_count"), 2 * n);
  EXPECT_EQ(e.value("flint:e2e_request_latency_seconds_count"), n);
  EXPECT_EQ(e.value("flint:request_success_total", {{"finished_reason", "stop"}}), n / 2);
  EXPECT_EQ(e.value("flint:request_success_total", {{"finished_reason", "length"}}), n / 2);
  EXPECT_EQ(e.value("flint:prompt_tokens_total"), 3 * n);
  EXPECT_EQ(e.value("flint:generation_tokens_total"), 5 * n);
}

}  // namespace
}  // namespace flint::server
