// Prometheus metrics of `flint serve` (GET /metrics): the series vLLM users already chart,
// under the same names with a "flint:" prefix instead of "vllm:", labelled
// model_name="<served model name>" (vLLM's `engine` label is left out: one engine), with
// vLLM v1's HELP texts and histogram buckets. The token-count histograms use vLLM's 1-2-5
// series up to 1e6 (what vLLM builds for a max_model_len of 1M).
//
// Thread-safe: observations come from the engine thread, render() runs on the HTTP thread.
// Cost: an observation is a few relaxed atomic adds (histograms: one bucket search over at
// most ~30 bounds), so it can run for every token. A scrape racing an observation may see a
// histogram's count one observation ahead of its sum; the next scrape agrees again.
#pragma once

#include <cstdint>
#include <string>

#include "engine/engine_core.h"

namespace flint::server {

class Metrics {
 public:
  explicit Metrics(std::string model_name);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Seconds from a request's arrival to its first generated token.
  void observe_time_to_first_token(double seconds);
  // Seconds between two consecutive outputs of a request, divided over the `tokens` the later
  // output carried: `tokens` observations of seconds / tokens (none when tokens <= 0). vLLM
  // observes once per output instead, so with speculative decoding (several tokens per
  // output) flint's inter-token latency reads lower than vLLM's would for the same timings.
  void observe_inter_token_latency(double seconds, int64_t tokens = 1);

  struct FinishedRequest {
    double e2e_seconds = 0;    // arrival to the last token
    double queue_seconds = 0;  // arrival to first scheduled by the engine; < 0: never scheduled
    int64_t prompt_tokens = 0;
    int64_t generation_tokens = 0;
    int64_t max_tokens = 0;     // the request's max_tokens (0 when unset)
    std::string finish_reason;  // "stop", "length", "abort", "error"
  };
  // Counts the request in request_success_total under its finish_reason (an unknown reason
  // counts as "error"), adds its tokens to prompt_tokens_total and generation_tokens_total
  // (so those counters move when requests finish, not per step as vLLM's do), and observes
  // the per-request histograms; queue time only when >= 0, max_tokens only when > 0 (as vLLM).
  void observe_finished(const FinishedRequest& request);

  // The Prometheus text exposition format (version 0.0.4; serve it as "text/plain;
  // version=0.0.4; charset=utf-8"): the request counters and histograms above, and the
  // engine's gauges and counters from `stats` (running and waiting requests, KV cache usage
  // as kv_pages_used / kv_pages_total, prefix-cache queries and hits, preemptions,
  // speculative drafts). Numbers are spelled as prometheus_client spells them ("1.0",
  // "1e+06", "+Inf"). About 215 lines, some 16 KB; allocates, so not for the engine thread.
  std::string render(const engine::EngineStats& stats) const;

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace flint::server
