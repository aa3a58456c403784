#include "base/cpu_topology.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace flint {
namespace {

namespace fs = std::filesystem;

// A sysfs-like tree: cpu i in package packages[i], core cores[i]; -1 leaves cpu i without a
// topology directory.
fs::path fake_sysfs(const std::vector<int>& packages, const std::vector<int>& cores) {
  // One tree per test: ctest runs the tests of this file in parallel processes.
  const fs::path root =
      fs::path(::testing::TempDir()) /
      ("flint_cpu_topology_" +
       std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  fs::remove_all(root);
  for (size_t i = 0; i < cores.size(); ++i) {
    if (cores[i] < 0) continue;
    const fs::path dir = root / ("cpu" + std::to_string(i)) / "topology";
    fs::create_directories(dir);
    std::ofstream(dir / "physical_package_id") << packages[i] << "\n";
    std::ofstream(dir / "core_id") << cores[i] << "\n";
  }
  return root;
}

TEST(CpuTopology, HyperThreadSiblingsCountOnce) {
  // Two packages of two cores with two threads each, numbered as Linux does on x86 (the
  // siblings of cpu0..3 are cpu4..7); core ids repeat across packages.
  const fs::path root = fake_sysfs({0, 0, 1, 1, 0, 0, 1, 1}, {0, 1, 0, 1, 0, 1, 0, 1});
  EXPECT_EQ(physical_cores({0, 1, 2, 3, 4, 5, 6, 7}, root.string()), 4);
  EXPECT_EQ(physical_cores({0, 4}, root.string()), 1);        // one core's two threads
  EXPECT_EQ(physical_cores({0, 1, 4, 5}, root.string()), 2);  // one package
  EXPECT_EQ(physical_cores({0, 2}, root.string()), 2);        // same core id, two packages
  EXPECT_EQ(physical_cores({}, root.string()), 0);
  fs::remove_all(root);
}

TEST(CpuTopology, UnreadableTopologyCountsEachCpu) {
  const fs::path root = fake_sysfs({0, 0, 0}, {0, 0, -1});
  EXPECT_EQ(physical_cores({0, 1, 2}, root.string()), 2);  // cpu2 has no topology
  EXPECT_EQ(physical_cores({5, 6}, root.string()), 2);     // cpus the tree does not have
  fs::remove_all(root);
}

TEST(CpuTopology, ThisMachine) {
  const std::vector<int> cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  const int threads = default_thread_count();
  EXPECT_GE(threads, 1);
  EXPECT_LE(threads, static_cast<int>(cpus.size()));
}

}  // namespace
}  // namespace flint
