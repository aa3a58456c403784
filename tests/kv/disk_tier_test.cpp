#include "kv/disk_tier.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "base/error.h"

namespace flint::kv {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kIdentity = 0x1d5eed;
constexpr int64_t kHeader = 48;  // the fixed header of the file format (disk_tier.h)

// A fresh directory under the system temp dir, removed with the object.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    static std::mt19937_64 gen(std::random_device{}());
    path = fs::temp_directory_path() / fmt::format("flint-disk-tier-{}-{:x}", tag, gen());
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::vector<uint8_t> payload_of(uint64_t key, std::size_t n) {
  std::mt19937_64 gen(key);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(gen());
  return out;
}

std::string check_of(uint64_t key) { return fmt::format("tokens-of-{}", key); }

DiskTierOptions options(const fs::path& dir, int64_t capacity = int64_t{1} << 30,
                        uint64_t identity = kIdentity) {
  return DiskTierOptions{dir, capacity, identity};
}

fs::path file_of(const fs::path& dir, uint64_t key, uint64_t identity = kIdentity) {
  return dir / fmt::format("{:016x}-{:016x}.kv", identity, key);
}

int64_t file_bytes(uint64_t key, std::size_t payload) {
  return kHeader + static_cast<int64_t>(check_of(key).size() + payload);
}

void put_block(DiskTier& tier, uint64_t key, std::size_t n) {
  tier.put(key, check_of(key), payload_of(key, n));
}

void flip_byte(const fs::path& file, std::size_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f) << file;
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x10);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

TEST(DiskTier, RoundTrip) {
  TempDir dir("roundtrip");
  DiskTier tier(options(dir.path));
  put_block(tier, 7, 1000);
  EXPECT_TRUE(tier.contains(7));
  tier.flush();
  EXPECT_TRUE(fs::exists(file_of(dir.path, 7)));
  EXPECT_EQ(static_cast<int64_t>(fs::file_size(file_of(dir.path, 7))), file_bytes(7, 1000));

  auto got = tier.get(7, check_of(7));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, payload_of(7, 1000));
  EXPECT_FALSE(tier.get(8, check_of(8)).has_value());
  EXPECT_FALSE(tier.contains(8));

  const DiskTierStats s = tier.stats();
  EXPECT_EQ(s.files, 1);
  EXPECT_EQ(s.bytes, file_bytes(7, 1000));
  EXPECT_EQ(s.writes, 1);
  EXPECT_EQ(s.write_bytes, file_bytes(7, 1000));
  EXPECT_EQ(s.reads_hit, 1);
  EXPECT_EQ(s.reads_miss, 1);
  EXPECT_EQ(s.corrupt + s.foreign + s.collisions + s.evicted + s.dropped_writes, 0);
}

TEST(DiskTier, GetRightAfterPutServesTheBlock) {
  // Whether it still sits in the queue or is already on disk, the bytes are the same.
  TempDir dir("queued");
  DiskTier tier(options(dir.path));
  for (uint64_t key = 0; key < 20; ++key) {
    put_block(tier, key, 64 << 10);
    auto got = tier.get(key, check_of(key));
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(*got, payload_of(key, 64 << 10));
    EXPECT_FALSE(tier.get(key, "another block's tokens").has_value());
  }
  EXPECT_EQ(tier.stats().collisions, 20);
}

TEST(DiskTier, ZeroLengthPayloadAndCheck) {
  TempDir dir("empty");
  DiskTier tier(options(dir.path));
  tier.put(1, "", {});
  tier.put(2, "c", {});
  tier.flush();
  auto a = tier.get(1, "");
  auto b = tier.get(2, "c");
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(a->empty());
  EXPECT_TRUE(b->empty());
  EXPECT_FALSE(tier.get(1, "x").has_value());  // a check that differs, even from empty
  EXPECT_EQ(tier.stats().collisions, 1);
}

TEST(DiskTier, RestartRebuildsTheIndex) {
  TempDir dir("restart");
  {
    DiskTier tier(options(dir.path));
    for (uint64_t key = 1; key <= 3; ++key) put_block(tier, key, 4096);
    // No flush: the destructor writes what is queued.
  }
  DiskTier tier(options(dir.path));
  const DiskTierStats s = tier.stats();
  EXPECT_EQ(s.files, 3);
  EXPECT_EQ(s.bytes, 3 * file_bytes(1, 4096));
  EXPECT_EQ(s.writes, 0);
  for (uint64_t key = 1; key <= 3; ++key) {
    EXPECT_TRUE(tier.contains(key));
    auto got = tier.get(key, check_of(key));
    ASSERT_TRUE(got.has_value()) << key;
    EXPECT_EQ(*got, payload_of(key, 4096));
  }
}

TEST(DiskTier, PutOfAKnownKeyIsNotWrittenAgain) {
  TempDir dir("rewrite");
  DiskTier tier(options(dir.path));
  put_block(tier, 5, 100);
  tier.flush();
  put_block(tier, 5, 100);
  tier.flush();
  EXPECT_EQ(tier.stats().writes, 1);
}

TEST(DiskTier, EvictsLeastRecentlyUsedAtCapacity) {
  TempDir dir("lru");
  const std::size_t n = 1000;
  const int64_t cap = 3 * file_bytes(1, n);  // every key here has a check of equal length
  DiskTier tier(options(dir.path, cap));
  for (uint64_t key = 1; key <= 3; ++key) put_block(tier, key, n);
  tier.flush();
  ASSERT_TRUE(tier.get(1, check_of(1)).has_value());  // 2 is now the least recently used
  put_block(tier, 4, n);
  tier.flush();
  EXPECT_FALSE(tier.contains(2));
  EXPECT_FALSE(fs::exists(file_of(dir.path, 2)));
  for (uint64_t key : {1, 3, 4}) EXPECT_TRUE(tier.contains(key)) << key;
  put_block(tier, 2, n);  // put marks as used too: 3 is now the oldest after 1's get
  tier.put(1, check_of(1), payload_of(1, n));
  tier.flush();
  EXPECT_FALSE(tier.contains(3));
  EXPECT_TRUE(tier.contains(1));
  const DiskTierStats s = tier.stats();
  EXPECT_EQ(s.evicted, 2);
  EXPECT_EQ(s.files, 3);
  EXPECT_LE(s.bytes, cap);
}

TEST(DiskTier, RestartOrdersByModificationTimeAndAppliesANewCapacity) {
  TempDir dir("mtime");
  const std::size_t n = 500;
  {
    DiskTier tier(options(dir.path));
    for (uint64_t key = 1; key <= 4; ++key) put_block(tier, key, n);
  }
  // Oldest to newest: 3, 1, 4, 2.
  const auto now = fs::file_time_type::clock::now();
  const int age[] = {0, 30, 10, 40, 20};  // seconds ago, by key
  for (uint64_t key = 1; key <= 4; ++key) {
    fs::last_write_time(file_of(dir.path, key), now - std::chrono::seconds(age[key]));
  }
  // Room for three: the oldest (3) goes at start-up.
  DiskTier tier(options(dir.path, 3 * file_bytes(1, n)));
  EXPECT_EQ(tier.stats().evicted, 1);
  EXPECT_FALSE(tier.contains(3));
  EXPECT_FALSE(fs::exists(file_of(dir.path, 3)));
  put_block(tier, 5, n);  // then 1
  tier.flush();
  EXPECT_FALSE(tier.contains(1));
  for (uint64_t key : {2, 4, 5}) EXPECT_TRUE(tier.contains(key)) << key;
}

TEST(DiskTier, BlocksThatCannotFitAreDropped) {
  TempDir dir("toolarge");
  DiskTier tier(options(dir.path, 1000));
  put_block(tier, 1, 2000);
  tier.flush();
  EXPECT_FALSE(tier.contains(1));
  EXPECT_EQ(tier.stats().dropped_writes, 1);
  EXPECT_EQ(tier.stats().writes, 0);
}

TEST(DiskTier, FullQueueDropsWrites) {
  TempDir dir("queue");
  DiskTierOptions o = options(dir.path);
  o.max_queued_bytes = 1;  // one block at a time: puts while one is pending are dropped
  DiskTier tier(o);
  const int n = 100;
  const std::size_t bytes = 256 << 10;
  // Made beforehand, so that the puts come much faster than the writer can write.
  std::vector<std::vector<uint8_t>> payloads;
  for (uint64_t key = 0; key < n; ++key) payloads.push_back(payload_of(key, bytes));
  for (uint64_t key = 0; key < n; ++key) tier.put(key, check_of(key), std::move(payloads[key]));
  tier.flush();
  const DiskTierStats s = tier.stats();
  EXPECT_EQ(s.writes + s.dropped_writes, n);
  EXPECT_GT(s.dropped_writes, 0);
  for (uint64_t key = 0; key < n; ++key) {
    const bool stored = tier.contains(key);
    auto got = tier.get(key, check_of(key));
    EXPECT_EQ(got.has_value(), stored);
    if (got) {
      EXPECT_EQ(*got, payload_of(key, bytes));
    }
  }
}

// Writes one block with key `key`, lets `damage` change its file, reads it back.
struct DamageResult {
  bool returned;
  DiskTierStats before, after;
  bool file_left;
  bool still_indexed;
};

DamageResult damage_and_read(const fs::path& dir, uint64_t key,
                             const std::function<void(const fs::path&)>& damage) {
  {
    DiskTier tier(options(dir));
    put_block(tier, key, 300);
  }
  damage(file_of(dir, key));
  DiskTier tier(options(dir));
  DamageResult r;
  r.before = tier.stats();
  r.returned = tier.get(key, check_of(key)).has_value();
  r.after = tier.stats();
  r.file_left = fs::exists(file_of(dir, key));
  r.still_indexed = tier.contains(key);
  return r;
}

TEST(DiskTier, TornFilesAreRejected) {
  TempDir dir("torn");
  for (uintmax_t keep : {uintmax_t{0}, uintmax_t{10}, uintmax_t{48}, uintmax_t{100}}) {
    auto r = damage_and_read(dir.path, 9, [&](const fs::path& f) { fs::resize_file(f, keep); });
    EXPECT_FALSE(r.returned) << keep;
    EXPECT_EQ(r.after.corrupt - r.before.corrupt, 1) << keep;
    EXPECT_EQ(r.after.reads_miss, 1);
    EXPECT_FALSE(r.file_left);
    EXPECT_FALSE(r.still_indexed);
  }
  // One byte short of complete.
  auto r = damage_and_read(dir.path, 9,
                           [](const fs::path& f) { fs::resize_file(f, fs::file_size(f) - 1); });
  EXPECT_FALSE(r.returned);
  EXPECT_EQ(r.after.corrupt, 1);
}

TEST(DiskTier, FlippedPayloadByteIsRejected) {
  TempDir dir("flip-payload");
  const int64_t size = file_bytes(4, 300);
  for (int64_t offset : {size - 300, size - 150, size - 1}) {
    auto r = damage_and_read(
        dir.path, 4, [&](const fs::path& f) { flip_byte(f, static_cast<std::size_t>(offset)); });
    EXPECT_FALSE(r.returned) << offset;
    EXPECT_EQ(r.after.corrupt, 1) << offset;
    EXPECT_FALSE(r.file_left);
  }
}

TEST(DiskTier, EveryFlippedHeaderOrCheckByteIsRejected) {
  TempDir dir("flip-header");
  const uint64_t key = 4;
  const auto end = static_cast<std::size_t>(kHeader) + check_of(key).size();
  for (std::size_t offset = 0; offset < end; ++offset) {
    auto r = damage_and_read(dir.path, key, [&](const fs::path& f) { flip_byte(f, offset); });
    EXPECT_FALSE(r.returned) << offset;
    // The identity and version fields make it another model's or format's file.
    const bool foreign = (offset >= 8 && offset < 12) || (offset >= 16 && offset < 24);
    EXPECT_EQ(r.after.corrupt, foreign ? 0 : 1) << offset;
    EXPECT_EQ(r.after.foreign, foreign ? 1 : 0) << offset;
    EXPECT_EQ(r.after.collisions, 0) << offset;
    EXPECT_FALSE(r.file_left) << offset;
    EXPECT_FALSE(r.still_indexed) << offset;
  }
}

TEST(DiskTier, AnotherModelsFilesAreNeverUsedNorDeleted) {
  TempDir dir("foreign");
  const uint64_t other = 0xabcdef;
  {
    DiskTier tier(options(dir.path, int64_t{1} << 30, other));
    put_block(tier, 3, 200);
  }
  {
    DiskTier tier(options(dir.path));
    EXPECT_EQ(tier.stats().foreign, 1);
    EXPECT_EQ(tier.stats().files, 0);
    EXPECT_FALSE(tier.contains(3));
    EXPECT_FALSE(tier.get(3, check_of(3)).has_value());
    // Our own block of the same key lives beside it.
    put_block(tier, 3, 100);
    tier.flush();
    EXPECT_EQ(*tier.get(3, check_of(3)), payload_of(3, 100));
  }
  EXPECT_TRUE(fs::exists(file_of(dir.path, 3, other)));

  // The other model's file under our name: read, recognised, removed.
  fs::rename(file_of(dir.path, 3, other), file_of(dir.path, 3));
  DiskTier tier(options(dir.path));
  EXPECT_TRUE(tier.contains(3));
  EXPECT_FALSE(tier.get(3, check_of(3)).has_value());
  EXPECT_EQ(tier.stats().foreign, 1);
  EXPECT_FALSE(fs::exists(file_of(dir.path, 3)));
}

TEST(DiskTier, HashCollisionIsNeverServed) {
  TempDir dir("collision");
  DiskTier tier(options(dir.path));
  put_block(tier, 11, 256);
  tier.flush();
  // Same key, another block's check bytes: a collision of the caller's hash.
  EXPECT_FALSE(tier.get(11, "someone else's tokens").has_value());
  EXPECT_EQ(tier.stats().collisions, 1);
  EXPECT_EQ(tier.stats().corrupt, 0);
  // Only one block fits per key: the file is dropped so that the newcomer can be stored.
  EXPECT_FALSE(tier.contains(11));
  tier.put(11, "someone else's tokens", payload_of(99, 256));
  tier.flush();
  EXPECT_EQ(*tier.get(11, "someone else's tokens"), payload_of(99, 256));
}

TEST(DiskTier, FileHoldingAnotherKeyIsRejected) {
  TempDir dir("wrong-key");
  {
    DiskTier tier(options(dir.path));
    put_block(tier, 21, 256);
  }
  // A valid file (checksum and all) under the name of key 22.
  fs::rename(file_of(dir.path, 21), file_of(dir.path, 22));
  DiskTier tier(options(dir.path));
  EXPECT_FALSE(tier.get(22, check_of(21)).has_value());
  EXPECT_FALSE(tier.get(21, check_of(21)).has_value());
  EXPECT_EQ(tier.stats().corrupt, 1);
  EXPECT_FALSE(fs::exists(file_of(dir.path, 22)));
}

TEST(DiskTier, StaleTempFilesAreRemovedAtStart) {
  TempDir dir("temp");
  auto ours = file_of(dir.path, 5);
  ours += ".tmp";
  auto theirs = file_of(dir.path, 5, 0x777);
  theirs += ".tmp";
  for (const auto& p : {ours, theirs}) std::ofstream(p) << "half a block";
  std::ofstream(dir.path / "README") << "not ours either";
  DiskTier tier(options(dir.path));
  EXPECT_FALSE(fs::exists(ours));
  EXPECT_TRUE(fs::exists(theirs));  // another model's writer may be running
  EXPECT_TRUE(fs::exists(dir.path / "README"));
  EXPECT_EQ(tier.stats().files, 0);
  EXPECT_EQ(tier.stats().foreign, 0);
}

TEST(DiskTier, FileRemovedBehindItsBackIsAMiss) {
  TempDir dir("removed");
  DiskTier tier(options(dir.path));
  put_block(tier, 1, 100);
  tier.flush();
  fs::remove(file_of(dir.path, 1));
  EXPECT_FALSE(tier.get(1, check_of(1)).has_value());
  EXPECT_FALSE(tier.contains(1));
  EXPECT_EQ(tier.stats().corrupt, 0);
  EXPECT_EQ(tier.stats().files, 0);
}

TEST(DiskTier, WriteErrorsAreCountedNotThrown) {
  TempDir dir("write-error");
  const fs::path sub = dir.path / "kv";
  DiskTier tier(options(sub));
  fs::remove_all(sub);  // every write now fails
  put_block(tier, 1, 100);
  tier.flush();
  EXPECT_EQ(tier.stats().write_errors, 1);
  EXPECT_FALSE(tier.contains(1));
  EXPECT_FALSE(tier.get(1, check_of(1)).has_value());
}

TEST(DiskTier, ConstructionErrorsNameTheDirectory) {
  TempDir dir("errors");
  std::ofstream(dir.path / "a-file") << "x";
  try {
    DiskTier tier(options(dir.path / "a-file" / "kv"));
    FAIL() << "expected flint::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a-file"), std::string::npos) << e.what();
  }
  EXPECT_THROW(DiskTier(options(dir.path / "kv", 0)), Error);

  DiskTier first(options(dir.path));
  try {
    DiskTier second(options(dir.path));
    FAIL() << "expected flint::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.path.string()), std::string::npos) << e.what();
  }
  DiskTier other_model(options(dir.path, int64_t{1} << 30, 0x42));  // may share the directory
}

// Puts from one thread, gets and contains from another, while the writer writes and
// evicts (the capacity holds a fraction of the blocks). Every hit must be exact.
TEST(DiskTier, ConcurrentPutAndGet) {
  TempDir dir("concurrent");
  const std::size_t n = 4096;
  const uint64_t keys = 400;
  DiskTier tier(options(dir.path, 40 * file_bytes(100, n)));
  std::atomic<bool> done{false};
  std::atomic<int64_t> wrong{0}, hits{0}, gets{0};

  std::thread reader([&] {
    std::mt19937_64 gen(3);
    while (!done.load()) {
      const uint64_t key = 100 + gen() % keys;
      (void)tier.contains(key);
      auto got = tier.get(key, check_of(key));
      ++gets;
      if (got) {
        ++hits;
        if (*got != payload_of(key, n)) ++wrong;
      }
    }
  });
  std::thread writer([&] {
    for (uint64_t key = 100; key < 100 + keys; ++key) {
      put_block(tier, key, n);
      if (key % 50 == 0) (void)tier.stats();
    }
  });
  writer.join();
  tier.flush();
  done = true;
  reader.join();

  const DiskTierStats s = tier.stats();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(s.reads_hit + s.reads_miss, gets.load());
  EXPECT_EQ(s.reads_hit, hits.load());
  EXPECT_EQ(s.corrupt + s.foreign + s.collisions + s.write_errors, 0);
  EXPECT_LE(s.bytes, 40 * file_bytes(100, n));
  EXPECT_EQ(s.files, static_cast<int64_t>(std::distance(fs::directory_iterator(dir.path),
                                                        fs::directory_iterator{})) -
                         1);  // the lock file
}

}  // namespace
}  // namespace flint::kv
