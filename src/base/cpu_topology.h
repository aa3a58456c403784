// How many threads the kernels should use by default: one per physical core this process
// may run on. Hyper-thread siblings share a core's load and FMA units, and a second thread
// per core slows memory-bound decoding down (llama.cpp users reported about 10x).
#pragma once

#include <string>
#include <vector>

namespace flint {

// The logical CPUs in this process's affinity mask (all online CPUs if it cannot be read).
std::vector<int> allowed_cpus();

// Physical cores among `cpus`: CPUs whose sysfs topology (`root`/cpuN/topology/
// physical_package_id and core_id) names the same package and core count once; a CPU whose
// topology cannot be read counts as a core of its own. Cost: two small file reads per CPU.
int physical_cores(const std::vector<int>& cpus,
                   const std::string& root = "/sys/devices/system/cpu");

// physical_cores(allowed_cpus()), at least 1.
int default_thread_count();

}  // namespace flint
