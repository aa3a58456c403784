// The peak resident memory of this process, for reports that hold it against a bound
// (`flint bench`: weights + KV budget).
#pragma once

#include <cstdint>

namespace flint {

// The most physical memory this process has held at once since it started or since the
// last reset_peak_resident() (Linux: VmHWM of /proc/self/status), in bytes; elsewhere
// getrusage's ru_maxrss, which cannot be reset; 0 where the system does not say.
int64_t peak_resident_bytes();

// Starts the peak over from the memory held now (Linux 4.0+: /proc/self/clear_refs), so that
// a measurement's scratch memory, freed since, does not count. False if it could not.
bool reset_peak_resident();

}  // namespace flint
