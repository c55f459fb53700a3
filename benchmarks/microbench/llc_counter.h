// Last-level-cache miss counting for one thread through perf_event_open (what `perf stat -e LLC-load-misses`
// uses): the generic LL-cache read-miss event, falling back to the generic cache-misses event. Where the
// kernel has no hardware PMU (common in VMs: "no PMU driver, software events only") opening fails and the
// counter says why; callers then report the counts as unavailable, never as zero.
#pragma once

#include <cstdint>
#include <string>

namespace hpmoe {
namespace microbench {

class LlcCounter {
 public:
  LlcCounter() = default;
  ~LlcCounter();
  LlcCounter(const LlcCounter&) = delete;
  LlcCounter& operator=(const LlcCounter&) = delete;

  // Opens a counter on the calling thread (user + kernel excluded: user space only). Returns "" or why not.
  std::string Open();
  bool ok() const { return fd_ >= 0; }
  const char* event_name() const { return event_; }
  uint64_t Read() const;  // 0 when not open

 private:
  int fd_ = -1;
  const char* event_ = "none";
};

// "" when this process can count LLC misses, else the reason (probes with a throwaway counter).
std::string ProbeLlcCounter(std::string* event_name);

}  // namespace microbench
}  // namespace hpmoe
