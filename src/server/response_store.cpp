#include "server/response_store.h"

#include <utility>

namespace flint::server {

std::size_t chat_message_bytes(const ChatMessage& message) {
  std::size_t bytes = sizeof(ChatMessage) + message.tool_call_id.size() + message.name.size();
  if (message.content) bytes += message.content->size();
  if (message.reasoning_content) bytes += message.reasoning_content->size();
  for (const ChatToolCall& call : message.tool_calls) {
    bytes += sizeof(ChatToolCall) + call.id.size() + call.name.size() + call.arguments.size();
  }
  return bytes;
}

ConversationTurn::ConversationTurn(std::shared_ptr<const ConversationTurn> previous,
                                   std::vector<ChatMessage> messages,
                                   std::shared_ptr<std::atomic<std::size_t>> live_bytes)
    : previous_(std::move(previous)),
      messages_(std::move(messages)),
      live_bytes_(std::move(live_bytes)) {
  bytes_ = sizeof(ConversationTurn);
  for (const ChatMessage& message : messages_) bytes_ += chat_message_bytes(message);
  if (live_bytes_) live_bytes_->fetch_add(bytes_, std::memory_order_relaxed);
}

ConversationTurn::~ConversationTurn() {
  if (live_bytes_) live_bytes_->fetch_sub(bytes_, std::memory_order_relaxed);
  // Destroying `previous_` normally would recurse once per turn of the chain. Instead walk the
  // chain while we hold its only reference, detaching each turn's predecessor before that turn
  // dies. A turn someone else still holds (another response, a request in flight) stops the
  // walk; no weak references exist, so use_count() == 1 cannot change under us.
  std::shared_ptr<const ConversationTurn> next = std::move(previous_);
  while (next && next.use_count() == 1) {
    std::shared_ptr<const ConversationTurn> after = std::move(next->previous_);
    next = std::move(after);
  }
}

std::vector<ChatMessage> flatten_conversation(const std::shared_ptr<const ConversationTurn>& last) {
  std::vector<const ConversationTurn*> turns;
  std::size_t count = 0;
  for (const ConversationTurn* turn = last.get(); turn != nullptr; turn = turn->previous().get()) {
    turns.push_back(turn);
    count += turn->messages().size();
  }
  std::vector<ChatMessage> messages;
  messages.reserve(count);
  for (auto it = turns.rbegin(); it != turns.rend(); ++it) {
    const auto& turn_messages = (*it)->messages();
    messages.insert(messages.end(), turn_messages.begin(), turn_messages.end());
  }
  return messages;
}

ResponseStore::ResponseStore(std::size_t max_entries, std::size_t max_bytes)
    : max_entries_(max_entries == 0 ? 1 : max_entries),
      max_bytes_(max_bytes),
      live_turn_bytes_(std::make_shared<std::atomic<std::size_t>>(0)) {}

std::shared_ptr<const ConversationTurn> ResponseStore::make_turn(
    std::shared_ptr<const ConversationTurn> previous, std::vector<ChatMessage> messages) const {
  return std::make_shared<const ConversationTurn>(std::move(previous), std::move(messages),
                                                  live_turn_bytes_);
}

void ResponseStore::put(const std::string& id, StoredResponse response) {
  // The replaced entry's turns are released after the lock (their destructor walks chains).
  StoredResponse replaced;
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(id);
    if (it != entries_.end()) {
      json_bytes_ -= it->second.response.response_json.size();
      replaced = std::exchange(it->second.response, std::move(response));
      lru_.splice(lru_.begin(), lru_, it->second.lru);
    } else {
      lru_.push_front(id);
      it = entries_.emplace(id, Entry{std::move(response), lru_.begin()}).first;
    }
    json_bytes_ += it->second.response.response_json.size();
    evict_locked();
  }
}

void ResponseStore::evict_locked() {
  auto over = [&] {
    return entries_.size() > max_entries_ ||
           json_bytes_ + live_turn_bytes_->load(std::memory_order_relaxed) > max_bytes_;
  };
  while (entries_.size() > 1 && over()) {
    auto it = entries_.find(lru_.back());
    json_bytes_ -= it->second.response.response_json.size();
    entries_.erase(it);  // frees its turns unless a newer response chains from them
    lru_.pop_back();
  }
}

std::optional<StoredResponse> ResponseStore::get(std::string_view id) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(std::string(id));
  if (it == entries_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.response;
}

bool ResponseStore::erase(std::string_view id) {
  StoredResponse erased;  // released after the lock
  std::lock_guard lock(mutex_);
  auto it = entries_.find(std::string(id));
  if (it == entries_.end()) return false;
  json_bytes_ -= it->second.response.response_json.size();
  erased = std::move(it->second.response);
  lru_.erase(it->second.lru);
  entries_.erase(it);
  return true;
}

std::size_t ResponseStore::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

std::size_t ResponseStore::bytes() const {
  std::lock_guard lock(mutex_);
  return json_bytes_ + live_turn_bytes_->load(std::memory_order_relaxed);
}

}  // namespace flint::server
