// C ABI of `--backend ascendc-cpu` (scheduler/hpmoe/runtime/native.py). The library also carries the CPU
// twin's ABI (op_host/cpu/c_api.cpp: heap, shared memory, rank open/close), so a launcher opens ranks the same
// way on both backends and only the run call differs.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../../cpu/rank_runtime.h"
#include "ascend_launch.h"
#include "stub_windows.h"
#include "../../one_line.h"

using hpmoe::cpu::RankRuntime;

namespace {

// Binary log: one 32-byte record per call, plus a JSON sidecar (<path>.json) with what a checker needs to
// classify addresses. Records: rank, core_type, block, op, arg, addr, bytes.
struct FileRecord {
  uint32_t rank;
  int32_t core_type;
  uint32_t block;
  uint32_t op;
  uint32_t arg;
  uint32_t pad;
  uint64_t addr;
  uint64_t bytes;
};
static_assert(sizeof(FileRecord) == 40, "log record layout");

std::string WriteLogs(const char* path, RankRuntime* const* ranks, uint32_t num_ranks, uint32_t direction,
                      const std::vector<hpmoe::ascend::LaunchLogs>& logs) {
  FILE* f = std::fopen(path, "wb");
  if (f == nullptr) return std::string("cannot write the call log ") + path;
  for (uint32_t i = 0; i < num_ranks; ++i) {
    for (const AscendC::stub::CoreLog& core : logs[i].cores) {
      for (const AscendC::stub::LogRecord& r : core.records) {
        const FileRecord out{ranks[i]->rank(), core.core_type, core.block_idx, uint32_t(r.op), r.arg, 0, r.addr,
                             r.bytes};
        std::fwrite(&out, sizeof(out), 1, f);
      }
    }
  }
  std::fclose(f);
  const std::string meta_path = std::string(path) + ".json";
  FILE* m = std::fopen(meta_path.c_str(), "w");
  if (m == nullptr) return "cannot write " + meta_path;
  std::fprintf(m, "{\"ranks\": [");
  for (uint32_t i = 0; i < num_ranks; ++i) {
    hpmoe::ascend::KernelTiling t;
    const std::string err =
        hpmoe::ascend::MakeTiling(*ranks[i], direction, ranks[i]->program(direction).invocation, &t);
    if (!err.empty()) return err;
    const hpmoe::ssc::LoadedSsc& l = ranks[i]->loaded(direction);
    const uint64_t seg = reinterpret_cast<uint64_t>(ranks[i]->context().segment);
    std::fprintf(m, "%s{\"rank\": %u, \"segment\": %llu, \"counters\": %llu, \"num_events\": %u, \"queues\": %llu, "
                    "\"num_queues\": %u, \"first_use\": %u, \"zero\": %llu, \"zero_bytes\": %llu, \"abort\": %llu, "
                    "\"handshake\": %llu}", i ? ", " : "", t.rank,
                 (unsigned long long)seg, (unsigned long long)(seg + t.counter_offset),
                 l.view.num_events, (unsigned long long)reinterpret_cast<uint64_t>(l.view.queues), l.view.num_queues,
                 t.first_use, (unsigned long long)(seg + t.zero_offset), (unsigned long long)t.zero_bytes,
                 (unsigned long long)(seg + t.abort_offset), (unsigned long long)(seg + t.handshake_offset));
  }
  std::fprintf(m, "]}\n");
  std::fclose(m);
  return "";
}

}  // namespace

extern "C" {

// One launch of `direction` on the given ranks of this process (1 rank: a rank process). When they are the
// whole group, their SSCs are first validated together (ssc::ValidateGroup). log_path: NULL, or where the
// stub call log of this launch goes (binary records + <log_path>.json).
int hpmoe_ascendc_run(void* const* ranks, uint32_t num_ranks, uint32_t direction, const char* log_path, char* err,
                      int errlen) {
  RankRuntime* const* rs = reinterpret_cast<RankRuntime* const*>(ranks);
  if (num_ranks == 0 || direction > 1) {
    hpmoe::CopyMessage(err, errlen, "hpmoe_ascendc_run: no ranks or a bad direction");
    return 1;
  }
  std::string e;
  if (num_ranks == rs[0]->context().cfg.ep) e = hpmoe::ascend::ValidateWholeGroup(rs, num_ranks, direction);
  std::vector<hpmoe::ascend::LaunchLogs> logs;
  if (e.empty()) e = hpmoe::ascend::RunGroupAscend(rs, num_ranks, direction, log_path != nullptr ? &logs : nullptr);
  if (e.empty() && log_path != nullptr) e = WriteLogs(log_path, rs, num_ranks, direction, logs);
  if (!e.empty()) {
    hpmoe::CopyMessage(err, errlen, e);
    return 1;
  }
  return 0;
}

// Fills [from, to) of every segment of a group heap with the garbage the stub's windows get when created
// (tests put it into the CPU twin's heap too, so rows neither backend writes compare equal).
void hpmoe_ascendc_window_garbage(void* base, uint32_t ep, uint64_t segment_bytes, uint64_t from, uint64_t to) {
  hpmoe::ascend::FillWindowGarbage(base, ep, segment_bytes, from, to);
}

}  // extern "C"
