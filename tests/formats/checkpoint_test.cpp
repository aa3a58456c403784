// Opening checkpoints: a single file, a directory of files, a sharded directory with
// model.safetensors.index.json, and every way the index and the shards can disagree.
#include "formats/checkpoint.h"

#include <gtest/gtest.h>

#include <vector>

#include "test_files.h"

namespace flint {
namespace {

using testing::TempDir;
using testing::throws_with;
namespace fs = std::filesystem;

// Writes a file holding U8 tensors named `names`, tensor i holding i + 1 bytes of value i.
void write_shard(const fs::path& path, const std::vector<std::string>& names) {
  std::vector<std::vector<uint8_t>> storage;
  for (std::size_t i = 0; i < names.size(); ++i) storage.emplace_back(i + 1, uint8_t(i));
  std::vector<TensorToWrite> tensors;
  for (std::size_t i = 0; i < names.size(); ++i) {
    tensors.push_back(
        {names[i], DType::U8, {int64_t(i + 1)}, std::as_bytes(std::span(storage[i]))});
  }
  write_safetensors(path, tensors);
}

const char* kIndex = "model.safetensors.index.json";

TEST(Checkpoint, OpensASingleFile) {
  TempDir dir;
  write_shard(dir / "one.safetensors", {"a", "b"});
  Checkpoint ckpt = Checkpoint::open(dir / "one.safetensors");
  EXPECT_EQ(ckpt.dir(), dir.path());
  ASSERT_EQ(ckpt.tensors().size(), 2u);
  EXPECT_EQ(ckpt.total_bytes(), 3u);
  const CheckpointTensor* b = ckpt.find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->bytes.size(), 2u);
  EXPECT_EQ(std::to_integer<int>(b->bytes[1]), 1);
  EXPECT_EQ(b->info->name, "b");
  EXPECT_EQ(b->file, ckpt.files()[0].get());
  EXPECT_EQ(ckpt.find("c"), nullptr);
}

TEST(Checkpoint, OpensEveryFileOfADirectoryWithoutIndex) {
  TempDir dir;
  write_shard(dir / "x-2.safetensors", {"z", "y"});
  write_shard(dir / "x-1.safetensors", {"a"});
  testing::write_bytes(dir / "config.json", "{}");
  Checkpoint ckpt = Checkpoint::open(dir.path());
  ASSERT_EQ(ckpt.files().size(), 2u);
  EXPECT_EQ(ckpt.files()[0]->path().filename(), "x-1.safetensors");
  std::vector<std::string> names;
  for (const auto& [name, tensor] : ckpt.tensors()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "y", "z"}));
}

TEST(Checkpoint, RejectsATensorInTwoFilesWithoutIndex) {
  TempDir dir;
  write_shard(dir / "x-1.safetensors", {"a", "dup"});
  write_shard(dir / "x-2.safetensors", {"dup"});
  EXPECT_TRUE(throws_with([&] { Checkpoint::open(dir.path()); },
                          {"x-2.safetensors: tensor 'dup'", "x-1.safetensors"}));
}

TEST(Checkpoint, RejectsMissingPathsAndEmptyDirectories) {
  TempDir dir;
  EXPECT_TRUE(throws_with([&] { Checkpoint::open(dir / "absent"); }, {"absent", "no such"}));
  EXPECT_TRUE(
      throws_with([&] { Checkpoint::open(dir.path()); }, {dir.path().string(), "*.safetensors"}));
}

TEST(Checkpoint, OpensShardsListedByTheIndex) {
  TempDir dir;
  write_shard(dir / "s1.safetensors", {"a", "b"});
  write_shard(dir / "s2.safetensors", {"c"});
  write_shard(dir / "stray.safetensors", {"a"});  // not in the index: ignored
  testing::write_bytes(dir / kIndex, R"({"metadata": {"total_size": 4},
      "weight_map": {"a": "s1.safetensors", "b": "s1.safetensors", "c": "s2.safetensors"}})");
  Checkpoint ckpt = Checkpoint::open(dir.path());
  EXPECT_EQ(ckpt.files().size(), 2u);
  EXPECT_EQ(ckpt.tensors().size(), 3u);
  EXPECT_EQ(ckpt.find("c")->file->path().filename(), "s2.safetensors");
  EXPECT_EQ(ckpt.total_bytes(), 1u + 2u + 1u);
}

// Builds a sharded checkpoint with the given index text and expects an error naming
// the index and `words`.
::testing::AssertionResult index_rejected(const std::string& index,
                                          const std::vector<std::string_view>& words) {
  TempDir dir;
  write_shard(dir / "s1.safetensors", {"a", "b"});
  write_shard(dir / "s2.safetensors", {"c", "b2"});
  testing::write_bytes(dir / kIndex, index);
  return throws_with([&] { Checkpoint::open(dir.path()); }, testing::with_first(kIndex, words));
}

TEST(Checkpoint, RejectsBadIndexes) {
  EXPECT_TRUE(index_rejected("{\"weight_map\": {", {"not valid JSON"}));
  EXPECT_TRUE(index_rejected("[]", {"expected a JSON object"}));
  EXPECT_TRUE(index_rejected(R"({"metadata": {}})", {"\"weight_map\" is missing"}));
  EXPECT_TRUE(index_rejected(R"({"weight_map": []})", {"\"weight_map\" is array"}));
  EXPECT_TRUE(index_rejected(R"({"weight_map": {}})", {"empty"}));
  EXPECT_TRUE(index_rejected(R"({"weight_map": {"a": 1}})", {"'a'", "expected a file name"}));
  EXPECT_TRUE(index_rejected(R"({"weight_map": {"a": "../s1.safetensors"}})", {"'a'", "inside"}));
  EXPECT_TRUE(index_rejected(R"({"weight_map": {"a": "/s1.safetensors"}})", {"'a'", "inside"}));
  EXPECT_TRUE(index_rejected(R"({"weight_map": {"a": "s1.safetensors", "a": "s2.safetensors"}})",
                             {"tensor 'a'", "twice"}));
}

TEST(Checkpoint, RejectsIndexAndShardsThatDisagree) {
  // A shard file the index names is missing: name it and a tensor mapped to it.
  EXPECT_TRUE(index_rejected(
      R"({"weight_map": {"a": "s1.safetensors", "x": "s9.safetensors", "y": "s9.safetensors"}})",
      {"shard file 's9.safetensors'", "tensor 'x'", "missing"}));
  // A tensor mapped to a file that does not hold it.
  EXPECT_TRUE(index_rejected(R"({"weight_map": {"a": "s1.safetensors", "q": "s2.safetensors"}})",
                             {"tensor 'q'", "s2.safetensors", "does not contain"}));
  // The same when its real file is not opened (the index does not name it).
  EXPECT_TRUE(index_rejected(R"({"weight_map": {"a": "s2.safetensors", "c": "s2.safetensors"}})",
                             {"tensor 'a'", "s2.safetensors", "does not contain"}));
  // A tensor mapped to one file but stored in the other.
  EXPECT_TRUE(index_rejected(
      R"({"weight_map": {"a": "s2.safetensors", "b": "s1.safetensors", "c": "s2.safetensors"}})",
      {"tensor 'a'", "mapped to s2.safetensors but found in", "s1.safetensors"}));
}

TEST(Checkpoint, RejectsATensorInTwoShards) {
  TempDir dir;
  write_shard(dir / "s1.safetensors", {"a", "b"});
  write_shard(dir / "s2.safetensors", {"b"});
  testing::write_bytes(dir / kIndex,
                       R"({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})");
  EXPECT_TRUE(throws_with([&] { Checkpoint::open(dir.path()); },
                          {"s2.safetensors: tensor 'b' is also in", "s1.safetensors"}));
}

TEST(Checkpoint, ReportsAMalformedShardByItsPath) {
  TempDir dir;
  write_shard(dir / "s1.safetensors", {"a"});
  testing::write_bytes(dir / "s2.safetensors",
                       testing::safetensors_image(
                           R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "1234"));
  testing::write_bytes(dir / kIndex,
                       R"({"weight_map": {"a": "s1.safetensors", "w": "s2.safetensors"}})");
  EXPECT_TRUE(throws_with([&] { Checkpoint::open(dir.path()); },
                          {"s2.safetensors: tensor 'w'", "needs 8 bytes"}));
}

}  // namespace
}  // namespace flint
