// C ABI of the CPU twin (loaded by scheduler/hpmoe/runtime/native.py through ctypes). Every function that
// can fail returns 0 / a pointer on success, else non-zero / NULL with one line in `err`.
#pragma once

#include <stdint.h>

extern "C" {

typedef struct {
  uint64_t timeout_ms;        // bound on every wait
  uint32_t handlers;          // 0: compute, 1: no-op handlers (dispatch overhead benchmark)
  uint32_t fault_mode;        // 0: none, 1: the process exits, 2: the handler fails
  uint32_t fault_after;       // handler calls on this rank before the fault
  uint32_t fault_direction;   // 0 fwd, 1 bwd
} HpmoeRankOptions;

// The routing plan phase (op_kernel/runtime/routing_plan.h) of one source rank: ids [tokens*topk] int32;
// outputs send_counts [ep*E], send_rows [ep*C], token_rows [tokens*topk]. Returns 0; with `need` the most rows
// sent to one destination (pads included) and `bad_id` the first out-of-range (t*k + j) or -1. need > C: the plan
// is incomplete. align: 1, or tile_m under kConfigExpertAligned (each expert's first row a multiple of it).
int hpmoe_cpu_plan(uint32_t tokens, uint32_t topk, uint32_t ep, uint32_t experts_per_rank, uint32_t rows_per_src,
                   uint32_t align, const int32_t* ids, int32_t* send_counts, int32_t* send_rows, int32_t* token_rows, uint32_t* need,
                   int64_t* bad_id);
// The same for the tokens [token_begin, token_end) only (a pass of the speculative bucket): the other tokens'
// entries get no row and token_rows -1.
int hpmoe_cpu_plan_range(uint32_t tokens, uint32_t topk, uint32_t ep, uint32_t experts_per_rank, uint32_t rows_per_src,
                         uint32_t align, uint32_t token_begin, uint32_t token_end, const int32_t* ids,
                         int32_t* send_counts, int32_t* send_rows, int32_t* token_rows, uint32_t* need, int64_t* bad_id);

// config16: the 16 uint32 of ssc::SscConfig. Fills offsets/bytes of the 26 slots, the two counter offsets,
// and the size of one rank's segment.
int hpmoe_cpu_layout(const uint32_t* config16, uint32_t counters_fwd, uint32_t counters_bwd, uint64_t* slot_offsets,
                     uint64_t* slot_bytes, uint64_t* counter_offsets, uint64_t* segment_bytes, char* err, int errlen);

void* hpmoe_cpu_shm_create(const char* name, uint64_t bytes, char* err, int errlen);
void* hpmoe_cpu_shm_attach(const char* name, uint64_t bytes, char* err, int errlen);
void* hpmoe_cpu_anon_create(uint64_t bytes, char* err, int errlen);
void hpmoe_cpu_unmap(void* base, uint64_t bytes);
int hpmoe_cpu_shm_unlink(const char* name);
void hpmoe_cpu_heap_init(void* base, uint32_t ep, uint64_t segment_bytes);
// Marks the group failed on behalf of `rank`: every worker stops at its next wait (launcher fault path).
void hpmoe_cpu_heap_abort(void* base, uint32_t ep, uint64_t segment_bytes, uint32_t rank);

void* hpmoe_cpu_rank_open(void* base, uint64_t segment_bytes, const uint32_t* config16, uint32_t counters_fwd,
                          uint32_t counters_bwd, uint32_t rank, const uint8_t* fwd, uint64_t fwd_len,
                          const uint8_t* bwd, uint64_t bwd_len, const HpmoeRankOptions* options, char* err,
                          int errlen);
void hpmoe_cpu_rank_close(void* rank);
// The tokens [token_begin, token_end) the rank's next launches reduce (a pass of the speculative bucket, whose
// plan routed only them: hpmoe_cpu_plan_range); [0, ~0u) by default. The CPU twin's handlers, and the AscendC
// kernel's through its tiling (the ascendc-cpu runner).
void hpmoe_cpu_rank_set_tokens(void* rank, uint32_t token_begin, uint32_t token_end);
// Runs one launch of `direction` on the given ranks of this process together (1 rank: a rank process).
// dispatch: 0 static (the worker loop), 1 dynamic ready queue (benchmark; all ranks of the group needed).
int hpmoe_cpu_run(void* const* ranks, uint32_t num_ranks, uint32_t direction, uint32_t dispatch, char* err,
                  int errlen);
}
