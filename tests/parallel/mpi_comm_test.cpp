// MpiComm's collectives on 3 ranks (run by ctest under mpirun -np 3): results, rank order,
// identical bits on every rank, the command channel. A failure on any rank fails the run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dist/mpi_comm.h"

namespace flint::dist {

std::unique_ptr<MpiComm> g_comm;  // MPI from main() before the tests to after them

namespace {

MpiComm& comm() { return *g_comm; }

TEST(MpiComm, AllReduceSumsInRankOrderWithTheSameBitsEverywhere) {
  MpiComm& c = comm();
  ASSERT_EQ(c.size(), 3) << "run under mpirun -np 3";
  // Values whose float sum depends on the order: 1e8 + 1 - 1e8 is 0 in float32 when added
  // left to right in rank order ((1e8 + 1) + -1e8), not 1.
  const float mine[3] = {1e8f, 1.0f, -1e8f};
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = mine[c.rank()] * static_cast<float>(1 + i % 3);
  c.all_reduce_sum(v.data(), v.size(), "test sum");
  for (size_t i = 0; i < v.size(); ++i) {
    const float k = static_cast<float>(1 + i % 3);
    const float want = (1e8f * k + 1.0f * k) + -1e8f * k;
    ASSERT_EQ(v[i], want) << i;
  }
  // Every rank's result, bit for bit.
  std::vector<float> all(v.size() * 3);
  c.all_gather(v.data(), v.size(), all.data(), "test compare");
  for (int r = 1; r < 3; ++r)
    EXPECT_EQ(std::memcmp(all.data(), all.data() + r * v.size(), v.size() * sizeof(float)), 0);
}

TEST(MpiComm, AllGatherKeepsRankOrder) {
  MpiComm& c = comm();
  std::vector<float> mine(5, static_cast<float>(c.rank() * 10));
  std::vector<float> all(15);
  c.all_gather(mine.data(), mine.size(), all.data(), "test gather");
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 5; ++i) EXPECT_EQ(all[size_t(r * 5 + i)], r * 10.0f);
  // An empty contribution is allowed.
  c.all_gather(nullptr, 0, all.data(), "test empty gather");
}

TEST(MpiComm, BroadcastGivesEveryRankRank0sData) {
  MpiComm& c = comm();
  // The others pass anything (here: another size) and get rank 0's values.
  std::vector<int32_t> data(static_cast<size_t>(c.rank() + 2), -c.rank());
  if (c.rank() == 0) data = {129279, 0, -7, 42};
  c.broadcast(data, "test broadcast");
  EXPECT_EQ(data, (std::vector<int32_t>{129279, 0, -7, 42}));
  std::vector<int32_t> none(c.rank() == 0 ? 0 : 3, 1);
  c.broadcast(none, "test empty broadcast");
  EXPECT_TRUE(none.empty());
}

TEST(MpiComm, StringsOfDifferentLengths) {
  MpiComm& c = comm();
  const std::string mine =
      c.rank() == 1 ? std::string() : std::string(size_t(c.rank() * 5000 + 3), 'x');
  const std::vector<std::string> all = c.all_gather_strings(mine, "test strings");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].size(), 3u);
  EXPECT_TRUE(all[1].empty());
  EXPECT_EQ(all[2].size(), 10003u);
}

TEST(MpiComm, CommandsArriveInOrder) {
  MpiComm& c = comm();
  for (int k = 0; k < 20; ++k) {
    std::vector<uint8_t> msg;
    if (c.rank() == 0) {
      msg.assign(size_t(k * 1000), uint8_t(k));
      c.send_command(msg);
    } else {
      c.receive_command(msg, 60);
      ASSERT_EQ(msg.size(), size_t(k * 1000));
      if (!msg.empty()) {
        EXPECT_EQ(msg.front(), uint8_t(k));
      }
    }
  }
}

}  // namespace
}  // namespace flint::dist

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  flint::dist::g_comm = std::make_unique<flint::dist::MpiComm>(60);
  const int failed = RUN_ALL_TESTS();
  // Every rank's verdict: a failure on one rank fails every rank's exit status.
  const auto all = flint::dist::g_comm->all_gather_strings(failed ? "x" : "", "verdict");
  int any = 0;
  for (const auto& v : all) any |= !v.empty();
  flint::dist::g_comm.reset();
  return any;
}
