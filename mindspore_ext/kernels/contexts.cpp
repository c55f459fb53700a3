#include "contexts.h"

#include <cstring>
#include <map>
#include <mutex>

namespace hpmoe {
namespace ms {
namespace {

Context g_contexts[kMaxContexts];
std::map<const void*, int32_t> g_owner;  // heap segment -> context whose saved state it holds
std::mutex g_mutex;

// What backward reads from the forward (docs/design.md, "What forward saves for backward"); the routing plan
// is re-written from the host's arrays and the weights / topk_weights come in as backward inputs.
constexpr uint32_t kSaved[] = {ssc::kSlotRecvCounts, ssc::kSlotRecvX, ssc::kSlotH, ssc::kSlotA, ssc::kSlotRetY};
constexpr uint32_t kPlan[] = {ssc::kSlotTopkIds, ssc::kSlotSendRows, ssc::kSlotSendCounts, ssc::kSlotTokenRows};

void Stash(Context& c) {
  size_t total = 0;
  for (uint32_t s : kSaved) total += c.bytes[s];
  c.stash.resize(total);
  size_t at = 0;
  for (uint32_t s : kSaved) {
    std::memcpy(c.stash.data() + at, c.segment + c.offset[s], c.bytes[s]);
    at += c.bytes[s];
  }
}

void Restore(Context& c) {
  size_t at = 0;
  for (uint32_t s : kSaved) {
    std::memcpy(c.segment + c.offset[s], c.stash.data() + at, c.bytes[s]);
    at += c.bytes[s];
  }
  WritePlan(c);
}

}  // namespace

Context* At(int32_t id) { return id >= 0 && id < kMaxContexts ? &g_contexts[id] : nullptr; }

Context* Lookup(int32_t id, std::string* error) {
  Context* c = At(id);
  if (c == nullptr || !c->bound) {
    *error = "context " + std::to_string(id) + " is not bound (the routing plan did not run first)";
    return nullptr;
  }
  return c;
}

void WritePlan(Context& c) {
  for (int i = 0; i < 4; ++i) std::memcpy(c.segment + c.offset[kPlan[i]], c.plan[i], c.bytes[kPlan[i]]);
}

void TakeHeap(int32_t id, bool restore) {
  std::lock_guard<std::mutex> lock(g_mutex);
  Context& c = g_contexts[id];
  auto it = g_owner.find(c.segment);
  const int32_t owner = it == g_owner.end() ? -1 : it->second;
  if (owner == id) return;
  if (owner >= 0) {
    Context& o = g_contexts[owner];
    if (o.pending() && o.segment == c.segment) Stash(o);
  }
  if (restore) Restore(c);
  g_owner[c.segment] = id;
}

int PendingOn(const void* segment) {
  std::lock_guard<std::mutex> lock(g_mutex);
  int n = 0;
  for (const Context& c : g_contexts)
    if (c.bound && c.segment == segment && c.pending()) ++n;
  return n;
}

void ResetHeap(const void* segment) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_owner.erase(segment);
}

}  // namespace ms
}  // namespace hpmoe
