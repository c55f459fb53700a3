#include "rank_runtime.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "../../op_kernel/cpu/cpu_handlers.h"
#include "../../op_kernel/cpu/dtype.h"
#include "../../op_kernel/runtime/worker_loop.h"
#include "../one_line.h"
#include "../worker_report.h"

namespace hpmoe {
namespace cpu {
namespace {

const char* const kDirNames[2] = {"fwd", "bwd"};

}  // namespace

std::unique_ptr<RankRuntime> RankRuntime::Open(const GroupMemory& group, const HeapLayout& layout, uint32_t rank,
                                               const ssc::SscConfig& config, const uint8_t* fwd, size_t fwd_size,
                                               const uint8_t* bwd, size_t bwd_size, const RankOptions& options,
                                               std::string* error) {
  std::unique_ptr<RankRuntime> rt(new RankRuntime());
  if (rank >= group.ep || group.ep != config.ep) {
    *error = Format("rank %u outside a group of %u (config ep=%u)", rank, group.ep, config.ep);
    return nullptr;
  }
  const ControlBlock* cb = group.Control(rank);
  if (cb->magic != kControlMagic || cb->ep != group.ep || cb->segment_bytes != group.segment_bytes) {
    *error = Format("rank %u: the heap segment was not initialised for this layout", rank);
    return nullptr;
  }
  // The bound every wait relies on: 0 would fail every wait, and past a day the nanosecond product can wrap.
  if (options.timeout_ms < 1 || options.timeout_ms > kMaxTimeoutMs) {
    *error = Format("wait timeout %llu ms is outside [1, %llu] ms", static_cast<unsigned long long>(options.timeout_ms),
                    static_cast<unsigned long long>(kMaxTimeoutMs));
    return nullptr;
  }
  if (fwd == nullptr && bwd == nullptr) {
    *error = "neither a fwd nor a bwd SSC was given";
    return nullptr;
  }
  rt->group_ = group;
  rt->layout_ = layout;
  rt->options_ = options;
  const uint8_t* data[2] = {fwd, bwd};
  const size_t size[2] = {fwd_size, bwd_size};
  for (uint32_t d = 0; d < 2; ++d) {
    if (data[d] == nullptr) continue;
    *error = LoadProgram(data[d], size[d], config, rank, d, rt->layout_, &rt->programs_[d]);
    if (!error->empty()) return nullptr;
    rt->sync_[d].reset(new CpuSync(group, rank, layout.counter_offset[d], options.timeout_ms * 1000000ull));
    rt->sync_[d]->SetClaimCounter(rt->programs_[d].program.num_events);  // used only when the SSC has a pool
  }
  rt->ctx_.cfg = config;
  rt->ctx_.rank = rank;
  rt->ctx_.layout = &rt->layout_;
  rt->ctx_.segment = group.Segment(rank);
  rt->ctx_.tasks_run = &rt->tasks_run_;
  // Scratch for the largest operand any handler converts (a slot's rows, at most C, x the widest activation).
  const uint64_t C = config.recv_rows_per_src, h = config.hidden, I = config.inter;
  const uint64_t width = std::max<uint64_t>(h, 2 * I);
  const uint64_t tile_floats = C * width;
  const uint64_t weight_floats = WeightsConverted(config.dtype, config.flags) ? 2 * I * h : 0;
  const uint64_t per_worker = 3 * tile_floats + weight_floats + 16;
  const uint64_t staging = C * h * DTypeBytes(config.dtype) + 64;
  const uint32_t workers = config.num_aic + config.num_aiv;
  rt->scratch_floats_.assign(per_worker * workers, 0.0f);
  rt->staging_bytes_.assign(staging * workers, 0);
  rt->scratch_.resize(workers);
  for (uint32_t w = 0; w < workers; ++w) {
    float* base = rt->scratch_floats_.data() + w * per_worker;
    WorkerScratch& s = rt->scratch_[w];
    s.a = base;
    s.b = base + tile_floats;
    s.out = base + 2 * tile_floats;
    s.weight = base + 3 * tile_floats;
    s.staging = rt->staging_bytes_.data() + w * staging;
  }
  error->clear();
  return rt;
}

std::string RankRuntime::Prepare(uint32_t direction) {
  if (direction > 1 || !programs_[direction].loaded)
    return Format("rank %u has no %s SSC loaded", ctx_.rank, kDirNames[direction & 1]);
  ControlBlock* cb = group_.Control(ctx_.rank);
  // The abort word means something once a launch ran: on HCCL windows it starts as garbage and the AscendC
  // kernel's first launch zeroes it (the twin's heap is zeroed when created).
  const bool launched = cb->invocations[0] + cb->invocations[1] != 0;
  const uint32_t failed = __atomic_load_n(&cb->abort_rank_plus1, __ATOMIC_ACQUIRE);
  if (launched && failed != 0)
    return Format("rank %u: the group heap is marked failed (rank %u failed earlier); create a new one",
                  ctx_.rank, failed - 1);
  direction_ = direction;
  programs_[direction].program.invocation = ++cb->invocations[direction];
  ++launches_;
  for (WorkerScratch& s : scratch_) s.launch = launches_;
  tasks_run_ = 0;
  const bool faulty = options_.fault_mode != kFaultNone && options_.fault_direction == direction;
  ctx_.fault_mode = faulty ? options_.fault_mode : kFaultNone;
  ctx_.fault_after = options_.fault_after;
  return "";
}

int32_t RankRuntime::RunWorker(uint32_t queue, rt::WorkerReport* report) {
  const rt::SscProgram& p = programs_[direction_].program;
  CpuSync& sync = *sync_[direction_];
  int32_t status;
  if (options_.handlers == kHandlersNull) {
    NullHandlers<CpuSync> handlers(sync);
    status = rt::RunWorkerQueue(p, queue, sync, handlers, report);
  } else {
    CpuHandlers<CpuSync> handlers(ctx_, scratch_[queue], sync);
    status = rt::RunWorkerQueue(p, queue, sync, handlers, report);
  }
  if (status != rt::kOk && status != rt::kAborted) sync.RaiseAbort();
  return status;
}

std::string RunGroup(RankRuntime* const* ranks, uint32_t num_ranks, uint32_t direction) {
  for (uint32_t i = 0; i < num_ranks; ++i) {
    const std::string err = ranks[i]->Prepare(direction);
    if (!err.empty()) return err;
  }
  std::vector<std::pair<uint32_t, uint32_t>> jobs;
  for (uint32_t i = 0; i < num_ranks; ++i)
    for (uint32_t q = 0; q < ranks[i]->num_workers(direction); ++q) jobs.emplace_back(i, q);
  std::vector<rt::WorkerReport> reports(jobs.size());
  std::vector<int32_t> status(jobs.size(), rt::kOk);
  std::vector<std::thread> threads;
  threads.reserve(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    threads.emplace_back([&, j] { status[j] = ranks[jobs[j].first]->RunWorker(jobs[j].second, &reports[j]); });
  }
  for (std::thread& t : threads) t.join();
  // The primary report is the failure that raised the abort (not one that merely stopped because of it).
  int primary = -1, failures = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (status[j] == rt::kOk) continue;
    ++failures;
    if (primary < 0 || (reports[primary].status == rt::kAborted && status[j] != rt::kAborted)) primary = int(j);
  }
  if (primary < 0) return "";
  const uint32_t num_aic = ranks[jobs[primary].first]->context().cfg.num_aic;
  std::string line = FormatWorkerReport(reports[primary], num_aic);
  if (failures > 1) line += Format(" (+%d more workers stopped)", failures - 1);
  return line;
}

}  // namespace cpu
}  // namespace hpmoe
