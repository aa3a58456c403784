// This machine's memory read bandwidth, measured with the kernel thread pool: what bounds
// decoding on a CPU (each step streams the active weights once), so `flint bench` reports
// its decode speed as a share of it, honestly on any machine and thread count.
#pragma once

#include <cstddef>

namespace flint {

// Reads a buffer of `bytes` (allocated and first touched here, in parallel, so its pages
// spread like the weights' do) with every thread of thread_pool(), `repeats` times; returns
// the best rate in bytes per second. Costs `bytes` of memory for the call and about
// repeats x bytes / bandwidth of time (0.2 s for 512 MiB at 15 GB/s, 5 repeats).
double measure_read_bandwidth(std::size_t bytes = std::size_t{512} << 20, int repeats = 5);

// The same reads over memory the caller already holds (`data`, `bytes`; any alignment):
// nothing is allocated, so a probe beside every timed run costs no resident memory. The
// region must be much larger than the caches (a few hundred MiB), or the figure is theirs.
double measure_read_bandwidth_of(const void* data, std::size_t bytes, int repeats = 5);

}  // namespace flint
