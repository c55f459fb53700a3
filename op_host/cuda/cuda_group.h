// Host side of the CUDA backend: one EP group driven from one process, rank r on GPU devices[r] (one GPU per
// rank; several ranks may share a GPU for small tests). Each rank's heap segment is one cudaMalloc with the
// CPU twin's layout (op_kernel/cpu/heap_layout.h); peers reach each other's segments through P2P pointers,
// so a symmetric address translates by segment base exactly as on the CPU twin and under NVSHMEM.
// SSCs are accepted only through the shared validating loader (op_host/ssc_loader.h: LoadSsc per rank,
// ValidateGroup per direction) plus this backend's checks, then uploaded. A launch is one cooperative
// (co-resident) persistent kernel per rank; all ranks of a direction are launched together.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../../op_kernel/cpu/heap_layout.h"
#include "../../op_kernel/cuda/device_rank.cuh"
#include "../ssc_loader.h"

namespace hpmoe {
namespace cuda {

// Launch's CUDA event marks around the persistent kernel: both (one launch timed), or only the start / the end
// (a sequence timed as one: a speculative forward and its passes, KernelMs spans them).
constexpr uint32_t kTimedBoth = 1, kTimedStart = 2, kTimedEnd = 4;

struct LaunchOptions {
  uint64_t timeout_ms = 30000;
  uint32_t fault_rank = 0;
  uint32_t fault_mode = kCudaFaultNone;  // CudaFault
  uint32_t fault_after = 0;
  bool trace = false;  // record per-task global-timer start/end and worker
  bool plan = false;   // Run, forward: build the routing plan from the TOPK_IDS slot on the device first
};

// What one launch binds (launch_binding.cuh): slots used in place (device addresses; 0 = the heap slot; only
// BindableSlot slots), how the weight gradient reaches DW1/DW2 (dw_mode), and whether to build the routing
// plan on the device first (forward: from the TOPK_IDS slot, bound or in the heap).
struct LaunchSpec {
  uint64_t bound[ssc::kSlotCount] = {};
  uint32_t dw_mode = 0;  // kDwModelDtype | kDwAccumulate (device_rank.cuh)
  bool plan = false;
  uint32_t run_if = kRunAlways;             // RunIf (device_rank.cuh): the speculative bucket's launches
  uint32_t token_begin = 0, token_end = ~0u;  // the tokens routed and reduced (clipped to T)
  void* need_out = nullptr;                 // kRunSpeculate: pinned (mapped) host word for the agreed need
};

struct RankState {
  int device = 0;
  uint8_t* segment = nullptr;  // this process's allocation, a P2P-reachable one, or a peer's IPC mapping
  bool owned = false;          // allocated here (else mapped from a peer process)
  ssc::LoadedSsc ssc[2];
  uint8_t* image[2] = {nullptr, nullptr};  // the validated SSC file on the device
  DeviceRank host_rank[2]{};
  DeviceRank* dev_rank[2] = {nullptr, nullptr};
  rt::WorkerReport* reports[2] = {nullptr, nullptr};
  uint64_t* trace[2] = {nullptr, nullptr};
  uint32_t* fault_counter = nullptr;
  uint8_t* tensor_maps = nullptr;  // TMA builds: this rank's slot tensor maps (tensor_maps.h)
  uint32_t* epoch[2] = {nullptr, nullptr};  // device launch counters (the bind kernel advances them)
  uint32_t* plan_counts = nullptr;           // routing_plan.cuh scratch: [chunks][ep * E]
  bool device_copy_current[2] = {false, false};  // dev_rank[d] holds host_rank[d] (options, peer segments)
  LaunchOptions last_options[2];
  uint64_t map_base[2][2] = {};              // [direction][W1/W2]: the address the cached maps describe
  uint8_t weight_maps[2][2][kBoxKinds][kTensorMapBytes] = {};
  uint64_t dw_map_base[2] = {};              // [DW1/DW2]: the address the cached store maps describe
  uint8_t dw_maps[2][kTensorMapBytes] = {};  // box 64 x 64, the model dtype (TMA stores of weight gradients)
  void* last_stream = nullptr;               // of the last launch (a failure is read after syncing it)
  void* stream = nullptr;  // cudaStream_t
  void* events[2] = {nullptr, nullptr};       // Run: around the persistent kernel
  void* kernel_events[2][2] = {};               // [direction][start/end]: timed launches (Launch)
  float last_ms = 0.0f;
};

class CudaGroup {
 public:
  ~CudaGroup();
  // Allocates and zeroes every rank's segment; enables peer access between the GPUs. "" or one line.
  // Before Create/CreateLocal: slots (bit s = slot s, BindableSlot ones only) that live outside the heap;
  // every launch of a direction that uses one must bind it. Saves their bytes in every heap.
  std::string SetExternalSlots(uint32_t mask);
  // Before Create/CreateLocal: PlaceableSlot slots that live at fixed device addresses outside the heap for
  // the group's lifetime (addresses[s] != 0), e.g. a workspace that groups whose launches never overlap
  // share; their tensor maps describe those addresses. Only for a group with one rank in this process.
  std::string SetPlacedSlots(const uint64_t* addresses);
  std::string Create(const ssc::SscConfig& cfg, uint32_t counters_fwd, uint32_t counters_bwd,
                     const std::vector<int>& devices);
  // One rank of a group whose ranks are separate processes (one GPU each, e.g. torchrun): allocates only
  // `rank`'s segment; the peers' segments are mapped with OpenPeer from handles ExportHandle produced there.
  std::string CreateLocal(const ssc::SscConfig& cfg, uint32_t counters_fwd, uint32_t counters_bwd, uint32_t rank,
                          int device);
  std::string ExportHandle(uint8_t* out, size_t size) const;
  std::string OpenPeer(uint32_t peer, const uint8_t* handle, size_t size);
  // Validates (shared loader + group check once every rank's file of `direction` is in) and uploads.
  std::string Load(uint32_t rank, uint32_t direction, const uint8_t* data, size_t size);
  // Copies a whole slot in or out; src/dst may be host or device memory (unified addressing).
  std::string Write(uint32_t rank, uint32_t slot, const void* src, uint64_t bytes);
  std::string Read(uint32_t rank, uint32_t slot, void* dst, uint64_t bytes);
  // One launch of `direction` on every rank; "" or the report of the worker that failed first.
  std::string Run(uint32_t direction, const LaunchOptions& options);
  // Enqueues one launch of `direction` on local `rank` on `stream` (a cudaStream_t, e.g. PyTorch's current
  // stream) and returns without waiting: bind, [plan], persistent kernel. Capturable in a CUDA graph once a
  // launch with the same options ran eagerly. A failure is found by Poll. timed: kTimed* (0: no marks).
  std::string Launch(uint32_t rank, uint32_t direction, void* stream, const LaunchSpec& spec,
                     const LaunchOptions& options, uint32_t timed = 0);
  // The milliseconds between the start mark and the end mark of `direction`'s timed launches (waits for the
  // end): one launch's persistent kernel, or a launch sequence's (kTimedStart on its first, kTimedEnd on its last).
  std::string KernelMs(uint32_t rank, uint32_t direction, float* ms);
  // "" while no launch has failed (reads mapped host memory, no sync); else syncs the failed rank's last
  // stream and returns the first report in one line. The group is unusable after a failure.
  std::string Poll();
  uint32_t NumRanks() const { return uint32_t(ranks_.size()); }
  float LastMs(uint32_t rank) const { return ranks_[rank].last_ms; }
  uint32_t NumTasks(uint32_t rank, uint32_t direction) const { return ranks_[rank].ssc[direction].program.num_tasks; }
  std::string ReadTrace(uint32_t rank, uint32_t direction, uint64_t* out);
  const cpu::HeapLayout& layout() const { return layout_; }

 private:
  std::string Configure(const ssc::SscConfig& cfg, uint32_t counters_fwd, uint32_t counters_bwd);
  std::string AllocateRank(uint32_t rank, int device);
  bool IsLocal(uint32_t rank) const { return local_rank_ < 0 || int(rank) == local_rank_; }
  std::string CheckBinding(uint32_t rank, uint32_t direction) const;
  std::string Upload(uint32_t rank, uint32_t direction);
  std::string CheckCoResidency(uint32_t rank, uint32_t direction) const;
  std::string LaunchRefusal(uint32_t direction) const;
  std::string Enqueue(uint32_t rank, uint32_t direction, void* stream, const LaunchSpec& spec,
                      const LaunchOptions& options, uint32_t timed);
  std::string BindWeights(RankState& s, uint32_t direction, const LaunchSpec& spec, void* binding);
  std::string BindWeightGradMaps(RankState& s, uint32_t direction, const LaunchSpec& spec, void* binding);
  std::string FailureReport(uint32_t rank);

  ssc::SscConfig cfg_{};
  cpu::HeapLayout layout_{};
  std::vector<RankState> ranks_;
  bool validated_[2] = {false, false};
  bool failed_ = false;
  uint32_t* host_status_ = nullptr;
  uint32_t external_mask_ = 0;  // mapped pinned memory, one word per rank (DeviceRank::host_status)
  uint64_t placed_[ssc::kSlotCount] = {};  // SetPlacedSlots: fixed addresses (0: in the heap or external)
  uint32_t placed_mask_ = 0;
  int local_rank_ = -1;  // -1: every rank lives in this process
};

}  // namespace cuda
}  // namespace hpmoe
