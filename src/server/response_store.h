// The responses /v1/responses keeps: for previous_response_id, GET and DELETE /v1/responses/{id}.
//
// A stored response is its response object (as GET returns it) and its conversation: every
// message up to and including its own output, as chat messages. Conversations are chains of
// immutable turns shared between the responses of one thread (response N+1 points at N's
// turns), so a Codex session of 200 requests holds each message once, not 200 times.
//
// Bounds (docs/server.md): at most `max_entries` responses (1,000 by default) and about
// `max_bytes` of response objects plus conversation text (256 MiB by default), whichever is
// reached first; the least recently used (stored, read or chained from) goes first. The bytes
// count every live turn once, including the turns of an evicted response that a newer one
// still chains from. Nothing is written to disk: a restart forgets everything.
//
// Thread-safe: every method takes one lock briefly (the engine thread stores, HTTP threads
// read). Turns are immutable and may be read without the lock once obtained.
#pragma once

#include <atomic>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/chat_types.h"

namespace flint::server {

// The messages one response added to its conversation (its input items, then its output as
// an assistant turn), linked to the turn before it.
class ConversationTurn {
 public:
  // `live_bytes` counts the bytes of every turn alive; may be null (not counted).
  ConversationTurn(std::shared_ptr<const ConversationTurn> previous,
                   std::vector<ChatMessage> messages,
                   std::shared_ptr<std::atomic<std::size_t>> live_bytes = nullptr);
  // Frees the chain behind it iteratively (a chain of 100k turns must not overflow the stack).
  ~ConversationTurn();
  ConversationTurn(const ConversationTurn&) = delete;
  ConversationTurn& operator=(const ConversationTurn&) = delete;

  const std::shared_ptr<const ConversationTurn>& previous() const { return previous_; }
  const std::vector<ChatMessage>& messages() const { return messages_; }
  // Approximate heap bytes of this turn's messages.
  std::size_t bytes() const { return bytes_; }

 private:
  // mutable: only the destructor moves it out, to unlink the chain without recursion.
  mutable std::shared_ptr<const ConversationTurn> previous_;
  std::vector<ChatMessage> messages_;
  std::size_t bytes_ = 0;
  std::shared_ptr<std::atomic<std::size_t>> live_bytes_;
};

// The whole conversation ending with `last`, oldest message first (empty for null).
// Cost: copies every message of the chain.
std::vector<ChatMessage> flatten_conversation(const std::shared_ptr<const ConversationTurn>& last);

// Approximate heap bytes of a message (its strings).
std::size_t chat_message_bytes(const ChatMessage& message);

struct StoredResponse {
  std::string response_json;                             // the response object, compact JSON
  std::shared_ptr<const ConversationTurn> conversation;  // up to and including its output
};

class ResponseStore {
 public:
  static constexpr std::size_t kDefaultMaxEntries = 1000;
  static constexpr std::size_t kDefaultMaxBytes = std::size_t{256} << 20;

  explicit ResponseStore(std::size_t max_entries = kDefaultMaxEntries,
                         std::size_t max_bytes = kDefaultMaxBytes);
  ResponseStore(const ResponseStore&) = delete;
  ResponseStore& operator=(const ResponseStore&) = delete;

  // A turn whose bytes this store counts (use it for every turn that may be stored).
  std::shared_ptr<const ConversationTurn> make_turn(
      std::shared_ptr<const ConversationTurn> previous, std::vector<ChatMessage> messages) const;

  // Stores (or replaces) `id`, then evicts the least recently used entries beyond the bounds
  // (never the one just stored).
  void put(const std::string& id, StoredResponse response);
  // The entry, marked most recently used; nullopt when unknown (never stored, deleted, evicted).
  std::optional<StoredResponse> get(std::string_view id);
  // False when unknown.
  bool erase(std::string_view id);

  std::size_t size() const;
  // Bytes counted against max_bytes: response objects plus live conversation turns.
  std::size_t bytes() const;

 private:
  struct Entry {
    StoredResponse response;
    std::list<std::string>::iterator lru;  // position in lru_
  };
  void evict_locked();

  const std::size_t max_entries_;
  const std::size_t max_bytes_;
  std::shared_ptr<std::atomic<std::size_t>> live_turn_bytes_;
  mutable std::mutex mutex_;
  std::list<std::string> lru_;  // ids, most recently used first
  std::unordered_map<std::string, Entry> entries_;
  std::size_t json_bytes_ = 0;  // sum of the entries' response_json sizes
};

}  // namespace flint::server
