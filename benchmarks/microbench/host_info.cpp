#include "host_info.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace hpmoe {
namespace microbench {
namespace {

bool ReadLine(const std::string& path, std::string* out) {
  std::ifstream f(path);
  return static_cast<bool>(std::getline(f, *out));
}

// "307200K" -> bytes
uint64_t ParseSize(const std::string& s) {
  char* end = nullptr;
  const uint64_t v = std::strtoull(s.c_str(), &end, 10);
  if (end && (*end == 'K' || *end == 'k')) return v << 10;
  if (end && (*end == 'M' || *end == 'm')) return v << 20;
  return v;
}

bool ReadIndex(uint32_t index, CacheLevel* c) {
  const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
  std::string level, type, size, shared;
  if (!ReadLine(dir + "level", &level) || !ReadLine(dir + "type", &type) || !ReadLine(dir + "size", &size)) return false;
  ReadLine(dir + "shared_cpu_list", &shared);
  c->level = uint32_t(std::strtoul(level.c_str(), nullptr, 10));
  c->type = type;
  c->bytes = ParseSize(size);
  c->shared_cpus = shared;
  return true;
}

}  // namespace

CacheLevel LastLevelCache() {
  CacheLevel best;
  CacheLevel c;
  for (uint32_t i = 0; i < 16 && ReadIndex(i, &c); ++i) {
    if (c.type != "Instruction" && c.level >= best.level) best = c;
  }
  return best;
}

CacheLevel CacheAtLevel(uint32_t level) {
  CacheLevel c;
  for (uint32_t i = 0; i < 16 && ReadIndex(i, &c); ++i) {
    if (c.type != "Instruction" && c.level == level) return c;
  }
  return CacheLevel{};
}

std::string LoadAverage() {
  std::string line;
  if (!ReadLine("/proc/loadavg", &line)) return "?";
  std::istringstream in(line);
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

}  // namespace microbench
}  // namespace hpmoe
