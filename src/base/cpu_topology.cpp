#include "base/cpu_topology.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <thread>
#include <utility>

namespace flint {

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (cpus.empty()) {
    const int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int c = 0; c < n; ++c) cpus.push_back(c);
  }
  return cpus;
}

namespace {
bool read_int(const std::string& path, long& value) {
  std::ifstream in(path);
  return static_cast<bool>(in >> value);
}
}  // namespace

int physical_cores(const std::vector<int>& cpus, const std::string& root) {
  std::set<std::pair<long, long>> cores;
  int unknown = 0;
  for (int cpu : cpus) {
    const std::string dir = root + "/cpu" + std::to_string(cpu) + "/topology/";
    long package = 0, core = 0;
    if (read_int(dir + "physical_package_id", package) && read_int(dir + "core_id", core)) {
      cores.insert({package, core});
    } else {
      ++unknown;
    }
  }
  return static_cast<int>(cores.size()) + unknown;
}

int default_thread_count() { return std::max(1, physical_cores(allowed_cpus())); }

}  // namespace flint
