#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <iterator>
#include <span>
#include <string_view>
#include <vector>

namespace flint::server {
namespace {

// Bucket upper bounds as vLLM v1 declares them (vllm/v1/metrics/loggers.py), so that panels
// and alerts written against vLLM's buckets read flint's the same way.
constexpr double kTimeToFirstTokenBounds[] = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                              0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                              20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
constexpr double kInterTokenLatencyBounds[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                               0.3,  0.4,   0.5,  0.75,  1.0, 2.5,  5.0,
                                               7.5,  10.0,  20.0, 40.0,  80.0};
// vLLM's request_latency_buckets: e2e, queue, inference, prefill and decode time.
constexpr double kRequestLatencyBounds[] = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                            5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                            60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

// vLLM builds its token-count buckets as 1, 2, 5, 10, 20, 50, ... up to max_model_len
// (build_1_2_5_buckets). Metrics is not told max_model_len, so the series stops at 1e6: the
// one vLLM builds for any max_model_len in [1e6, 2e6), DeepSeek-V4's 1,048,576 among them.
constexpr auto kTokenCountBounds = [] {
  std::array<double, 19> bounds{};
  double decade = 1;
  for (size_t i = 0; i < bounds.size(); ++i) {
    bounds[i] = decade * std::array<double, 3>{1, 2, 5}[i % 3];
    if (i % 3 == 2) decade *= 10;
  }
  return bounds;
}();
static_assert(kTokenCountBounds.back() == 1e6);

constexpr std::array<std::string_view, 4> kFinishReasons = {"stop", "length", "abort", "error"};

// Spells a number the way prometheus_client does (Python's repr, with Go's switch to an
// exponent from 1e6 on), so flint's le labels are byte-equal to vLLM's: a query or panel that
// selects le="1.0" or le="1e+06" finds the same series. Prometheus itself parses either form.
std::string go_float(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  std::string s = fmt::format("{}", v);  // shortest round-trip, like repr() without the ".0"
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  const size_t dot = s.find('.');
  if (v > 0 && dot != std::string::npos && dot > 6 && s.find('e') == std::string::npos) {
    std::string mantissa = s.substr(0, 1) + "." + s.substr(1, dot - 1) + s.substr(dot + 1);
    while (mantissa.back() == '0' || mantissa.back() == '.') mantissa.pop_back();
    return fmt::format("{}e+0{}", mantissa, dot - 1);
  }
  return s;
}

// Label values escape backslash, double quote and line feed (text format 0.0.4); a served
// model name is user-chosen, so any of them can occur.
std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A Prometheus histogram whose buckets are plain per-bucket counters; render() makes them
// cumulative and derives _count from them, so +Inf always equals _count. _sum is a separate
// atomic: a scrape racing an observation may count it in one and not yet in the other, off by
// the observations in flight and right again by the next scrape, which Prometheus tolerates.
class Histogram {
 public:
  explicit Histogram(std::span<const double> bounds)
      : bounds_(bounds), counts_(bounds.size() + 1) {}

  // Counts `value` `n` times.
  void observe(double value, int64_t n = 1) {
    // A NaN or infinity would poison _sum for the life of the process.
    if (!std::isfinite(value) || n <= 0) return;
    // le is inclusive: a value equal to a bound belongs to that bound's bucket.
    const auto i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
    counts_[static_cast<size_t>(i)].fetch_add(n, std::memory_order_relaxed);
    sum_.fetch_add(value * static_cast<double>(n), std::memory_order_relaxed);
  }

  void render(std::string& out, std::string_view name, std::string_view help,
              std::string_view model_label) const {
    fmt::format_to(std::back_inserter(out), "# HELP {0} {1}\n# TYPE {0} histogram\n", name, help);
    int64_t cumulative = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative += counts_[i].load(std::memory_order_relaxed);
      const std::string le = i < bounds_.size() ? go_float(bounds_[i]) : "+Inf";
      fmt::format_to(std::back_inserter(out), "{}_bucket{{le=\"{}\",{}}} {}\n", name, le,
                     model_label, go_float(static_cast<double>(cumulative)));
    }
    fmt::format_to(std::back_inserter(out), "{0}_sum{{{1}}} {2}\n{0}_count{{{1}}} {3}\n", name,
                   model_label, go_float(sum_.load(std::memory_order_relaxed)),
                   go_float(static_cast<double>(cumulative)));
  }

 private:
  std::span<const double> bounds_;
  // [i]: observations in (bounds_[i-1], bounds_[i]]; the last: above every bound.
  std::vector<std::atomic<int64_t>> counts_;
  std::atomic<double> sum_{0};
};

void family(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP {0} {1}\n# TYPE {0} {2}\n", name, help, type);
}

void sample(std::string& out, std::string_view name, std::string_view labels, double value) {
  fmt::format_to(std::back_inserter(out), "{}{{{}}} {}\n", name, labels, go_float(value));
}

double as_double(int64_t v) { return static_cast<double>(v); }

}  // namespace

struct Metrics::Impl {
  std::string model_label;  // model_name="<escaped name>"

  std::atomic<int64_t> prompt_tokens{0}, generation_tokens{0};
  std::array<std::atomic<int64_t>, kFinishReasons.size()> finished{};  // by kFinishReasons

  Histogram time_to_first_token{kTimeToFirstTokenBounds};
  Histogram inter_token_latency{kInterTokenLatencyBounds};
  Histogram e2e_latency{kRequestLatencyBounds};
  Histogram queue_time{kRequestLatencyBounds};
  Histogram prompt_tokens_per_request{kTokenCountBounds};
  Histogram generation_tokens_per_request{kTokenCountBounds};
  Histogram max_tokens_param{kTokenCountBounds};
};

Metrics::Metrics(std::string model_name) : impl_(new Impl) {
  impl_->model_label = fmt::format("model_name=\"{}\"", escape_label_value(model_name));
}

Metrics::~Metrics() { delete impl_; }

void Metrics::observe_time_to_first_token(double seconds) {
  impl_->time_to_first_token.observe(seconds);
}

void Metrics::observe_inter_token_latency(double seconds, int64_t tokens) {
  if (tokens <= 0) return;
  impl_->inter_token_latency.observe(seconds / static_cast<double>(tokens), tokens);
}

void Metrics::observe_finished(const FinishedRequest& request) {
  Impl& m = *impl_;
  const auto it = std::find(kFinishReasons.begin(), kFinishReasons.end(), request.finish_reason);
  // An unknown reason counts as an error, so the four series still add up to all requests.
  const size_t reason = it != kFinishReasons.end()
                            ? static_cast<size_t>(it - kFinishReasons.begin())
                            : kFinishReasons.size() - 1;
  m.finished[reason].fetch_add(1, std::memory_order_relaxed);
  m.prompt_tokens.fetch_add(request.prompt_tokens, std::memory_order_relaxed);
  m.generation_tokens.fetch_add(request.generation_tokens, std::memory_order_relaxed);

  m.e2e_latency.observe(request.e2e_seconds);
  // Negative: the engine never scheduled the request, so it has no queue time to report.
  if (request.queue_seconds >= 0) m.queue_time.observe(request.queue_seconds);
  m.prompt_tokens_per_request.observe(as_double(request.prompt_tokens));
  m.generation_tokens_per_request.observe(as_double(request.generation_tokens));
  // As vLLM: a request without max_tokens does not count in its histogram.
  if (request.max_tokens > 0) m.max_tokens_param.observe(as_double(request.max_tokens));
}

std::string Metrics::render(const engine::EngineStats& stats) const {
  const Impl& m = *impl_;
  const std::string& model = m.model_label;
  std::string out;
  out.reserve(24 * 1024);  // about 215 lines, some 16 KB

  family(out, "flint:num_requests_running", "gauge",
         "Number of requests in model execution batches.");
  sample(out, "flint:num_requests_running", model, as_double(stats.running));
  family(out, "flint:num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  sample(out, "flint:num_requests_waiting", model, as_double(stats.waiting));
  family(out, "flint:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
  sample(out, "flint:kv_cache_usage_perc", model,
         stats.kv_pages_total > 0 ? as_double(stats.kv_pages_used) / as_double(stats.kv_pages_total)
                                  : 0.0);

  // Counter families carry the _total suffix in their HELP and TYPE lines too: that is how
  // prometheus_client (and so vLLM) writes format 0.0.4.
  struct Counter {
    std::string_view name, help;
    int64_t value;
  };
  const Counter counters[] = {
      {"flint:prefix_cache_queries_total",
       "Prefix cache queries, in terms of number of queried tokens.", stats.prefix_queries},
      {"flint:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
       stats.prefix_hits},
      {"flint:num_preemptions_total", "Cumulative number of preemption from the engine.",
       stats.preemptions},
      {"flint:prompt_tokens_total", "Number of prefill tokens processed.",
       m.prompt_tokens.load(std::memory_order_relaxed)},
      {"flint:generation_tokens_total", "Number of generation tokens processed.",
       m.generation_tokens.load(std::memory_order_relaxed)},
      {"flint:spec_decode_num_drafts_total", "Number of spec decoding drafts.", stats.spec_drafts},
      {"flint:spec_decode_num_draft_tokens_total", "Number of draft tokens.",
       stats.spec_draft_tokens},
      {"flint:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.",
       stats.spec_accepted_tokens},
  };
  for (const Counter& c : counters) {
    family(out, c.name, "counter", c.help);
    sample(out, c.name, model, as_double(c.value));
  }

  // As vLLM: accepted draft tokens by position in the draft (only with speculative decoding),
  // and flint's time in drafting beside the forward passes.
  if (!stats.spec_accepted_at.empty()) {
    family(out, "flint:spec_decode_draft_seconds_total", "counter",
           "Seconds spent drafting (the draft model and its context).");
    sample(out, "flint:spec_decode_draft_seconds_total", model, stats.draft_seconds);
    family(out, "flint:forward_seconds_total", "counter",
           "Seconds spent in the target's forward passes (verification included).");
    sample(out, "flint:forward_seconds_total", model, stats.forward_seconds);
    family(out, "flint:spec_decode_num_accepted_tokens_per_pos_total", "counter",
           "Accepted tokens per draft position.");
    for (size_t j = 0; j < stats.spec_accepted_at.size(); ++j) {
      sample(out, "flint:spec_decode_num_accepted_tokens_per_pos_total",
             fmt::format("{},position=\"{}\"", model, j), as_double(stats.spec_accepted_at[j]));
    }
  }

  // Every reason is written, also at 0, so rate() over a reason has a series from the start.
  family(out, "flint:request_success_total", "counter",
         "Count of successfully processed requests.");
  for (size_t i = 0; i < kFinishReasons.size(); ++i) {
    sample(out, "flint:request_success_total",
           fmt::format("finished_reason=\"{}\",{}", kFinishReasons[i], model),
           as_double(m.finished[i].load(std::memory_order_relaxed)));
  }

  m.prompt_tokens_per_request.render(out, "flint:request_prompt_tokens",
                                     "Number of prefill tokens processed.", model);
  m.generation_tokens_per_request.render(out, "flint:request_generation_tokens",
                                         "Number of generation tokens processed.", model);
  m.max_tokens_param.render(out, "flint:request_params_max_tokens",
                            "Histogram of the max_tokens request parameter.", model);
  m.time_to_first_token.render(out, "flint:time_to_first_token_seconds",
                               "Histogram of time to first token in seconds.", model);
  m.inter_token_latency.render(out, "flint:inter_token_latency_seconds",
                               "Histogram of inter-token latency in seconds.", model);
  m.e2e_latency.render(out, "flint:e2e_request_latency_seconds",
                       "Histogram of e2e request latency in seconds.", model);
  m.queue_time.render(out, "flint:request_queue_time_seconds",
                      "Histogram of time spent in WAITING phase for request.", model);
  return out;
}

}  // namespace flint::server
