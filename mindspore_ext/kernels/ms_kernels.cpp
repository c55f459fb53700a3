// MindSpore aot CPU kernels of hpmoe.mindspore.HyperParallelMoEFFN (ops.Custom("<lib>:<fn>", func_type="aot")).
// They move tensors between MindSpore's buffers and one rank's segment of the CPU twin's symmetric heap and
// launch the twin through its C ABI (op_host/cpu/c_api.h). The routing plan, the bucket choice and the heap
// itself are set up on the host side (mindspore_ext/host_state.py, kernel_library.py) and bound here by context
// id, one context per layer (contexts.h: layers share a heap; saved state is stashed only when they must).
//
// MindSpore's aot signature: params = inputs then outputs; shapes/ndims/dtypes per param; return 0 = success.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../../op_host/cpu/c_api.h"
#include "../../op_kernel/cpu/dtype.h"
#include "../../op_kernel/ssc_layout.h"
#include "contexts.h"

namespace {

using hpmoe::ms::Context;
using hpmoe::ssc::DType;

// One line on stderr (MindSpore reports only that the kernel failed) and the failure code.
int Fail(const std::string& msg) {
  std::fprintf(stderr, "hpmoe mindspore kernel: %s\n", msg.c_str());
  std::fflush(stderr);
  return 1;
}

int DTypeOf(const char* name) {
  const std::string s(name);
  if (s == "float32") return hpmoe::ssc::kFP32;
  if (s == "float16") return hpmoe::ssc::kFP16;
  if (s == "bfloat16") return hpmoe::ssc::kBF16;
  if (s == "int32") return hpmoe::ssc::kINT32;
  return -1;
}

std::string ShapeStr(int nd, const int64_t* s) {
  std::string out = "[";
  for (int i = 0; i < nd; ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Checks param i against the expected shape and dtype; returns "" or the problem.
std::string Expect(int i, const char* what, int* ndims, int64_t** shapes, const char** dtypes,
                   std::vector<int64_t> shape, int dtype) {
  bool ok = ndims[i] == int(shape.size());
  for (size_t d = 0; ok && d < shape.size(); ++d) ok = shapes[i][d] == shape[d];
  if (!ok)
    return std::string(what) + " has shape " + ShapeStr(ndims[i], shapes[i]) + ", the bound bucket expects " +
           ShapeStr(int(shape.size()), shape.data());
  if (dtype >= 0 && DTypeOf(dtypes[i]) != dtype)
    return std::string(what) + " has dtype " + dtypes[i] + ", the bound bucket expects dtype code " +
           std::to_string(dtype);
  return "";
}

void* Slot(Context& c, uint32_t slot) { return c.segment + c.offset[slot]; }

// n values of `from` dtype (fp32/fp16/bf16) into `to` dtype, through fp32 with round-to-nearest-even.
void Convert(const void* src, int from, void* dst, int to, size_t n) {
  if (from == to) {
    std::memcpy(dst, src, n * hpmoe::cpu::DTypeBytes(uint32_t(from)));
    return;
  }
  std::vector<float> tmp(n);
  hpmoe::cpu::LoadF32(src, uint32_t(from), n, tmp.data());
  hpmoe::cpu::StoreF32(tmp.data(), uint32_t(to), n, dst);
}

Context* LookupParam(void* param, int32_t* id, std::string* err) {
  *id = *static_cast<const int32_t*>(param);
  return hpmoe::ms::Lookup(*id, err);
}

// $HPMOE_MS_PROFILE=1: time spent in the twin's launches and in whole kernels, printed at exit (step-time
// breakdown of examples/train_compare.py; the rest of a step is MindSpore and the host steps).
struct Profile {
  double launch_s[2] = {0, 0}, kernel_s[2] = {0, 0};
  uint64_t calls[2] = {0, 0};
  bool on = std::getenv("HPMOE_MS_PROFILE") != nullptr;
  ~Profile() {
    if (on && (calls[0] || calls[1]))
      std::fprintf(stderr, "hpmoe mindspore kernel profile: fwd %llu calls, %.2f ms/call in kernel, %.2f in twin "
                   "launch; bwd %llu calls, %.2f ms/call in kernel, %.2f in twin launch\n",
                   (unsigned long long)calls[0], 1e3 * kernel_s[0] / double(calls[0] ? calls[0] : 1),
                   1e3 * launch_s[0] / double(calls[0] ? calls[0] : 1), (unsigned long long)calls[1],
                   1e3 * kernel_s[1] / double(calls[1] ? calls[1] : 1), 1e3 * launch_s[1] / double(calls[1] ? calls[1] : 1));
  }
} g_profile;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int Launch(Context& c, uint32_t direction) {
  char err[1024] = {0};
  void* ranks[1] = {c.rank};
  const double t0 = Now();
  if (c.run(ranks, 1, direction, 0, err, sizeof err) != 0) return Fail(err);
  g_profile.launch_s[direction] += Now() - t0;
  return 0;
}

// Adds a kernel's wall time to the profile when it returns.
struct KernelTimer {
  uint32_t direction;
  double t0 = Now();
  ~KernelTimer() {
    g_profile.kernel_s[direction] += Now() - t0;
    ++g_profile.calls[direction];
  }
};

}  // namespace

extern "C" {

// Host side (ctypes), before every forward: bind context `id` to the loaded rank and heap segment of its
// bucket and to this call's routing plan (host arrays the caller keeps alive until the backward ran).
// dims = T, h, I, E_local, k; plan = topk_ids, send_rows, send_counts, token_rows.
int hpmoe_ms_bind(int32_t id, void* rank, void* run_fn, void* segment, const uint64_t* slot_offsets,
                  const uint64_t* slot_bytes, uint32_t dtype, const int64_t* dims, const void* const* plan) {
  Context* c = hpmoe::ms::At(id);
  if (c == nullptr) return 1;
  c->backwards = c->forwards;  // a forward whose backward never ran (evaluation) leaves nothing pending
  c->bound = rank != nullptr;
  c->rank = rank;
  c->run = reinterpret_cast<hpmoe::ms::RunFn>(run_fn);
  c->segment = static_cast<uint8_t*>(segment);
  for (uint32_t s = 0; s < hpmoe::ssc::kSlotCount; ++s) {
    c->offset[s] = slot_offsets ? slot_offsets[s] : 0;
    c->bytes[s] = slot_bytes ? slot_bytes[s] : 0;
  }
  for (int i = 0; i < 4; ++i) c->plan[i] = plan ? plan[i] : nullptr;
  c->dtype = dtype;
  if (dims) c->tokens = dims[0], c->hidden = dims[1], c->inter = dims[2], c->experts = dims[3], c->topk = dims[4];
  return 0;
}

int hpmoe_ms_unbind(int32_t id) {
  Context* c = hpmoe::ms::At(id);
  if (c == nullptr) return 1;
  c->bound = false;
  c->forwards = c->backwards = 0;
  c->stash.clear();
  c->stash.shrink_to_fit();
  return 0;
}

int hpmoe_ms_pending_on(const void* segment) { return hpmoe::ms::PendingOn(segment); }
void hpmoe_ms_heap_reset(const void* segment) { hpmoe::ms::ResetHeap(segment); }
uint64_t hpmoe_ms_stash_bytes(int32_t id) {
  Context* c = hpmoe::ms::At(id);
  return c ? c->stash.capacity() : 0;
}

// Forward. Inputs: ctx [1] int32, x [T, h], topk_weights [T, k], w1 [E, h, 2I], w2 [E, I, h]; output y [T, h].
// topk_ids and the routing plan are already in the heap (the plan op ran first: ctx is its output).
int hpmoe_ms_forward(int nparam, void** params, int* ndims, int64_t** shapes, const char** dtypes, void*, void*) {
  if (nparam != 6) return Fail("forward expects 5 inputs and 1 output, got " + std::to_string(nparam) + " params");
  KernelTimer timer{0};
  std::string e;
  int32_t id = 0;
  Context* c = LookupParam(params[0], &id, &e);
  if (!c) return Fail(e);
  const int dt = int(c->dtype), wdt = DTypeOf(dtypes[2]);
  const int64_t T = c->tokens, h = c->hidden, I = c->inter, E = c->experts, k = c->topk;
  for (const std::string& m : {Expect(1, "x", ndims, shapes, dtypes, {T, h}, dt),
                               Expect(2, "topk_weights", ndims, shapes, dtypes, {T, k}, -1),
                               Expect(3, "w1", ndims, shapes, dtypes, {E, h, 2 * I}, dt),
                               Expect(4, "w2", ndims, shapes, dtypes, {E, I, h}, dt),
                               Expect(5, "y", ndims, shapes, dtypes, {T, h}, dt)})
    if (!m.empty()) return Fail(m);
  if (wdt != hpmoe::ssc::kFP32 && wdt != hpmoe::ssc::kFP16 && wdt != hpmoe::ssc::kBF16)
    return Fail(std::string("topk_weights has dtype ") + dtypes[2] + ", expected a float dtype");
  const size_t b = hpmoe::cpu::DTypeBytes(c->dtype);
  hpmoe::ms::TakeHeap(id, false);  // stashes another layer's saved state if its backward is pending
  hpmoe::ms::WritePlan(*c);
  std::memcpy(Slot(*c, hpmoe::ssc::kSlotX), params[1], size_t(T * h) * b);
  Convert(params[2], wdt, Slot(*c, hpmoe::ssc::kSlotTopkWeights), hpmoe::ssc::kFP32, size_t(T * k));
  std::memcpy(Slot(*c, hpmoe::ssc::kSlotW1), params[3], size_t(E * h * 2 * I) * b);
  std::memcpy(Slot(*c, hpmoe::ssc::kSlotW2), params[4], size_t(E * I * h) * b);
  if (Launch(*c, 0)) return 1;
  std::memcpy(params[5], Slot(*c, hpmoe::ssc::kSlotY), size_t(T * h) * b);
  ++c->forwards;
  return 0;
}

// Backward. Inputs: ctx [1] int32, y [T, h] (orders it after the forward), dy [T, h], topk_weights [T, k],
// w1, w2 (they give the gradients' shapes and dtypes; their values are in the heap since the forward).
// Outputs: dx [T, h], d topk_weights [T, k], dw1, dw2.
int hpmoe_ms_backward(int nparam, void** params, int* ndims, int64_t** shapes, const char** dtypes, void*, void*) {
  if (nparam != 10) return Fail("backward expects 6 inputs and 4 outputs, got " + std::to_string(nparam) + " params");
  KernelTimer timer{1};
  std::string e;
  int32_t id = 0;
  Context* c = LookupParam(params[0], &id, &e);
  if (!c) return Fail(e);
  if (!c->pending()) return Fail("backward without a forward on context " + std::to_string(id));
  const int dt = int(c->dtype), wdt = DTypeOf(dtypes[3]);
  const int64_t T = c->tokens, h = c->hidden, I = c->inter, E = c->experts, k = c->topk;
  for (const std::string& m : {Expect(2, "dy", ndims, shapes, dtypes, {T, h}, dt),
                               Expect(4, "w1", ndims, shapes, dtypes, {E, h, 2 * I}, dt),
                               Expect(5, "w2", ndims, shapes, dtypes, {E, I, h}, dt),
                               Expect(6, "dx", ndims, shapes, dtypes, {T, h}, dt),
                               Expect(7, "d topk_weights", ndims, shapes, dtypes, {T, k}, wdt),
                               Expect(8, "dw1", ndims, shapes, dtypes, {E, h, 2 * I}, dt),
                               Expect(9, "dw2", ndims, shapes, dtypes, {E, I, h}, dt)})
    if (!m.empty()) return Fail(m);
  const size_t b = hpmoe::cpu::DTypeBytes(c->dtype);
  hpmoe::ms::TakeHeap(id, true);  // restores this layer's saved state if another layer's forward ran since
  // Inputs another layer's forward may have overwritten: weights and routing weights (cheap, always copied).
  Convert(params[3], wdt, Slot(*c, hpmoe::ssc::kSlotTopkWeights), hpmoe::ssc::kFP32, size_t(T * k));
  std::memcpy(Slot(*c, hpmoe::ssc::kSlotW1), params[4], size_t(E * h * 2 * I) * b);
  std::memcpy(Slot(*c, hpmoe::ssc::kSlotW2), params[5], size_t(E * I * h) * b);
  std::memcpy(Slot(*c, hpmoe::ssc::kSlotDy), params[2], size_t(T * h) * b);
  if (Launch(*c, 1)) return 1;
  std::memcpy(params[6], Slot(*c, hpmoe::ssc::kSlotDx), size_t(T * h) * b);
  // Weight gradients and d topk_weights are accumulated and stored in fp32 by the twin.
  Convert(Slot(*c, hpmoe::ssc::kSlotDTopkWeights), hpmoe::ssc::kFP32, params[7], wdt, size_t(T * k));
  Convert(Slot(*c, hpmoe::ssc::kSlotDW1), hpmoe::ssc::kFP32, params[8], dt, size_t(E * h * 2 * I));
  Convert(Slot(*c, hpmoe::ssc::kSlotDW2), hpmoe::ssc::kFP32, params[9], dt, size_t(E * I * h));
  ++c->backwards;
  return 0;
}

}  // extern "C"
