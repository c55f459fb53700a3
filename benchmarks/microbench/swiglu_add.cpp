// hpmoe_microbench_swiglu_add: the paper's section-6 microbenchmarks (SwiGLU + Add: serial vs tile-interleaved
// static order, static vs dynamic dispatch, per-task dispatch overhead) measured on the CPU twin. See --help
// and docs/microbenchmarks.md.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "../../op_kernel/ssc_layout.h"
#include "bench_args.h"
#include "host_info.h"
#include "mode_runner.h"

namespace hpmoe {
namespace microbench {
namespace {

struct ModeStats {
  std::vector<double> us;
  std::vector<uint64_t> llc;
  std::vector<double> swiglu_us;  // handler time summed over workers, / K
  std::vector<double> add_us;
  std::vector<std::vector<double>> end_us;   // [worker][repeat]: when the worker finished
  std::vector<std::vector<double>> busy_us;  // [worker][repeat]: its handler time
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double MedianU(const std::vector<uint64_t>& v) {
  std::vector<double> d(v.begin(), v.end());
  return Median(d);
}

std::string Mib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", double(bytes) / (1 << 20));
  return b;
}

struct SweepPoint {
  uint64_t rows;
  uint32_t tiles;
  uint32_t tasks;
  uint64_t intermediate_bytes;
  uint64_t total_bytes;
  std::map<std::string, ModeStats> stats;
  std::vector<double> empty_us;  // launches whose job returns at once: wake-up and join of the workers
  uint32_t compute_modes = 0;
  bool identical = true;
  uint64_t hash = 0;
  std::string differing;
};

// Runs one M: checked run per mode, warm-up, then `repeats` rounds with the modes rotated each round.
int RunPoint(const BenchArgs& a, uint64_t rows, WorkerPool& pool, SweepPoint* pt) {
  std::string err;
  WorkloadShape shape{rows, a.tile_rows, a.dtype, a.workers, a.seed, a.timeout_ms};
  std::unique_ptr<SwigluAddWorkload> w = SwigluAddWorkload::Create(shape, &err);
  if (!w) {
    std::fprintf(stderr, "%s: error: M=%" PRIu64 ": %s\n", kProgramName, rows, err.c_str());
    return 1;
  }
  w->FillInputs();
  pt->rows = rows;
  pt->tiles = w->num_tiles();
  pt->tasks = w->num_tasks();
  pt->intermediate_bytes = w->intermediate_bytes();
  pt->total_bytes = w->total_bytes();
  ModeRunner runner(*w, pool, a.timeout_ms);
  const std::string prefix = a.dump_dir.empty() ? "" : a.dump_dir + "/m" + std::to_string(rows) + ".";
  bool first_compute = true;
  for (const std::string& name : a.modes) {
    const ModeSpec& m = *FindMode(name.c_str());
    if (!m.noop) w->PoisonOutputs();
    runner.Launch(m, &err);
    if (!err.empty()) break;
    if (m.noop) continue;
    ++pt->compute_modes;
    const uint64_t h = w->OutputHash();
    if (first_compute) {
      pt->hash = h;
      first_compute = false;
    } else if (h != pt->hash) {
      pt->identical = false;
      pt->differing += (pt->differing.empty() ? "" : ",") + name;
    }
    if (!prefix.empty()) {
      err = w->Dump(prefix, name, name == a.modes.front() || FindMode(a.modes.front().c_str())->noop);
      if (!err.empty()) break;
    }
  }
  for (uint32_t r = 0; r < a.warmup && err.empty(); ++r)
    for (const std::string& name : a.modes) {
      runner.Launch(*FindMode(name.c_str()), &err);
      if (!err.empty()) break;
    }
  const size_t n = a.modes.size();
  const std::function<int32_t(uint32_t)> empty = [](uint32_t) { return 0; };
  for (uint32_t r = 0; r < a.repeats && err.empty(); ++r) {
    pt->empty_us.push_back(double(pool.Run(empty).ns) / 1000.0);
    for (size_t j = 0; j < n; ++j) {
      const std::string& name = a.modes[(j + r) % n];
      const LaunchResult res = runner.Launch(*FindMode(name.c_str()), &err);
      if (!err.empty()) break;
      ModeStats& ms = pt->stats[name];
      ms.us.push_back(double(res.ns) / 1000.0);
      ms.llc.push_back(res.llc_misses);
      ms.swiglu_us.push_back(double(runner.handler_ns(ssc::kTaskSwiglu)) / 1000.0 / a.workers);
      ms.add_us.push_back(double(runner.handler_ns(ssc::kTaskAdd)) / 1000.0 / a.workers);
      ms.end_us.resize(a.workers);
      ms.busy_us.resize(a.workers);
      for (uint32_t q = 0; q < a.workers; ++q) {
        ms.end_us[q].push_back(double(res.end_ns[q]) / 1000.0);
        ms.busy_us[q].push_back(double(runner.worker_busy_ns(q)) / 1000.0);
      }
    }
  }
  if (!err.empty()) {
    std::fprintf(stderr, "%s: error: M=%" PRIu64 ": %s\n", kProgramName, rows, err.c_str());
    return 1;
  }
  return 0;
}

double Ratio(const SweepPoint& pt, const char* num, const char* den) {
  auto a = pt.stats.find(num), b = pt.stats.find(den);
  if (a == pt.stats.end() || b == pt.stats.end()) return 0.0;
  const double d = Median(b->second.us);
  return d > 0 ? Median(a->second.us) / d : 0.0;
}

// Dispatch cost per task in worker time: (launch - empty launch) x K / tasks (each worker runs tasks/K).
double PerTaskUs(const SweepPoint& pt, const std::string& mode, uint32_t workers) {
  auto it = pt.stats.find(mode);
  if (it == pt.stats.end()) return 0.0;
  return std::max(0.0, Median(it->second.us) - Median(pt.empty_us)) * workers / pt.tasks;
}

void PrintText(const BenchArgs& a, const SweepPoint& pt, const WorkerPool& pool, uint64_t llc_bytes) {
  std::printf("\nM=%" PRIu64 ": %u tiles of %u rows, %u tasks; intermediate A %s (%.2fx LLC), H+A+X+Y %s\n",
              pt.rows, pt.tiles, a.tile_rows, pt.tasks, Mib(pt.intermediate_bytes).c_str(),
              llc_bytes ? double(pt.intermediate_bytes) / double(llc_bytes) : 0.0, Mib(pt.total_bytes).c_str());
  std::printf("  %-18s %11s %11s %11s %9s %11s %11s %19s %16s\n", "mode", "median_us", "min_us", "max_us", "us/task",
              "swiglu_us", "add_us", "busy_us min..max", pool.counting() ? pool.llc_event() : "LLC misses");
  for (const std::string& name : a.modes) {
    const ModeStats& s = pt.stats.at(name);
    const double med = Median(s.us);
    char llc[32];
    if (pool.counting()) std::snprintf(llc, sizeof llc, "%.0f", MedianU(s.llc));
    else std::snprintf(llc, sizeof llc, "n/a");
    double busy_min = 0, busy_max = 0;
    for (size_t q = 0; q < s.busy_us.size(); ++q) {
      const double b = Median(s.busy_us[q]);
      busy_min = q == 0 ? b : std::min(busy_min, b);
      busy_max = std::max(busy_max, b);
    }
    char busy[40];
    std::snprintf(busy, sizeof busy, "%.0f..%.0f", busy_min, busy_max);
    std::printf("  %-18s %11.1f %11.1f %11.1f %9.3f %11.1f %11.1f %19s %16s\n", name.c_str(), med,
                *std::min_element(s.us.begin(), s.us.end()), *std::max_element(s.us.begin(), s.us.end()),
                med * a.workers / pt.tasks, Median(s.swiglu_us), Median(s.add_us), busy, llc);
  }
  std::printf("  (swiglu_us, add_us: handler time summed over workers / K; busy_us: each worker's handler time, the\n"
              "   least and most busy worker; all 0 for no-op modes)\n");
  std::printf("  ratios (median):");
  const char* pairs[][2] = {{"serial", "interleaved"}, {"dynamic", "interleaved"}, {"dynamic-lifo", "interleaved"},
                            {"noop-dynamic", "noop-static"}, {"noop-dynamic-lifo", "noop-static"}};
  for (auto& p : pairs)
    if (Ratio(pt, p[0], p[1]) > 0) std::printf("  %s/%s %.3f", p[0], p[1], Ratio(pt, p[0], p[1]));
  std::printf("\n");
  if (pt.stats.count("noop-static")) {
    std::printf("  dispatch per task (no-op handlers, (launch - empty launch %.1f us) x K / tasks): static %.3f us",
                Median(pt.empty_us), PerTaskUs(pt, "noop-static", a.workers));
    for (const char* d : {"noop-dynamic", "noop-dynamic-lifo"})
      if (pt.stats.count(d)) std::printf(", %s %.3f us", d + 5, PerTaskUs(pt, d, a.workers));
    std::printf("\n");
  }
  if (pt.compute_modes > 0)
    std::printf("  outputs of the %u compute modes: %s (hash %016" PRIx64 ")\n", pt.compute_modes,
                pt.identical ? "bitwise identical" : ("DIFFER in " + pt.differing).c_str(), pt.hash);
}

void PrintJson(const BenchArgs& a, const SweepPoint& pt, const WorkerPool& pool, const CacheLevel& llc) {
  std::printf("{\"m\": %" PRIu64 ", \"tile_rows\": %u, \"workers\": %u, \"dtype\": \"%s\", \"tiles\": %u, "
              "\"tasks\": %u, \"intermediate_bytes\": %" PRIu64 ", \"total_bytes\": %" PRIu64
              ", \"llc_bytes\": %" PRIu64 ", \"llc_event\": %s, \"identical\": %s, \"hash\": \"%016" PRIx64
              "\", \"empty_launch_us\": %.3f, \"modes\": {",
              pt.rows, a.tile_rows, a.workers, DtypeName(a.dtype), pt.tiles, pt.tasks, pt.intermediate_bytes,
              pt.total_bytes, llc.bytes, pool.counting() ? ("\"" + std::string(pool.llc_event()) + "\"").c_str() : "null",
              pt.identical ? "true" : "false", pt.hash, Median(pt.empty_us));
  bool first = true;
  for (const std::string& name : a.modes) {
    const ModeStats& s = pt.stats.at(name);
    std::printf("%s\"%s\": {\"median_us\": %.3f, \"min_us\": %.3f, \"us_per_task\": %.4f, "
                "\"dispatch_us_per_task\": %s, \"swiglu_us\": %.3f, \"add_us\": %.3f, \"samples_us\": [",
                first ? "" : ", ", name.c_str(), Median(s.us), *std::min_element(s.us.begin(), s.us.end()),
                Median(s.us) * a.workers / pt.tasks,
                FindMode(name.c_str())->noop ? std::to_string(PerTaskUs(pt, name, a.workers)).c_str() : "null",
                Median(s.swiglu_us), Median(s.add_us));
    for (size_t i = 0; i < s.us.size(); ++i) std::printf("%s%.3f", i ? ", " : "", s.us[i]);
    std::printf("], \"worker_end_us\": [");
    for (size_t q = 0; q < s.end_us.size(); ++q) std::printf("%s%.3f", q ? ", " : "", Median(s.end_us[q]));
    std::printf("], \"worker_busy_us\": [");
    for (size_t q = 0; q < s.busy_us.size(); ++q) std::printf("%s%.3f", q ? ", " : "", Median(s.busy_us[q]));
    std::printf("], \"llc_misses\": ");
    if (pool.counting()) std::printf("%.0f}", MedianU(s.llc));
    else std::printf("null}");
    first = false;
  }
  std::printf("}}\n");
}

}  // namespace

int Main(int argc, char** argv) {
  BenchArgs a;
  const std::string err = ParseArgs(argc, argv, &a);
  if (err == "help") return 0;
  if (!err.empty()) {
    std::fprintf(stderr, "%s: error: %s\n", kProgramName, err.c_str());
    return 2;
  }
  if (!a.dump_dir.empty()) {
    struct stat st;
    if (stat(a.dump_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      std::fprintf(stderr, "%s: error: --dump directory '%s' does not exist\n", kProgramName, a.dump_dir.c_str());
      return 2;
    }
  }
  const CacheLevel llc = LastLevelCache();
  const CacheLevel below = CacheAtLevel(llc.level > 1 ? llc.level - 1 : 0);
  WorkerPool pool(a.workers, a.llc);
  if (!a.json) {
    std::printf("%s: SwiGLU [M x %u] -> [M x %u], Add [M x %u] + [M x %u]; dtype %s (fp32 math), tiles of %u rows, "
                "%u workers, median of %u launches per mode (after %u warm-up)\n",
                kProgramName, 2 * kInter, kInter, kInter, kInter, DtypeName(a.dtype), a.tile_rows, a.workers,
                a.repeats, a.warmup);
    std::printf("cache: LLC = L%u %s %s (cpus %s); L%u %s per core; load average %s\n", llc.level,
                llc.type.c_str(), Mib(llc.bytes).c_str(), llc.shared_cpus.c_str(), below.level,
                Mib(below.bytes).c_str(), LoadAverage().c_str());
    if (a.llc)
      std::printf("LLC-miss counters: %s\n",
                  pool.counting() ? pool.llc_event() : ("unavailable here (" + pool.llc_error() + ")").c_str());
    std::fflush(stdout);
  } else if (a.llc && !pool.counting()) {
    std::fprintf(stderr, "%s: LLC-miss counters unavailable here (%s)\n", kProgramName, pool.llc_error().c_str());
  }
  bool all_identical = true;
  for (uint64_t rows : a.rows) {
    SweepPoint pt;
    if (RunPoint(a, rows, pool, &pt) != 0) return 1;
    all_identical = all_identical && pt.identical;
    if (a.json) PrintJson(a, pt, pool, llc);
    else PrintText(a, pt, pool, llc.bytes);
    std::fflush(stdout);
  }
  if (!all_identical) {
    std::fprintf(stderr, "%s: error: compute modes produced different outputs\n", kProgramName);
    return 1;
  }
  return 0;
}

}  // namespace microbench
}  // namespace hpmoe

int main(int argc, char** argv) { return hpmoe::microbench::Main(argc, argv); }
