// C ABI of the CUDA backend (loaded by scheduler/hpmoe/cuda/native.py through ctypes). Every function that
// can fail returns 0 / a pointer on success, else non-zero / NULL with one line in `err`.
#pragma once

#include <stdint.h>

extern "C" {

typedef struct {
  uint64_t timeout_ms;   // bound on every wait
  uint32_t fault_rank;
  uint32_t fault_mode;   // 0: none, 1: drop the fault_after-th put on fault_rank (no payload, no signal)
  uint32_t fault_after;
  uint32_t trace;        // 1: record per-task start/end (global timer, ns) and worker
  uint32_t plan;         // hpmoe_cuda_run, forward: 1 = build the routing plan from TOPK_IDS on the device
} HpmoeCudaOptions;

// GPUs the CUDA runtime sees (0 when there is no driver or no GPU).
int hpmoe_cuda_device_count(void);

// Thread blocks that run one SSC worker (queue): 1, or 2 in a build whose workers are 2-block clusters
// (HPMOE_CLUSTER_WORKER): compile such SSCs for half as many workers.
uint32_t hpmoe_cuda_blocks_per_worker(void);

// config16: the 16 uint32 of ssc::SscConfig; devices: the GPU of each rank (ep entries).
// external_mask: bit s = slot s lives outside the heaps (bound by every launch that uses it; 0: none).
// placed: NULL, or 26 device addresses: slot s lives at placed[s] for the group's lifetime where non-zero
// (workspace slots only, device_rank.cuh PlaceableSlot; a group with one rank in this process).
void* hpmoe_cuda_group_create(const uint32_t* config16, uint32_t counters_fwd, uint32_t counters_bwd,
                              const int32_t* devices, uint32_t external_mask, const uint64_t* placed, char* err,
                              int errlen);
// One rank of a group whose ranks are processes (one GPU each): allocates `rank`'s heap on `device`; map the
// peers' heaps with hpmoe_cuda_ipc_open before loading SSCs of other ranks' data or running.
void* hpmoe_cuda_rank_create(const uint32_t* config16, uint32_t counters_fwd, uint32_t counters_bwd, uint32_t rank,
                             int32_t device, uint32_t external_mask, const uint64_t* placed, char* err, int errlen);
// handle: 64 bytes (cudaIpcMemHandle_t) of this process's rank heap / of a peer's.
int hpmoe_cuda_ipc_export(void* group, uint8_t* handle, char* err, int errlen);
int hpmoe_cuda_ipc_open(void* group, uint32_t peer, const uint8_t* handle, char* err, int errlen);
void hpmoe_cuda_group_destroy(void* group);
int hpmoe_cuda_load(void* group, uint32_t rank, uint32_t direction, const uint8_t* data, uint64_t size, char* err,
                    int errlen);
int hpmoe_cuda_write(void* group, uint32_t rank, uint32_t slot, const void* src, uint64_t bytes, char* err, int errlen);
int hpmoe_cuda_read(void* group, uint32_t rank, uint32_t slot, void* dst, uint64_t bytes, char* err, int errlen);
// One launch of `direction` on every rank; ms_per_rank (ep floats, may be NULL) gets each kernel's time.
int hpmoe_cuda_run(void* group, uint32_t direction, const HpmoeCudaOptions* options, float* ms_per_rank, char* err,
                   int errlen);
// Enqueues one launch of `direction` on local `rank` on `stream` (a cudaStream_t; NULL = the legacy default
// stream) without waiting: bound[26] device addresses used in place of heap slots (0 = the heap slot; only
// slots no peer writes), dw_mode: how the weight gradient reaches bound DW1/DW2 (bit 0: rounded to the model
// dtype, else fp32; bit 1: added to what they hold; kDwModelDtype/kDwAccumulate in device_rank.cuh); plan: build
// the routing plan on the device from TOPK_IDS first (forward). A failure is reported by hpmoe_cuda_poll.
int hpmoe_cuda_launch(void* group, uint32_t rank, uint32_t direction, void* stream, const uint64_t* bound,
                      uint32_t dw_mode, uint32_t plan, const HpmoeCudaOptions* options, char* err, int errlen);
// options->trace is ignored by hpmoe_cuda_launch; a launch with timed = 1 records CUDA events around its
// persistent kernel, read (after waiting for it) by hpmoe_cuda_kernel_ms; timed = 2 records only the start mark
// and 4 only the end mark, so that a sequence of launches (a forward and its passes) is timed as one.
int hpmoe_cuda_launch_timed(void* group, uint32_t rank, uint32_t direction, void* stream, const uint64_t* bound,
                            uint32_t dw_mode, uint32_t plan, uint32_t timed, const HpmoeCudaOptions* options, char* err,
                            int errlen);
// When a launch runs and which tokens it takes (the speculative bucket at ep > 1; docs/cuda.md, "Routing
// beyond the bucket"): run_if 0 always, 1 a planned forward whose ranks agree on the rows their routing needs
// and all stop before any row moves if the bucket is too small (marking the heap overflowed; the agreed need is
// written to the pinned host word need_out, if not 0), 2 / 3 only if the heap's last such forward fitted /
// overflowed. token_begin, token_end: the tokens the launch routes and reduces (end clipped to T).
typedef struct {
  uint32_t run_if;
  uint32_t token_begin;
  uint32_t token_end;
  uint64_t need_out;
} HpmoeCudaPass;
// hpmoe_cuda_launch_timed with a pass (NULL: always, every token).
int hpmoe_cuda_launch_pass(void* group, uint32_t rank, uint32_t direction, void* stream, const uint64_t* bound,
                           uint32_t dw_mode, uint32_t plan, uint32_t timed, const HpmoeCudaPass* pass,
                           const HpmoeCudaOptions* options, char* err, int errlen);
int hpmoe_cuda_kernel_ms(void* group, uint32_t rank, uint32_t direction, float* ms, char* err, int errlen);
// 0 while no launch of the group has failed (reads mapped host memory: no sync); else 1 with the first
// failure's report in `err` (after syncing the failed rank's stream).
int hpmoe_cuda_poll(void* group, char* err, int errlen);
// Bytes of one rank's heap segment (external slots take none).
uint64_t hpmoe_cuda_segment_bytes(void* group);
uint32_t hpmoe_cuda_num_tasks(void* group, uint32_t rank, uint32_t direction);
// out: num_tasks x 3 uint64 of the last traced launch: start, end (global-timer ns), the worker that ran it.
int hpmoe_cuda_trace(void* group, uint32_t rank, uint32_t direction, uint64_t* out, char* err, int errlen);
}
