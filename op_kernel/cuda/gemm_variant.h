// Which GMM tile the CUDA backend is built with, and the block size it implies (every worker block has the
// same shape, whatever its role). Build flags (NVCC_EXTRA in op_host/cuda/build_lib.sh) pick the older tiles
// for A/B measurements; the defaults are the fastest measured.
#pragma once

#include <stdint.h>

#ifndef HPMOE_GEMM_TMA
#define HPMOE_GEMM_TMA 1  // wgmma tiles fed by TMA + mbarriers (block_gemm_tma.cuh); 0: fed by cp.async
#endif
#ifndef HPMOE_GEMM_WS
// 1: warp-specialised TMA tile (block_gemm_ws.cuh): a producer warpgroup and two consumer warpgroups with
// setmaxnreg, 384 threads per block; 0 (the default): the 256-thread tile in which the consumers also issue
// the loads. Measured side by side on one H200 (docs/cuda.md "The warp-specialised tile"): the GMM tiles run
// at the same rate, and every other handler, held to 168 registers by the 384-thread block, got slower, so
// the whole op is 3-13% slower with it.
// 2: the roles for the whole launch (block_gemm_ws.cuh): warpgroups 0-1 run the worker loop and every handler
// at 232 registers, warpgroup 2 issues the GMM tiles' loads; bitwise the default, on par with it at DeepSeek-V3
// and Mixtral, 2% slower at Qwen3-235B-A22B (session 26, docs/cuda.md "Roles for the whole launch"); no fused
// SwiGLU tiles yet. The platform for multicast without per-step lockstep (BlockGemmWsPaired).
#define HPMOE_GEMM_WS 0
#endif
#ifndef HPMOE_GEMM_TALL
// 1 (with HPMOE_GEMM_WS=2): the GMM and GMM_TRANS_B tasks run the tall 256 x 192 tile (block_gemm_tall.cuh;
// 3.4% faster than the 128 x 256 tile alone at the power cap, docs/cuda.md "The tall tile, alone"); compile the
// schedule with tile_m 256. The pipeline's barriers move past its larger stages. Bitwise the default; in the op
// 30-40% slower for now (the GMM walk state spills into its K loops, session 37). 0: the 128 x 256 tile.
#define HPMOE_GEMM_TALL 0
#endif
#ifndef HPMOE_TALL_CHECK_SKEW
#define HPMOE_TALL_CHECK_SKEW 0  // 1: tests/cuda/tall_tile_check.cu only (BlockGemmTall::skew_last_ns)
#endif
#if HPMOE_GEMM_TALL && HPMOE_GEMM_WS != 2
#error "the tall tile runs in the roles of the whole launch (HPMOE_GEMM_TALL=1 needs HPMOE_GEMM_WS=2)"
#endif
#if HPMOE_GEMM_WS && !HPMOE_GEMM_TMA
#error "the warp-specialised tile is fed by TMA (HPMOE_GEMM_WS=1 needs HPMOE_GEMM_TMA=1)"
#endif
#ifndef HPMOE_GEMM_ASYNC_EPILOGUE
// 1 (TMA tile, staged epilogue): the staged rows leave as bulk copies while the block starts the next tile
// (BlockGemmTma::WriteStagedAsync); 0 (the default): the block stores them itself before going on. Measured
// on one H200 (docs/cuda.md, "What the backward waits on"): the bulk copies were 0.4-0.6 ms slower at Mixtral-8x7B
// experts and the same at DeepSeek-V3's, with and without an L2 evict-first hint on the weight gradients.
// Session 13 tried it on the weight-gradient tiles alone, the next tile's first K steps issued before the
// copies (not kept): fwd+bwd kernels Qwen3-235B 13.9 -> 15.4 ms, Mixtral-8x22B 30.1 -> 31.6, DeepSeek-V3 8192
// 29.9 -> 30.9 (benchmarks/cuda_results/h200_session13_multicast_bound.txt).
#define HPMOE_GEMM_ASYNC_EPILOGUE 0
#endif
#ifndef HPMOE_WGRAD_CHAIN
// 1: a weight-gradient unit written in the model dtype runs as one TMA pipeline over its tiles, each tile stored
// during the next one's first K steps (block_gemm_chain.cuh); 0 (the default): tile by tile, the block storing
// each epilogue itself. Bitwise the same; on one H200 (docs/cuda.md, "The weight-gradient unit as one
// pipeline"), fwd+bwd kernels two rounds, default / chain: Mixtral-8x22B 30.5, 31.9 / 31.1, 31.9 ms; Qwen3-235B
// 14.0, 14.0 / 13.9, 14.2; DeepSeek-V3 8192 30.6, 29.5 / 31.8, 32.0.
#define HPMOE_WGRAD_CHAIN 0
#endif
#ifndef HPMOE_WGRAD_CHAIN_TMA_STORE
// With HPMOE_WGRAD_CHAIN (block_gemm_chain.cuh), how its tiles leave. 0 (the chain's default): the block's own
// 16-byte stores, spread over the next tile's first K steps and issued between its wgmmas, from rows staged as
// the default tile stages them. 1: 8 TMA tensor stores of swizzled boxes per whole tile (the copy engine; needs
// the output's map, which only this setting binds). One H200, Mixtral-8x22B at 4096 tokens, fwd+bwd kernels:
// 31.1 / 31.9 ms with thread stores, 37.8 with TMA stores, 30.5 / 31.9 the default build (docs/cuda.md).
#define HPMOE_WGRAD_CHAIN_TMA_STORE 0
#endif
#if HPMOE_WGRAD_CHAIN && (!HPMOE_GEMM_TMA || HPMOE_GEMM_WS || HPMOE_GEMM_ASYNC_EPILOGUE)
#error "the chained weight gradient is a variant of the 256-thread TMA tile with the block's own epilogue"
#endif
#ifndef HPMOE_WGRAD_PINGPONG
// 1: a weight-gradient unit written in the model dtype, with at most HPMOE_PP_MAX_STEPS K steps a tile, runs as
// a ping-pong of 128 x 128 tiles, one warpgroup's K loop under the other's stores (block_gemm_pingpong.cuh);
// 0 (the default): the default tile, both warpgroups on one 128 x 256 tile, the block storing each epilogue
// itself. Bitwise the same. One H200 (docs/cuda.md, "The ping-pong weight-gradient unit"): the unit alone,
// one an SM, 15-18% faster at Qwen3-235B-A22B's widths; in the op, fwd+bwd kernels Qwen3-235B 13.31/12.75 ms
// against 13.26/12.94, four small-expert shapes 1-3% slower (its K steps ran 2.5x longer in the op than alone).
#define HPMOE_WGRAD_PINGPONG 0
#endif
#if HPMOE_WGRAD_PINGPONG && (!HPMOE_GEMM_TMA || HPMOE_GEMM_WS || HPMOE_GEMM_ASYNC_EPILOGUE || HPMOE_WGRAD_CHAIN)
#error "the ping-pong weight gradient is a variant of the 256-thread TMA tile with the block's own epilogue"
#endif
#ifndef HPMOE_DW_EVICT_FIRST
// Weight-gradient rows sent by the copy engine (the asynchronous epilogue, HPMOE_WGRAD_STORE_BY_COPIES) are
// written as L2 evict-first (no effect measured with the asynchronous epilogue).
#define HPMOE_DW_EVICT_FIRST 1
#endif
#ifndef HPMOE_EXPERIMENT_DW
// Timing-only builds of the weight-gradient tile (wrong results by design; docs/cuda.md, "What the backward
// waits on"): 1 no epilogue, 2 no operand feed after the first stages, 3 no wgmma,
// 4 one X^T slab per expert for every unit, 5 one dY column slab for every tile, 6 the ping-pong's K tails not
// zeroed (session 23: units 198k -> 165k cycles in the op, which found ZeroKLines' divisions).
#define HPMOE_EXPERIMENT_DW 0
#endif
#ifndef HPMOE_EXPERIMENT_SKIP
// Timing-only builds (wrong results by design): the task types in this mask return at once, so a
// profile of the rest attributes DRAM bytes and time per phase (docs/cuda.md, "Per phase and per tile"):
// 1 GMM (and GMM_SWIGLU), 2 GMM_TRANS_B (and GMM_SWIGLU_GRAD), 4 GMM_WEIGHT_GRAD, 8 SWIGLU, 16 SWIGLU_GRAD.
#define HPMOE_EXPERIMENT_SKIP 0
#endif
#ifndef HPMOE_EXPERIMENT_HALF_B
// Timing-only builds (wrong results by design; docs/cuda.md, "2-CTA clusters"): each block loads the
// half of a B tile that a 2-CTA multicast would leave it: 1 MN-major B, 2 K-major B too.
#define HPMOE_EXPERIMENT_HALF_B 0
#endif
#ifndef HPMOE_GEMM_PAIRS
// 1: the persistent kernel runs in 2-block clusters and the two blocks of a cluster take pool units in rounds;
// two GMM units on the same B run as one paired tile, B multicast (cluster_pairing.cuh, block_gemm_paired.cuh).
// Bitwise the default's outputs (tests/cuda/test_cuda_first_gmm_pool.py, 66 cases, EP 1-3); fwd+bwd kernels on
// par so far (session 13: Mixtral-8x22B 31.65 / 31.70 ms, Mixtral-8x7B 17.34 / 17.46, DBRX 39.77 / 38.51);
// 0 (the default): every block claims alone.
#define HPMOE_GEMM_PAIRS 0
#endif
#if HPMOE_GEMM_PAIRS && HPMOE_GEMM_WS
#error "paired pool units run on the 256-thread tile only (session 26 measured them on HPMOE_GEMM_WS=2: slower)"
#endif
#ifndef HPMOE_CLUSTER_WORKER
// 1: each worker (SSC queue) is a 2-block cluster (cluster_worker.cuh; docs/cuda.md, "A worker that is a
// 2-block cluster"): both blocks run the queue, block 0 waits, claims and signals for the worker, and each
// handler splits its task between the two (GMM row tiles in pairs with B multicast). The SSC is compiled for
// half as many workers at twice the row tile (the PyTorch op asks the library, hpmoe_cuda_blocks_per_worker).
// 0 (the default): one block per worker.
#define HPMOE_CLUSTER_WORKER 0
#endif
#ifndef HPMOE_CLUSTER_NO_MULTICAST
#define HPMOE_CLUSTER_NO_MULTICAST 0  // diagnostic: the cluster worker's row-tile pairs without multicast
#endif
#ifndef HPMOE_WGRAD_STORE_BY_COPIES
// 1: a weight-gradient tile's staged rows leave by the copy engine (one bulk copy a row; each tile waits until the
// copies have read shared memory, the task for the writes at its end: BlockGemmTma::StoreStagedByCopies) instead
// of 16-byte stores from registers. Both waits follow the write path's drain: 9.6k cycles a tile at Qwen3-235B-
// A22B against the default loop's 3.0k, fwd+bwd kernels 1-17% slower in the default build (session 32). In the
// cluster worker they were 3-5% faster than its inlined loop, which spilled (session 32), and 3-11% slower than
// that loop as a call of its own (HPMOE_WGRAD_STORE_OUT_OF_LINE, session 33): no build's default.
#define HPMOE_WGRAD_STORE_BY_COPIES 0
#endif
#if HPMOE_WGRAD_STORE_BY_COPIES && (!HPMOE_GEMM_TMA || HPMOE_GEMM_WS)
#error "the weight gradient's stores by the copy engine are a variant of the 256-thread TMA tile"
#endif
#ifndef HPMOE_WGRAD_STORE_OUT_OF_LINE
// 1: the weight gradient's staged store loop is a call of its own (__noinline__, one vector a thread in flight),
// so that it gets registers of its own. In the cluster worker's kernel the inlined loop spilled (8, 4 or 2
// vectors a thread), and a local reload waits behind the tile's stores for the write path to drain (session 32);
// as a call neither the loop nor the callee spills, and the whole kernel's stack falls 792 -> 440 bytes.
// Bitwise (digests). The default of the 256-thread TMA tile (session 33): in the cluster worker its weight-
// gradient store phase 9.9k -> 2.9k cycles a tile at Qwen3-235B-A22B, fwd+bwd kernels 3-11% faster than by
// copies; in the one-block worker (no spills there before) fwd+bwd kernels 1.7% faster on average over 15
// shape-rounds on three boards (a round from 6% faster to 3% slower; Qwen3-235B-A22B 0.4%, the Mixtrals 2.2-2.4%),
// on par in the loop (benchmarks/RESULTS.md, session 33).
#define HPMOE_WGRAD_STORE_OUT_OF_LINE (HPMOE_GEMM_TMA && !HPMOE_GEMM_WS && !HPMOE_WGRAD_STORE_BY_COPIES)
#endif
#if HPMOE_WGRAD_STORE_OUT_OF_LINE && HPMOE_WGRAD_STORE_BY_COPIES
#error "HPMOE_WGRAD_STORE_OUT_OF_LINE replaces the copy engine's rows: build it with HPMOE_WGRAD_STORE_BY_COPIES=0"
#endif
#ifndef HPMOE_WGRAD_STORE_OUT_OF_LINE_BATCH
#define HPMOE_WGRAD_STORE_OUT_OF_LINE_BATCH 1  // vectors a thread holds between loads and stores there
#endif
#if HPMOE_CLUSTER_WORKER && (HPMOE_GEMM_PAIRS || HPMOE_GEMM_WS || !HPMOE_GEMM_TMA || HPMOE_WGRAD_CHAIN || \
                             HPMOE_WGRAD_PINGPONG || HPMOE_GEMM_ASYNC_EPILOGUE)
#error "the cluster worker is a variant of the default 256-thread TMA tile (no pairs, roles, chain, ping-pong)"
#endif
// HPMOE_EXPERIMENT_PROFILE=1: per-phase cycles of the GMM tiles, printed per launch (tile_profile.cuh).

namespace hpmoe {
namespace cuda {

constexpr uint32_t kThreads = HPMOE_GEMM_WS ? 384 : 256;  // threads per worker block (both roles)
constexpr uint32_t kBlocksPerWorker = HPMOE_CLUSTER_WORKER ? 2 : 1;  // blocks that run one SSC queue

}  // namespace cuda
}  // namespace hpmoe
