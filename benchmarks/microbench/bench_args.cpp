#include "bench_args.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "../../op_kernel/ssc_layout.h"
#include "modes.h"

namespace hpmoe {
namespace microbench {

const char* const kProgramName = "hpmoe_microbench_swiglu_add";

namespace {

void PrintUsage() {
  std::printf(
      "usage: %s [--m LIST] [--tile-rows T] [--workers K] [--dtype fp32|bf16|fp16] [--modes LIST]\n"
      "          [--repeats N] [--warmup N] [--seed S] [--timeout-ms MS] [--llc] [--json] [--dump DIR]\n"
      "\n"
      "The paper's section-6 SwiGLU+Add microbenchmark, run for real on the CPU twin: SwiGLU [M x 4096] ->\n"
      "[M x 2048], then Add [M x 2048] + [M x 2048], as SSC tasks (tiles of T rows; Add tile i waits on SwiGLU\n"
      "tile i's event) executed by the runtime's worker loop with the CPU sync on K threads. Every mode runs\n"
      "the same tasks on the same buffers, modes alternating within each repeat; latency = median launch wall time.\n"
      "\n"
      "  --m LIST         row counts M, comma-separated, K = 1024 (default 2K,8K,32K)\n"
      "  --tile-rows T    rows per tile (default 32)\n"
      "  --workers K      worker threads (default 2)\n"
      "  --dtype D        storage dtype of H, A, X, Y; math is fp32 (default fp32)\n"
      "  --modes LIST     comma-separated subset of the modes below (default all)\n"
      "  --repeats N      timed launches per mode (default 7)\n"
      "  --warmup N       untimed launches per mode after the checked run (default 2)\n"
      "  --seed S         input seed (default 0)\n"
      "  --timeout-ms MS  bound on every wait (default 60000)\n"
      "  --llc            count last-level-cache misses per launch (perf_event_open; says so if unsupported)\n"
      "  --json           one JSON object per M on stdout instead of the table\n"
      "  --dump DIR       write DIR/m<M>.h.bin, .x.bin and .y.<mode>.bin (raw storage) from the checked runs\n"
      "\nmodes:\n",
      kProgramName);
  for (const ModeSpec& m : kModes) std::printf("  %-18s %s\n", m.name, m.what);
  std::printf(
      "\nExit status: 0 ok; 1 a run failed or compute modes disagreed; 2 bad arguments.\n");
}

bool ParseU64(const char* s, uint64_t* out, bool allow_k) {
  if (s == nullptr || *s == '\0' || *s == '-') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno != 0 || end == s) return false;
  if (allow_k && (*end == 'K' || *end == 'k')) {
    if (v > (~0ull >> 10)) return false;
    v *= 1024;
    ++end;
  }
  if (*end != '\0') return false;
  *out = v;
  return true;
}

std::vector<std::string> Split(const char* s) {
  std::vector<std::string> parts;
  std::string cur;
  for (const char* p = s;; ++p) {
    if (*p == ',' || *p == '\0') {
      parts.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur += *p;
    }
  }
  return parts;
}

std::string Positive(const char* flag, const char* v, uint64_t max, uint64_t* out) {
  if (!ParseU64(v, out, false) || *out == 0 || *out > max)
    return std::string(flag) + " must be an integer in 1.." + std::to_string(max) + ", got '" + (v ? v : "") + "'";
  return "";
}

}  // namespace

const char* DtypeName(uint32_t dtype) {
  return dtype == ssc::kFP32 ? "fp32" : dtype == ssc::kBF16 ? "bf16" : dtype == ssc::kFP16 ? "fp16" : "?";
}

std::string ParseArgs(int argc, char** argv, BenchArgs* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      PrintUsage();
      return "help";
    }
    if (flag == "--llc") {
      a->llc = true;
      continue;
    }
    if (flag == "--json") {
      a->json = true;
      continue;
    }
    static const char* const kValued[] = {"--m", "--tile-rows", "--workers", "--repeats", "--warmup", "--seed",
                                          "--timeout-ms", "--dtype", "--modes", "--dump"};
    if (std::find(std::begin(kValued), std::end(kValued), flag) == std::end(kValued))
      return "unknown option '" + flag + "' (see --help)";
    if (i + 1 >= argc) return flag + " needs a value";
    const char* v = argv[++i];
    uint64_t n = 0;
    std::string err;
    if (flag == "--m") {
      a->rows.clear();
      for (const std::string& part : Split(v)) {
        if (!ParseU64(part.c_str(), &n, true) || n == 0 || n > (1ull << 24))
          return "--m takes positive row counts up to 16M (e.g. 2K,8K), got '" + part + "'";
        a->rows.push_back(n);
      }
    } else if (flag == "--tile-rows") {
      err = Positive("--tile-rows", v, 1u << 16, &n);
      a->tile_rows = uint32_t(n);
    } else if (flag == "--workers") {
      err = Positive("--workers", v, 256, &n);
      a->workers = uint32_t(n);
    } else if (flag == "--repeats") {
      err = Positive("--repeats", v, 100000, &n);
      a->repeats = uint32_t(n);
    } else if (flag == "--warmup") {
      if (!ParseU64(v, &n, false) || n > 1000) return std::string("--warmup must be an integer in 0..1000, got '") + v + "'";
      a->warmup = uint32_t(n);
    } else if (flag == "--seed") {
      if (!ParseU64(v, &n, false)) return std::string("--seed must be a non-negative integer, got '") + v + "'";
      a->seed = n;
    } else if (flag == "--timeout-ms") {
      err = Positive("--timeout-ms", v, 3600000, &n);
      a->timeout_ms = n;
    } else if (flag == "--dtype") {
      const std::string d = v;
      if (d == "fp32") a->dtype = ssc::kFP32;
      else if (d == "bf16") a->dtype = ssc::kBF16;
      else if (d == "fp16") a->dtype = ssc::kFP16;
      else return "--dtype must be fp32, bf16 or fp16, got '" + d + "'";
    } else if (flag == "--modes") {
      a->modes.clear();
      for (const std::string& part : Split(v)) {
        if (FindMode(part.c_str()) == nullptr) return "unknown mode '" + part + "' (see --help)";
        if (std::find(a->modes.begin(), a->modes.end(), part) != a->modes.end()) return "mode '" + part + "' given twice";
        a->modes.push_back(part);
      }
    } else if (flag == "--dump") {
      if (*v == '\0') return "--dump needs a directory";
      a->dump_dir = v;
    }
    if (!err.empty()) return err;
  }
  if (a->modes.empty())
    for (const ModeSpec& m : kModes) a->modes.push_back(m.name);
  return "";
}

}  // namespace microbench
}  // namespace hpmoe
