#include "kv/disk_tier.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <system_error>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "base/error.h"
#include "base/hash.h"

namespace flint::kv {

// The header's integers are stored as the CPU holds them; flint targets little-endian
// CPUs only, and this keeps the files readable by any little-endian tool.
static_assert(std::endian::native == std::endian::little,
              "the disk tier's file format is little-endian");

namespace {

constexpr char kMagic[8] = {'F', 'L', 'I', 'N', 'T', 'K', 'V', 'B'};
constexpr uint32_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 48;
constexpr std::size_t kChecksummedHeader = 40;  // the checksum field itself is not covered

struct Header {
  uint32_t version = kVersion;
  uint32_t check_bytes = 0;
  uint64_t identity = 0;
  uint64_t key = 0;
  uint64_t payload_bytes = 0;
  uint64_t checksum = 0;
};

template <typename T>
void store(unsigned char* at, T value) {
  std::memcpy(at, &value, sizeof value);
}

template <typename T>
T load(const unsigned char* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

void encode(const Header& h, unsigned char* out) {
  std::memcpy(out, kMagic, sizeof kMagic);
  store(out + 8, h.version);
  store(out + 12, h.check_bytes);
  store(out + 16, h.identity);
  store(out + 24, h.key);
  store(out + 32, h.payload_bytes);
  store(out + 40, h.checksum);
}

// False if the magic is wrong.
bool decode(const unsigned char* in, Header& h) {
  if (std::memcmp(in, kMagic, sizeof kMagic) != 0) return false;
  h.version = load<uint32_t>(in + 8);
  h.check_bytes = load<uint32_t>(in + 12);
  h.identity = load<uint64_t>(in + 16);
  h.key = load<uint64_t>(in + 24);
  h.payload_bytes = load<uint64_t>(in + 32);
  h.checksum = load<uint64_t>(in + 40);
  return true;
}

uint64_t checksum(const unsigned char* header, std::string_view check, const uint8_t* payload,
                  std::size_t payload_bytes) {
  Hasher h;
  h.update(header, kChecksummedHeader).update(check).update(payload, payload_bytes);
  return h.digest();
}

bool write_all(int fd, const void* data, std::size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t done = ::write(fd, p, n);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return false;
    p += done;
    n -= static_cast<std::size_t>(done);
  }
  return true;
}

// False on an error or if the file ends first.
bool read_all(int fd, void* data, std::size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t done = ::read(fd, p, n);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return false;
    p += done;
    n -= static_cast<std::size_t>(done);
  }
  return true;
}

struct FileCloser {
  int fd;
  ~FileCloser() {
    if (fd >= 0) ::close(fd);
  }
};

bool parse_hex16(std::string_view text, uint64_t& out) {
  if (text.size() != 16) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out, 16);
  return ec == std::errc() && end == text.data() + text.size();
}

// "<identity>-<key>.kv" or "<identity>-<key>.kv.tmp"; false for anything else.
bool parse_name(std::string_view name, uint64_t& identity, uint64_t& key, bool& temp) {
  temp = name.size() == 40 && name.substr(36) == ".tmp";
  if (temp) name = name.substr(0, 36);
  return name.size() == 36 && name[16] == '-' && name.substr(33) == ".kv" &&
         parse_hex16(name.substr(0, 16), identity) && parse_hex16(name.substr(17, 16), key);
}

enum class ReadResult { kHit, kMissing, kCorrupt, kForeign, kCollision };

// Reads and verifies one block file; fills `payload` on kHit. `why` says what failed.
ReadResult read_block(const std::filesystem::path& path, uint64_t identity, uint64_t key,
                      std::string_view check, std::vector<uint8_t>& payload, const char*& why) {
  why = "";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    why = std::strerror(errno);
    return errno == ENOENT ? ReadResult::kMissing : ReadResult::kCorrupt;
  }
  FileCloser closer{fd};
  struct stat st {};
  unsigned char raw[kHeaderBytes];
  Header h;
  if (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(kHeaderBytes) ||
      !read_all(fd, raw, kHeaderBytes)) {
    why = "shorter than a header";
    return ReadResult::kCorrupt;
  }
  if (!decode(raw, h)) {
    why = "bad magic";
    return ReadResult::kCorrupt;
  }
  if (h.version != kVersion || h.identity != identity) {
    why = h.version != kVersion ? "another format version" : "another model identity";
    return ReadResult::kForeign;
  }
  if (h.key != key) {
    why = "holds another key";
    return ReadResult::kCorrupt;
  }
  const uint64_t body = static_cast<uint64_t>(st.st_size) - kHeaderBytes;
  if (h.check_bytes > body || body - h.check_bytes != h.payload_bytes) {
    why = "size does not match its header (torn?)";
    return ReadResult::kCorrupt;
  }
  std::string stored_check(h.check_bytes, '\0');
  std::vector<uint8_t> bytes(static_cast<std::size_t>(h.payload_bytes));
  if (!read_all(fd, stored_check.data(), stored_check.size()) ||
      !read_all(fd, bytes.data(), bytes.size())) {
    why = "read failed";
    return ReadResult::kCorrupt;
  }
  if (checksum(raw, stored_check, bytes.data(), bytes.size()) != h.checksum) {
    why = "checksum mismatch";
    return ReadResult::kCorrupt;
  }
  if (stored_check != check) return ReadResult::kCollision;
  // Refresh the mtime: after a restart the LRU order is rebuilt from it. Best effort.
  (void)::futimens(fd, nullptr);
  payload = std::move(bytes);
  return ReadResult::kHit;
}

}  // namespace

DiskTier::DiskTier(DiskTierOptions options) : options_(std::move(options)) {
  const std::string dir = options_.dir.string();
  if (options_.capacity_bytes <= 0) {
    throw Error("KV disk tier {}: the capacity must be positive, not {} bytes", dir,
                options_.capacity_bytes);
  }
  std::error_code ec;
  std::filesystem::create_directories(options_.dir, ec);
  if (ec || !std::filesystem::is_directory(options_.dir)) {
    throw Error("cannot create the KV disk tier directory {}: {}", dir,
                ec ? ec.message() : "a file of that name exists");
  }
  const auto lock_path = options_.dir / fmt::format("{:016x}.lock", options_.model_identity);
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) {
    throw Error("cannot open {} in the KV disk tier directory: {}", lock_path.string(),
                std::strerror(errno));
  }
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(lock_fd_);
    if (error != EWOULDBLOCK) {
      throw Error("cannot lock {}: {}", lock_path.string(), std::strerror(error));
    }
    throw Error(
        "the KV disk tier directory {} is in use by another flint process serving the same "
        "model; give each process its own directory",
        dir);
  }
  try {
    scan();
  } catch (...) {
    ::close(lock_fd_);
    throw;
  }
  writer_ = std::thread([this] { writer_loop(); });
}

DiskTier::~DiskTier() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  writer_.join();  // the writer drains the queue before it returns
  // The lock file stays: unlinking it would race with another process taking it.
  ::close(lock_fd_);
}

std::filesystem::path DiskTier::block_path(uint64_t key) const {
  return options_.dir / fmt::format("{:016x}-{:016x}.kv", options_.model_identity, key);
}

void DiskTier::scan() {
  struct Found {
    std::filesystem::file_time_type mtime;
    uint64_t key;
    int64_t bytes;
  };
  std::vector<Found> found;
  std::error_code ec;
  std::filesystem::directory_iterator it(options_.dir, ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    uint64_t identity = 0, key = 0;
    bool temp = false;
    if (!parse_name(it->path().filename().string(), identity, key, temp)) continue;
    if (identity != options_.model_identity) {
      if (!temp) ++stats_.foreign;  // another model's cache: left alone
      continue;
    }
    std::error_code e1, e2, e3;
    if (temp) {  // a write torn by a crash; we hold the lock, so nobody is writing it
      std::filesystem::remove(it->path(), e1);
      continue;
    }
    const bool regular = it->is_regular_file(e1);
    const auto bytes = it->file_size(e2);
    const auto mtime = it->last_write_time(e3);
    if (!regular || e1 || e2 || e3) continue;
    found.push_back({mtime, key, static_cast<int64_t>(bytes)});
  }
  if (ec) {
    throw Error("cannot list the KV disk tier directory {}: {}", options_.dir.string(),
                ec.message());
  }
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  std::vector<uint64_t> victims;
  {
    std::lock_guard lock(mutex_);
    for (const Found& f : found) {  // oldest first, so the newest ends at the front
      lru_.push_front(f.key);
      index_[f.key] = Entry{f.bytes, next_generation_++, lru_.begin()};
      stats_.bytes += f.bytes;
      ++stats_.files;
    }
    evict_locked(0, victims);  // the capacity may have shrunk since the last run
  }
  for (uint64_t key : victims) std::filesystem::remove(block_path(key), ec);
  if (!found.empty()) {
    spdlog::info("KV disk tier {}: {} blocks ({:.1f} MiB) from a previous run",
                 options_.dir.string(), stats_.files,
                 static_cast<double>(stats_.bytes) / (1 << 20));
  }
}

void DiskTier::put(uint64_t key, std::string check, std::vector<uint8_t> payload) {
  const auto queued = static_cast<int64_t>(check.size() + payload.size());
  const auto file_bytes = static_cast<int64_t>(kHeaderBytes) + queued;
  {
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return;
    }
    if (pending_.count(key) != 0) return;
    if (file_bytes > options_.capacity_bytes || check.size() > UINT32_MAX ||
        (!pending_.empty() && queued_bytes_ + queued > options_.max_queued_bytes)) {
      ++stats_.dropped_writes;
      return;
    }
    auto block =
        std::make_shared<const Pending>(Pending{key, std::move(check), std::move(payload)});
    queue_.push_back(block);
    pending_.emplace(key, std::move(block));
    queued_bytes_ += queued;
  }
  work_.notify_one();
}

std::optional<std::vector<uint8_t>> DiskTier::get(uint64_t key, std::string_view check) {
  std::shared_ptr<const Pending> queued;
  uint64_t generation = 0;
  {
    std::lock_guard lock(mutex_);
    if (auto p = pending_.find(key); p != pending_.end()) {
      queued = p->second;
    } else if (auto it = index_.find(key); it != index_.end()) {
      generation = it->second.generation;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
    } else {
      ++stats_.reads_miss;
      return std::nullopt;
    }
  }
  if (queued != nullptr) {  // immutable once queued: copied without the lock
    const bool same = queued->check == check;
    std::optional<std::vector<uint8_t>> out;
    if (same) out = queued->payload;
    std::lock_guard lock(mutex_);
    ++(same ? stats_.reads_hit : stats_.reads_miss);
    if (!same) ++stats_.collisions;
    return out;
  }

  const auto path = block_path(key);
  std::vector<uint8_t> payload;
  const char* why = "";
  const ReadResult result = read_block(path, options_.model_identity, key, check, payload, why);
  std::lock_guard lock(mutex_);
  switch (result) {
    case ReadResult::kHit:
      ++stats_.reads_hit;
      return payload;
    case ReadResult::kMissing:  // removed behind our back (or just evicted): forget it
      drop_locked(key, generation, false);
      break;
    case ReadResult::kCorrupt:
      ++stats_.corrupt;
      spdlog::warn("KV disk tier: dropping {}: {}", path.string(), why);
      drop_locked(key, generation, true);
      break;
    case ReadResult::kForeign:
      ++stats_.foreign;
      spdlog::warn("KV disk tier: dropping {}: {}", path.string(), why);
      drop_locked(key, generation, true);
      break;
    case ReadResult::kCollision:  // only one block per key fits: the newcomer may replace it
      ++stats_.collisions;
      drop_locked(key, generation, true);
      break;
  }
  ++stats_.reads_miss;
  return std::nullopt;
}

bool DiskTier::contains(uint64_t key) const {
  std::lock_guard lock(mutex_);
  return index_.count(key) != 0 || pending_.count(key) != 0;
}

DiskTierStats DiskTier::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void DiskTier::flush() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return pending_.empty(); });
}

void DiskTier::drop_locked(uint64_t key, uint64_t generation, bool unlink_file) {
  auto it = index_.find(key);
  // Evicted, or evicted and written again, while the caller read without the lock.
  if (it == index_.end() || it->second.generation != generation) return;
  stats_.bytes -= it->second.bytes;
  --stats_.files;
  lru_.erase(it->second.lru);
  index_.erase(it);
  // Under the lock, so that the writer cannot index a new file of this key in between
  // (put refuses a key that is still indexed, so no write of it is in flight).
  if (unlink_file) ::unlink(block_path(key).c_str());
}

void DiskTier::evict_locked(int64_t incoming, std::vector<uint64_t>& victims) {
  while (!lru_.empty() && stats_.bytes + incoming > options_.capacity_bytes) {
    const uint64_t key = lru_.back();
    auto it = index_.find(key);
    stats_.bytes -= it->second.bytes;
    --stats_.files;
    ++stats_.evicted;
    lru_.pop_back();
    index_.erase(it);
    victims.push_back(key);
  }
}

void DiskTier::writer_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything is written
    std::shared_ptr<const Pending> block = std::move(queue_.front());
    queue_.pop_front();
    const auto queued = static_cast<int64_t>(block->check.size() + block->payload.size());
    const auto file_bytes = static_cast<int64_t>(kHeaderBytes) + queued;
    std::vector<uint64_t> victims;
    evict_locked(file_bytes, victims);
    lock.unlock();
    // Unlinked without the lock: only this thread writes files, so a victim put again
    // is queued behind and cannot be overwritten by this unlink.
    for (uint64_t key : victims) ::unlink(block_path(key).c_str());
    const bool ok = write_file(*block, file_bytes);
    lock.lock();
    if (ok) {
      lru_.push_front(block->key);
      index_[block->key] = Entry{file_bytes, next_generation_++, lru_.begin()};
      ++stats_.files;
      stats_.bytes += file_bytes;
      ++stats_.writes;
      stats_.write_bytes += file_bytes;
    } else {
      ++stats_.write_errors;
    }
    pending_.erase(block->key);
    queued_bytes_ -= queued;
    if (pending_.empty()) idle_.notify_all();
  }
}

bool DiskTier::write_file(const Pending& block, int64_t file_bytes) {
  unsigned char header[kHeaderBytes];
  Header h;
  h.check_bytes = static_cast<uint32_t>(block.check.size());
  h.identity = options_.model_identity;
  h.key = block.key;
  h.payload_bytes = block.payload.size();
  encode(h, header);
  h.checksum = checksum(header, block.check, block.payload.data(), block.payload.size());
  encode(h, header);

  const auto final_path = block_path(block.key);
  auto temp_path = final_path;
  temp_path += ".tmp";
  const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && write_all(fd, header, sizeof header) &&
            write_all(fd, block.check.data(), block.check.size()) &&
            write_all(fd, block.payload.data(), block.payload.size());
  int error = ok ? 0 : errno;
  if (fd >= 0 && ::close(fd) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (ok && ::rename(temp_path.c_str(), final_path.c_str()) != 0) {
    ok = false;
    error = errno;
  }
  if (!ok) {
    ::unlink(temp_path.c_str());
    // Once at warning level: a full disk would otherwise log every block.
    auto level = warned_write_error_ ? spdlog::level::debug : spdlog::level::warn;
    warned_write_error_ = true;
    spdlog::log(level, "KV disk tier: cannot write {} ({} bytes): {}; the block is dropped",
                final_path.string(), file_bytes, std::strerror(error));
  }
  return ok;
}

}  // namespace flint::kv
