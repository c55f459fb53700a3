// Executing fuzz target: the input is one group's SSC files back to back. Each file goes through the shared
// validating loader (ssc::LoadSsc); when they form a whole group that ssc::ValidateGroup accepts, the group
// runs one launch on a small fenced CPU-twin heap (every rank's workers as threads of this process, the real
// worker loop and handlers, 20 ms wait bound). Whatever the bytes, the only allowed outcomes are a one-line
// refusal, a clean run, or a one-line runtime report: any sanitizer finding is a bug in the validator.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_group.h"
#include "rank_runtime.h"
#include "ssc_loader.h"

using namespace hpmoe;

namespace {

constexpr uint64_t kWaitBoundMs = 20;

// HPMOE_FUZZ_VERBOSE=1: one line per executed group (replay checks that the seeds really run clean).
void Report(const std::string& outcome) {
  static const bool verbose = std::getenv("HPMOE_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "executed: %s\n", outcome.empty() ? "ran clean" : outcome.c_str());
}

void OneLine(const std::string& s) {
  if (s.find('\n') != std::string::npos) std::abort();
}

void RunGroupOnce(const std::vector<fuzz::FileSpan>& files, const ssc::SscConfig& cfg, uint32_t direction,
                  uint32_t max_events) {
  fuzz::FencedGroupHeap heap;
  const uint32_t counters[2] = {direction == 0 ? max_events : 1u, direction == 1 ? max_events : 1u};
  if (!heap.Create(cfg, counters[0], counters[1]).empty()) return;
  heap.FillInputs(0x5eedu);
  std::vector<std::unique_ptr<cpu::RankRuntime>> ranks(cfg.ep);
  std::vector<cpu::RankRuntime*> raw(cfg.ep);
  cpu::RankOptions options;
  options.timeout_ms = kWaitBoundMs;
  for (const fuzz::FileSpan& f : files) {
    ssc::SscHeader h;
    std::memcpy(&h, f.data, sizeof h);
    std::string err;
    const uint8_t* fwd = direction == 0 ? f.data : nullptr;
    const uint8_t* bwd = direction == 1 ? f.data : nullptr;
    ranks[h.rank] = cpu::RankRuntime::Open(heap.group(), heap.layout(), h.rank, cfg, fwd, f.size, bwd, f.size,
                                           options, &err);
    OneLine(err);
    if (!ranks[h.rank]) std::abort();  // the shared loader accepted this file a moment ago
    raw[h.rank] = ranks[h.rank].get();
  }
  const std::string outcome = cpu::RunGroup(raw.data(), cfg.ep, direction);
  OneLine(outcome);
  Report(outcome);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<fuzz::FileSpan> files = fuzz::SplitFiles(data, size);
  std::vector<std::unique_ptr<ssc::LoadedSsc>> loaded;
  bool all_ok = !files.empty();
  for (const fuzz::FileSpan& f : files) {
    loaded.emplace_back(new ssc::LoadedSsc());
    ssc::LoadExpect expect;
    expect.from_file = true;
    const std::string err = ssc::LoadSsc(f.data, f.size, expect, loaded.back().get());
    OneLine(err);
    if (err.empty() != loaded.back()->loaded) std::abort();
    all_ok &= err.empty();
  }
  if (!all_ok) return 0;
  const ssc::SscView& first = loaded[0]->view;
  const ssc::SscConfig cfg = first.config();
  if (files.size() != cfg.ep || !fuzz::SmallEnoughToRun(cfg)) return 0;
  std::vector<const ssc::LoadedSsc*> by_rank(cfg.ep, nullptr);
  uint32_t max_events = 1;
  for (const auto& l : loaded) {
    const uint32_t r = l->view.header->rank;
    if (by_rank[r] != nullptr || ssc::CheckConfig(l->view, cfg) != "") return 0;
    by_rank[r] = l.get();
    const uint32_t need = ssc::CountersNeeded(l->view);  // events, plus a pool's claim counter
    max_events = need > max_events ? need : max_events;
  }
  const std::string group_err = ssc::ValidateGroup(by_rank.data(), cfg.ep);
  OneLine(group_err);
  if (!group_err.empty()) return 0;
  RunGroupOnce(files, cfg, first.header->direction, max_events);
  return 0;
}
