// Static Schedule Configuration (SSC) binary layout: the one definition every backend includes.
//
// The same header compiles on the host (C++17), as AscendC device code and as CUDA device code, so it
// holds only fixed-size POD records with explicit-width fields, enums with fixed values, and
// static_asserts that fail the build when a record's size or a field's offset moves. The Python writer
// (scheduler/hpmoe/ssc_format.py) mirrors these records; tests/test_golden.py and the C++ reader test
// compare both against golden files, so the two cannot drift.
//
// File = SscHeader, then the sections the header's section table points at, each an array of records.
// All integers are little-endian. Offsets are from the start of the file and 16-byte aligned.
#pragma once

#include <stdint.h>

namespace hpmoe {
namespace ssc {

constexpr uint32_t kMagic = 0x434D5348u;  // "HSMC" read as little-endian bytes 'H','S','M','C'
constexpr uint16_t kVersionMajor = 1;     // bumped when a record changes; readers refuse other majors
constexpr uint16_t kVersionMinor = 2;     // 1: kTaskAdd; 2: kTaskGmmSwiglu, kTaskGmmSwigluGrad, kConfigFusedSwiglu

// Limits, named so that the writer, the validator and every reader agree.
constexpr uint32_t kMaxInputs = 4;        // tensor regions a task reads
constexpr uint32_t kMaxOutputs = 2;       // tensor regions a task writes
constexpr uint32_t kMaxWaits = 2;         // events a task waits on before it runs
constexpr uint32_t kMaxTriggers = 2;      // events a task triggers after it ran
constexpr uint32_t kMaxTensorDims = 4;
constexpr uint32_t kTensorNameBytes = 24;
constexpr uint32_t kNoEvent = 0xFFFFFFFFu;
constexpr uint32_t kNoSlot = 0xFFFFu;
constexpr uint32_t kCounterStrideBytes = 64;  // each event counter owns one cache line
// kConfigFusedSwiglu: H holds gate and up interleaved in groups of this many columns (half a CUDA GMM tile's
// N), H[:, 2g*G + j] = gate[:, g*G + j] and H[:, (2g+1)*G + j] = up[:, g*G + j], so that one GMM tile's output
// columns are a gate group and its up group: the tile can apply SwiGLU in its epilogue. I % G == 0.
constexpr uint32_t kFusedSwigluGroup = 128;

// ---- enums -------------------------------------------------------------------------------------

enum Direction : uint32_t { kForward = 0, kBackward = 1 };

// CTQ: AIC (cube) tasks; VTQ: AIV (vector) tasks; pool (kConfigClaimPool): the queues after the workers',
// each one unit that a claiming worker (CTQ; with mixed queues and no row pipelines any) claims at run time
// and runs whole.
enum QueueType : uint32_t { kCTQ = 0, kVTQ = 1, kPoolQueue = 2 };

enum DType : uint32_t { kFP32 = 0, kFP16 = 1, kBF16 = 2, kINT32 = 3 };

// What a handler does. Values are part of the file format.
enum TaskType : uint32_t {
  kTaskEntrySignal = 0,       // VTQ: tell a peer this rank entered the invocation (WAR guard on its buffers)
  kTaskCountPut = 1,          // VTQ: put this rank's per-expert row counts for one peer into its recv_counts
  kTaskDispatchPut = 2,       // VTQ: gather routed x rows of one chunk, put_mem_signal them to the expert's rank
  kTaskGmm = 3,               // CTQ: rows x W[e] for each expert segment of a row tile (GMM1, GMM2)
  kTaskSwiglu = 4,            // VTQ: A = silu(H[:, :I]) * H[:, I:] on a row tile
  kTaskCombinePut = 5,        // VTQ: put one row tile of expert outputs back to its source rank
  kTaskCombineReduce = 6,     // VTQ: y[t] = sum_j w[t,j] * Y[t,j] over a token tile, fixed j order
  kTaskBwdDispatchPut = 7,    // VTQ: gather w[t,j] * dy[t] rows of one chunk and put them to the expert's rank
  kTaskGmmTransB = 8,         // CTQ: rows x W[e]^T for each expert segment (act_grad, gate_grad)
  kTaskGmmWeightGrad = 9,     // CTQ: dW[e][block] = X_e^T dY_e over all rows of expert e (full reduction)
  kTaskSwigluGrad = 10,       // VTQ: dH from dA and H on a row tile
  kTaskBwdCombineReduce = 11, // VTQ: dx[t] = sum_j dX[t,j] over a token tile, fixed j order
  kTaskTopkWeightGrad = 12,   // VTQ: dw[t,j] = <Y[t,j], dy[t]> over a token tile
  kTaskAdd = 13,              // VTQ: out = in0 + in1 on a row tile (elementwise; residual adds, microbenchmarks)
  kTaskGmmSwiglu = 14,        // CTQ (kConfigFusedSwiglu): GMM1 on A's columns [c0, c0 + m) (W1's gate and up columns
                              // of them), writing H's interleaved columns [2 c0, 2 c0 + 2 m) and A = SwiGLU of them
  kTaskGmmSwigluGrad = 15,    // CTQ (kConfigFusedSwiglu): dA = dY W2^T on columns [c0, c0 + m), never stored: with
                              // H's interleaved columns [2 c0, 2 c0 + 2 m) it gives dH's gate and up columns
  kTaskTypeCount = 16
};

// Tensor slots: stable ids by which the runtime binds buffers. Shapes live in the SSC's tensor table.
enum SlotId : uint32_t {
  kSlotX = 0,              // [T, h] tokens of this rank
  kSlotTopkIds = 1,        // [T, k] int32 global expert ids
  kSlotTopkWeights = 2,    // [T, k] fp32
  kSlotW1 = 3,             // [E_local, h, 2I] gate | up; kConfigWeightsTransposed: [E_local, 2I, h] gate rows first
  kSlotW2 = 4,             // [E_local, I, h]; kConfigWeightsTransposed: [E_local, h, I]
  kSlotSendRows = 5,       // [ep, C] int32: for each peer's slot row, the (t*k + j) it carries, -1 = pad
  kSlotSendCounts = 6,     // [ep, E_local] int32: rows this rank sends to each peer, per local expert there
  kSlotRecvCounts = 7,     // [ep, E_local] int32, symmetric: rows each source sent here, per local expert
  kSlotPeerReady = 8,      // [ep] int32, symmetric: entry flags written by peers (WAR guard)
  kSlotRecvX = 9,          // [ep*C, h] symmetric: dispatched rows, slot s = rows from source s
  kSlotH = 10,             // [ep*C, 2I] GMM1 output (kConfigFusedSwiglu: gate and up interleaved, kFusedSwigluGroup)
  kSlotA = 11,             // [ep*C, I] SwiGLU output
  kSlotYExpert = 12,       // [ep*C, h] GMM2 output
  kSlotRetY = 13,          // [ep*C, h] symmetric on the source: expert outputs returned, slot d = from rank d
  kSlotY = 14,             // [T, h] output
  kSlotDy = 15,            // [T, h] upstream gradient
  kSlotRecvDy = 16,        // [ep*C, h] symmetric: w * dy rows dispatched in backward
  kSlotDA = 17,            // [ep*C, I]
  kSlotDH = 18,            // [ep*C, 2I]
  kSlotDxExpert = 19,      // [ep*C, h]
  kSlotRetDx = 20,         // [ep*C, h] symmetric on the source
  kSlotDx = 21,            // [T, h]
  kSlotDW1 = 22,           // [E_local, h, 2I] (W1's layout)
  kSlotDW2 = 23,           // [E_local, I, h] (W2's layout)
  kSlotDTopkWeights = 24,  // [T, k] fp32
  kSlotTokenRows = 25,     // [T, k] int32: row of (t, j) in this rank's return buffers (ret_y, ret_dx)
  kSlotCount = 26
};

enum TensorRole : uint32_t {
  kRoleInput = 0,      // supplied by the caller each invocation
  kRoleWeight = 1,     // model parameter
  kRoleRouting = 2,    // routing-derived metadata (host plan or count exchange); ignored by split checks
  kRoleWorkspace = 3,  // produced and consumed inside the invocation
  kRoleSaved = 4,      // produced by forward, read by backward
  kRoleOutput = 5
};

enum TensorFlags : uint32_t {
  kTensorSymmetric = 1u << 0,  // lives in the symmetric heap: peers write it with put_mem_signal
};

// Flags on one region a task reads or writes.
enum RefFlags : uint16_t {
  kRefRemote = 1u << 0,       // region lives on `rank`, not on the executing rank
  kRefRowsDynamic = 1u << 1,  // `rows` is an upper bound; the routing counts give the valid extent
  kRefGather = 1u << 2,       // rows are gathered through the send_rows plan, not contiguous
};

enum EventFlags : uint32_t {
  kEventRemoteTriggered = 1u << 0,  // some trigger comes from another rank (put_mem_signal)
};

enum ConfigFlags : uint32_t {
  kConfigRatr = 1u << 0,         // rank-aware task reordering was on
  kConfigInterleave = 1u << 1,   // cache-guided GMM interleaving was on
  kConfigMixedQueues = 1u << 2,  // CTQs may also hold vector tasks (dispatch puts, top-k reductions): only for
                                 // backends whose every worker runs every handler (CPU twin, CUDA)
  kConfigRowPipelines = 1u << 3,  // each row tile's chain on one cube-queue worker (needs kConfigMixedQueues)
  kConfigClaimPool = 1u << 4,    // pool queues after the workers' queues, claimed at run time by the CTQ workers
                                 // (with kConfigMixedQueues and no row pipelines by every worker) through
                                 // counter num_events (CPU twin, CUDA)
  kConfigWeightsTransposed = 1u << 5,  // weights as nn.Linear stores them: W1 [E, 2I, h], W2 [E, h, I] (and
                                       // dW1, dW2 alike), read in place (CPU twin, CUDA; not the AscendC kernel)
  kConfigFusedSwiglu = 1u << 6,  // SwiGLU and its gradient run in the GMM tiles' epilogues (kTaskGmmSwiglu,
                                 // kTaskGmmSwigluGrad; no SWIGLU / SWIGLU_GRAD tasks), H interleaved in groups of
                                 // kFusedSwigluGroup columns (needs kConfigMixedQueues: CPU twin, CUDA)
  kConfigExpertAligned = 1u << 7,  // local expert e's rows in a slot start at the sum over e' < e of
                                   // round_up(recv_counts[s][e'], tile_m): every row tile holds one expert's rows
                                   // (pads between experts, send_rows -1 there; CPU twin, CUDA)
};

// ---- records -----------------------------------------------------------------------------------

// The full compile configuration: a runtime refuses an SSC whose config differs from its own.
struct SscConfig {
  uint32_t ep;                 // EP group size
  uint32_t tokens;             // T: tokens per rank (shape bucket)
  uint32_t hidden;             // h
  uint32_t inter;              // I (W1 has 2I columns: gate | up)
  uint32_t experts_per_rank;   // E_local; expert e lives on rank e / E_local
  uint32_t topk;               // k
  uint32_t dtype;              // DType of x, weights and activations; accumulation is fp32
  uint32_t tile_m;             // rows per row tile (dispatch chunk = GMM/SwiGLU/combine tile)
  uint32_t recv_rows_per_src;  // C: rows a rank can receive from each source (shape bucket), multiple of tile_m
  uint32_t wgrad_tile;         // output rows per weight-gradient tile (divides h and I)
  uint32_t token_tile;         // tokens per combine-reduce / topk-weight-grad tile
  uint32_t num_aic;            // AIC workers (A3: 25)
  uint32_t num_aiv;            // AIV workers (A3: 50)
  uint32_t flags;              // ConfigFlags
  uint32_t reserved[2];
};
static_assert(sizeof(SscConfig) == 64, "SscConfig layout changed: bump kVersionMajor");

struct SscSection {
  uint32_t offset;        // bytes from file start
  uint32_t count;         // records
  uint32_t record_bytes;  // sizeof(record), checked by readers
  uint32_t reserved;
};
static_assert(sizeof(SscSection) == 16, "SscSection layout changed");

enum SectionId : uint32_t {
  kSecTensors = 0,       // SscTensor[]
  kSecTasks = 1,         // SscTask[]
  kSecEvents = 2,        // SscEvent[]
  kSecQueues = 3,        // SscQueue[]: one per worker (AIC workers first, then AIV)
  kSecQueueEntries = 4,  // uint32 task indices, each queue a contiguous run
  kSecTilings = 5,       // SscTiling[]
  kSectionCount = 6
};

struct SscHeader {
  uint32_t magic;          // kMagic
  uint16_t version_major;  // kVersionMajor
  uint16_t version_minor;
  uint32_t header_bytes;   // sizeof(SscHeader)
  uint32_t file_bytes;     // whole file
  uint32_t checksum;       // CRC-32 (IEEE, as zlib) of the whole file with this field zeroed
  uint32_t direction;      // Direction
  uint32_t rank;           // the rank this schedule runs on
  uint32_t num_workers;    // num_aic + num_aiv
  SscConfig config;
  SscSection sections[kSectionCount];
};
static_assert(sizeof(SscHeader) == 32 + 64 + 16 * 6, "SscHeader layout changed: bump kVersionMajor");
static_assert(__builtin_offsetof(SscHeader, config) == 32, "SscHeader.config moved");
static_assert(__builtin_offsetof(SscHeader, sections) == 96, "SscHeader.sections moved");

struct SscTensor {
  uint32_t slot;   // SlotId
  uint32_t role;   // TensorRole
  uint32_t dtype;  // DType
  uint32_t flags;  // TensorFlags
  uint32_t ndim;
  uint32_t dims[kMaxTensorDims];
  uint32_t reserved;
  uint64_t bytes;
  char name[kTensorNameBytes];  // NUL-padded, for diagnostics only
};
static_assert(sizeof(SscTensor) == 72, "SscTensor layout changed: bump kVersionMajor");

// One region of a tensor that a task reads or writes (Table 1's TDesc). 2-D view: rows x cols of the
// slot flattened to [dims[0] * ... , last dim] for activations, [E_local * dims[1], dims[2]] for weights.
struct SscTensorRef {
  uint16_t slot;        // SlotId, kNoSlot = unused entry
  uint16_t flags;       // RefFlags
  uint32_t rank;        // rank that owns the region (== executing rank unless kRefRemote)
  uint32_t row_offset;  // tile offset
  uint32_t rows;        // tile shape (upper bound when kRefRowsDynamic)
  uint32_t col_offset;
  uint32_t cols;
};
static_assert(sizeof(SscTensorRef) == 24, "SscTensorRef layout changed: bump kVersionMajor");

// Task Descriptor: Table 1 of the paper, with two waits and two triggers (a consumer of two producer
// families, or a producer feeding a tile consumer and a whole-buffer consumer, needs no join task).
struct SscTask {
  uint32_t task_type;                 // TaskType
  uint32_t queue_type;                // QueueType
  uint32_t dependent_event[kMaxWaits];     // events on this rank that must reach their thresholds
  uint32_t trigger_event[kMaxTriggers];    // events triggered after the task, on trigger_rank[i]
  uint32_t trigger_rank[kMaxTriggers];     // rank owning each triggered counter (put_mem_signal if remote)
  uint32_t task_index;                // tile index within the operator
  uint32_t task_split_num;            // tiles generated for the operator
  uint32_t task_split_value;          // per-task split granularity (rows, tokens or weight rows)
  uint32_t tiling_data_position;      // index into the tiling section
  uint32_t op_id;                     // ODG node that generated the task
  uint32_t peer;                      // source/destination rank of the row slot the task touches
  uint32_t expert;                    // local expert (weight-grad tiles), else 0
  uint32_t reserved;
  SscTensorRef inputs[kMaxInputs];
  SscTensorRef outputs[kMaxOutputs];
};
static_assert(sizeof(SscTask) == 64 + 24 * 6, "SscTask layout changed: bump kVersionMajor");
static_assert(__builtin_offsetof(SscTask, inputs) == 64, "SscTask.inputs moved");

struct SscEvent {
  uint32_t threshold;  // triggers per invocation; a wait passes when counter - epoch_base >= threshold
  uint32_t flags;      // EventFlags
  uint32_t op_id;      // consumer op, for diagnostics
  uint32_t reserved;
};
static_assert(sizeof(SscEvent) == 16, "SscEvent layout changed: bump kVersionMajor");

struct SscQueue {
  uint32_t queue_type;   // QueueType
  uint32_t worker;       // index within its type: AIC 0..num_aic-1, AIV 0..num_aiv-1
  uint32_t first_entry;  // into the queue-entry section
  uint32_t count;
};
static_assert(sizeof(SscQueue) == 16, "SscQueue layout changed: bump kVersionMajor");

// Operator tiling data, shared by the tasks of one op (Table 1's tiling_data_position points here).
struct SscTiling {
  uint32_t op_id;
  uint32_t task_type;
  uint32_t m;       // rows per task (tile rows, tokens, or weight rows)
  uint32_t n;       // output columns per task (the expert width, or the GMM column block when it is split)
  uint32_t k;       // reduction length (full: never split)
  uint32_t experts; // expert groups the op spans
  uint32_t reserved[2];
};
static_assert(sizeof(SscTiling) == 32, "SscTiling layout changed: bump kVersionMajor");

}  // namespace ssc
}  // namespace hpmoe
