#include "server/info_endpoints.h"

#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/json_fields.h"

namespace flint::server {

namespace {

Json model_card(const ApiContext& ctx, const std::string& name) {
  return Json{{"id", name},
              {"object", "model"},
              {"created", ApiContext::unix_time()},
              {"owned_by", "flint"},
              {"root", ctx.config().model_root},
              {"parent", nullptr},
              {"max_model_len", ctx.config().max_model_len},
              {"permission", Json::array()}};
}

void respond_json(const std::shared_ptr<Responder>& responder, const Json& body) {
  responder->respond(200, "application/json", dump_json(body));
}

}  // namespace

void handle_models(ApiContext& ctx, std::shared_ptr<Responder> responder) {
  Json data = Json::array();
  for (const auto& name : ctx.config().served_model_names) data.push_back(model_card(ctx, name));
  respond_json(responder, Json{{"object", "list"}, {"data", std::move(data)}});
}

void handle_model(ApiContext& ctx, std::string_view id, std::shared_ptr<Responder> responder) {
  for (const auto& name : ctx.config().served_model_names) {
    if (name == id) return respond_json(responder, model_card(ctx, name));
  }
  throw ApiError(404, "model", "The model `{}` does not exist", id);
}

void handle_metrics(ApiContext& ctx, std::shared_ptr<Responder> responder) {
  responder->respond(200, "text/plain; version=0.0.4; charset=utf-8",
                     ctx.metrics().render(ctx.engine().stats()));
}

void handle_tokenize(ApiContext& ctx, const Request& request,
                     std::shared_ptr<Responder> responder) {
  const Json body = parse_body(request.body);
  ctx.check_model(body);
  std::vector<int32_t> ids;
  if (field(body, "messages") != nullptr) {
    ids = render_chat_prompt(ctx, parse_openai_chat(body)).ids;
  } else {
    const std::optional<std::string> prompt = get_string(body, "prompt");
    if (!prompt) throw ApiError(400, "prompt", "prompt: give \"prompt\" (text) or \"messages\"");
    ctx.tokenizer().encode(*prompt, get_bool(body, "add_special_tokens").value_or(true), ids);
  }
  Json out = {{"count", ids.size()}, {"max_model_len", ctx.config().max_model_len},
              {"tokens", ids}};
  if (get_bool(body, "return_token_strs").value_or(false)) {
    Json strs = Json::array();
    for (int32_t id : ids) strs.push_back(std::string(ctx.tokenizer().token_text(id)));
    out["token_strs"] = std::move(strs);
  } else {
    out["token_strs"] = nullptr;
  }
  respond_json(responder, out);
}

void handle_detokenize(ApiContext& ctx, const Request& request,
                       std::shared_ptr<Responder> responder) {
  const Json body = parse_body(request.body);
  ctx.check_model(body);
  const Json* tokens = get_array(body, "tokens");
  if (tokens == nullptr) throw ApiError(400, "tokens", "tokens: is required (a list of token ids)");
  std::vector<int32_t> ids;
  for (std::size_t i = 0; i < tokens->size(); ++i) {
    const Json& t = (*tokens)[i];
    const std::string path = join_path("tokens", i);
    if (!t.is_number_integer()) {
      throw ApiError(400, path, "{}: expected a token id, got {}", path, json_type_name(t));
    }
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= ctx.tokenizer().vocab_size()) {
      throw ApiError(400, path, "{}: token id {} is outside the vocabulary [0, {})", path, id,
                     ctx.tokenizer().vocab_size());
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  respond_json(responder, Json{{"prompt", ctx.tokenizer().decode(ids)}});
}

}  // namespace flint::server
