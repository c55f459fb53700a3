#include "llc_counter.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hpmoe {
namespace microbench {
namespace {

int OpenEvent(uint32_t type, uint64_t config) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = type;
  attr.config = config;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  return int(syscall(SYS_perf_event_open, &attr, 0 /* this thread */, -1 /* any cpu */, -1, 0));
}

}  // namespace

LlcCounter::~LlcCounter() {
  if (fd_ >= 0) close(fd_);
}

std::string LlcCounter::Open() {
  const uint64_t ll_read_miss = PERF_COUNT_HW_CACHE_LL | (uint64_t(PERF_COUNT_HW_CACHE_OP_READ) << 8) |
                                (uint64_t(PERF_COUNT_HW_CACHE_RESULT_MISS) << 16);
  fd_ = OpenEvent(PERF_TYPE_HW_CACHE, ll_read_miss);
  if (fd_ >= 0) {
    event_ = "LLC-load-misses";
    return "";
  }
  const int first = errno;
  fd_ = OpenEvent(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES);
  if (fd_ >= 0) {
    event_ = "cache-misses";
    return "";
  }
  return std::string("perf_event_open(LLC-load-misses): ") + std::strerror(first) +
         "; perf_event_open(cache-misses): " + std::strerror(errno);
}

uint64_t LlcCounter::Read() const {
  uint64_t v = 0;
  if (fd_ < 0 || read(fd_, &v, sizeof v) != ssize_t(sizeof v)) return 0;
  return v;
}

std::string ProbeLlcCounter(std::string* event_name) {
  LlcCounter c;
  const std::string err = c.Open();
  *event_name = c.event_name();
  return err;
}

}  // namespace microbench
}  // namespace hpmoe
