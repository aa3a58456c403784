// The response store: LRU bounds by count and bytes, shared conversation chains that outlive
// evicted ancestors, deep chains freed without recursion, concurrent use.
#include "server/response_store.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace flint::server {
namespace {

ChatMessage user(std::string text) {
  ChatMessage m;
  m.role = ChatRole::kUser;
  m.content = std::move(text);
  return m;
}

StoredResponse stored(ResponseStore& store, std::string json,
                      std::shared_ptr<const ConversationTurn> previous = nullptr,
                      std::string text = "x") {
  return {std::move(json), store.make_turn(std::move(previous), {user(std::move(text))})};
}

TEST(ResponseStore, PutGetErase) {
  ResponseStore store(10);
  EXPECT_FALSE(store.get("resp_a"));
  store.put("resp_a", stored(store, R"({"id":"resp_a"})"));
  auto a = store.get("resp_a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->response_json, R"({"id":"resp_a"})");
  EXPECT_EQ(store.size(), 1u);
  EXPECT_GT(store.bytes(), 0u);
  EXPECT_TRUE(store.erase("resp_a"));
  EXPECT_FALSE(store.erase("resp_a"));
  EXPECT_FALSE(store.get("resp_a"));
  EXPECT_EQ(store.size(), 0u);
  a.reset();
  EXPECT_EQ(store.bytes(), 0u);  // the turn died with its last holder
}

TEST(ResponseStore, EvictsTheLeastRecentlyUsedBeyondTheCount) {
  ResponseStore store(2);
  store.put("a", stored(store, "A"));
  store.put("b", stored(store, "B"));
  EXPECT_TRUE(store.get("a"));  // a is now more recent than b
  store.put("c", stored(store, "C"));
  EXPECT_EQ(store.size(), 2u);
  EXPECT_TRUE(store.get("a"));
  EXPECT_FALSE(store.get("b"));
  EXPECT_TRUE(store.get("c"));
  store.put("c", stored(store, "C2"));  // replacing does not evict
  EXPECT_EQ(store.get("c")->response_json, "C2");
  EXPECT_TRUE(store.get("a"));
}

TEST(ResponseStore, EvictsBeyondTheByteBound) {
  const std::string big(10000, 'x');
  ResponseStore store(100, 35000);
  for (int i = 0; i < 5; ++i) store.put(std::to_string(i), stored(store, big));
  EXPECT_LE(store.bytes(), 35000u);
  EXPECT_LT(store.size(), 5u);
  EXPECT_TRUE(store.get("4"));  // the newest stays
  EXPECT_FALSE(store.get("0"));

  // One entry above the bound is still kept (the one just stored is never evicted).
  ResponseStore tiny(10, 10);
  tiny.put("only", stored(tiny, big));
  EXPECT_TRUE(tiny.get("only"));
}

TEST(ResponseStore, ChainsShareTurnsAndSurviveTheirAncestorsEviction) {
  ResponseStore store(2);
  store.put("r1", stored(store, "1", nullptr, "one"));
  store.put("r2", stored(store, "2", store.get("r1")->conversation, "two"));
  store.put("r3", stored(store, "3", store.get("r2")->conversation, "three"));
  EXPECT_FALSE(store.get("r1"));  // evicted, but r3's conversation still starts with it
  const auto messages = flatten_conversation(store.get("r3")->conversation);
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_EQ(messages[0].content, "one");
  EXPECT_EQ(messages[1].content, "two");
  EXPECT_EQ(messages[2].content, "three");
  EXPECT_TRUE(flatten_conversation(nullptr).empty());
}

TEST(ResponseStore, DeepChainIsFreedWithoutRecursion) {
  ResponseStore store(4);
  std::shared_ptr<const ConversationTurn> last;
  for (int i = 0; i < 200000; ++i) last = store.make_turn(std::move(last), {user("m")});
  store.put("deep", {"{}", last});
  EXPECT_EQ(flatten_conversation(store.get("deep")->conversation).size(), 200000u);
  last.reset();
  EXPECT_TRUE(store.erase("deep"));  // would overflow the stack if it recursed per turn
  EXPECT_EQ(store.bytes(), 0u);
}

TEST(ResponseStore, ConcurrentUse) {
  ResponseStore store(50);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&store, t] {
      std::shared_ptr<const ConversationTurn> previous;
      for (int i = 0; i < 500; ++i) {
        const std::string id = std::to_string(t) + "_" + std::to_string(i);
        store.put(id, stored(store, id, previous));
        if (auto got = store.get(id)) previous = got->conversation;
        store.get(std::to_string((t + 1) % 4) + "_" + std::to_string(i));
        if (i % 7 == 0) store.erase(id);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_LE(store.size(), 50u);
}

}  // namespace
}  // namespace flint::server
