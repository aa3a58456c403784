#include "server/api_context.h"

#include <chrono>
#include <random>

#include "server/api_error.h"

namespace flint::server {

ApiContext::ApiContext(ServerConfig config, engine::Engine& engine,
                       const text::Tokenizer& tokenizer, Metrics& metrics)
    : config_(std::move(config)), engine_(engine), tokenizer_(tokenizer), metrics_(metrics) {
  if (config_.served_model_names.empty()) config_.served_model_names.push_back(config_.model_root);
  id_seed_ = std::random_device{}();
  id_seed_ = (id_seed_ << 32) ^ std::random_device{}();
}

void ApiContext::check_model(const Json& body) const {
  const std::optional<std::string> model = get_string(body, "model");
  if (!model) return;
  for (const auto& name : config_.served_model_names) {
    if (*model == name) return;
  }
  throw ApiError(404, "model", "The model `{}` does not exist (this server serves `{}`)", *model,
                 model_name());
}

std::string ApiContext::make_id(std::string_view prefix) {
  // splitmix64 over a per-server seed and a counter: unique within the server's lifetime and
  // not guessable across servers (ids are not secrets; previous_response_id is scoped anyway).
  uint64_t x = id_seed_ + 0x9E3779B97F4A7C15ull * (id_counter_.fetch_add(1) + 1);
  static constexpr char kAlphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id(prefix);
  for (int block = 0; block < 2; ++block) {
    x += 0x9E3779B97F4A7C15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    for (int i = 0; i < 12; ++i) {
      id += kAlphabet[z % 62];
      z /= 62;
    }
  }
  return id;
}

int64_t ApiContext::unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace flint::server
