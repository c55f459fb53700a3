// What the benchmark reports about the machine it ran on: the last-level cache (sysfs) and the load.
#pragma once

#include <cstdint>
#include <string>

namespace hpmoe {
namespace microbench {

struct CacheLevel {
  uint32_t level = 0;
  uint64_t bytes = 0;
  std::string type;        // Unified, Data
  std::string shared_cpus; // shared_cpu_list
};

// The highest data/unified cache level of cpu0 (level 0 when sysfs has none).
CacheLevel LastLevelCache();
// The private (per-core) cache level just below it, e.g. L2 (level 0 when none).
CacheLevel CacheAtLevel(uint32_t level);
std::string LoadAverage();  // first three fields of /proc/loadavg, or "?"

}  // namespace microbench
}  // namespace hpmoe
