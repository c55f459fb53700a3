// Structure-aware mutations for the executing libFuzzer target: most SSC bytes sit behind a CRC, so a
// byte-level mutation almost never reaches the record checks. Half the time this rewrites one field of one
// record (task, event, queue, queue entry or tensor) with a boundary value, a nearby value or the same field
// of another record, or a task region's slot with another slot id; otherwise it lets libFuzzer mutate the
// bytes. Either way each file's CRC is re-stamped.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>

#include "fuzz_group.h"
#include "ssc_reader.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using hpmoe::ssc::SscHeader;

void Restamp(uint8_t* data, size_t size) {
  for (const hpmoe::fuzz::FileSpan& f : hpmoe::fuzz::SplitFiles(data, size)) {
    if (f.size < sizeof(SscHeader)) continue;
    uint8_t* file = const_cast<uint8_t*>(f.data);
    const uint32_t crc = hpmoe::ssc::Crc32(file, f.size, offsetof(SscHeader, checksum));
    std::memcpy(file + offsetof(SscHeader, checksum), &crc, 4);
  }
}

uint32_t PickValue(std::mt19937& rng, uint32_t old, uint32_t other) {
  static const uint32_t kBoundary[] = {0u, 1u, 2u, 0xFFFFu, 0xFFFFFFFFu, 0x80000000u, 0x7FFFFFFFu};
  switch (rng() % 6) {
    case 0: return kBoundary[rng() % (sizeof(kBoundary) / sizeof(kBoundary[0]))];
    case 1: return rng() % 32;  // slots, task types, small indices
    case 2: return old + 1;
    case 3: return old - 1;
    case 4: return other;       // the same field of another record
    default: return rng();
  }
}

// One field of one record of one file, as a 4-byte word (or, for tensor-ref words, a 2-byte half).
bool MutateField(uint8_t* data, size_t size, std::mt19937& rng) {
  const auto files = hpmoe::fuzz::SplitFiles(data, size);
  const hpmoe::fuzz::FileSpan& f = files[rng() % files.size()];
  if (f.size < sizeof(SscHeader)) return false;
  SscHeader h;
  std::memcpy(&h, f.data, sizeof h);
  static const uint32_t kSections[] = {hpmoe::ssc::kSecTasks, hpmoe::ssc::kSecTasks, hpmoe::ssc::kSecTasks,
                                       hpmoe::ssc::kSecEvents, hpmoe::ssc::kSecQueues, hpmoe::ssc::kSecQueueEntries,
                                       hpmoe::ssc::kSecTensors};
  const hpmoe::ssc::SscSection& sec = h.sections[kSections[rng() % 7]];
  if (sec.count == 0 || sec.record_bytes < 4 || sec.record_bytes % 4 ||
      uint64_t(sec.offset) + uint64_t(sec.count) * sec.record_bytes > f.size)
    return false;
  uint8_t* base = const_cast<uint8_t*>(f.data) + sec.offset;
  const uint32_t words = sec.record_bytes / 4;
  const uint32_t rec = rng() % sec.count, other = rng() % sec.count, word = rng() % words;
  uint8_t* at = base + uint64_t(rec) * sec.record_bytes + word * 4;
  const uint8_t* from = base + uint64_t(other) * sec.record_bytes + word * 4;
  static const bool slots_only = std::getenv("HPMOE_FUZZ_SLOTS_ONLY") != nullptr;  // focus (docs/reliability.md)
  const bool tasks = &sec == &h.sections[hpmoe::ssc::kSecTasks];
  if (slots_only && !tasks) return false;
  if (tasks && (slots_only || rng() % 3 == 0)) {
    // The fields a wrong value hurts most: which tensor slot a region names (any slot id, or unused).
    const uint32_t ref = rng() % (hpmoe::ssc::kMaxInputs + hpmoe::ssc::kMaxOutputs);
    uint8_t* slot = base + uint64_t(rec) * sec.record_bytes + offsetof(hpmoe::ssc::SscTask, inputs) +
                    ref * sizeof(hpmoe::ssc::SscTensorRef);
    const uint16_t value = rng() % 8 == 0 ? uint16_t(hpmoe::ssc::kNoSlot) : uint16_t(rng() % hpmoe::ssc::kSlotCount);
    std::memcpy(slot, &value, 2);
    return true;
  }
  uint32_t old, same;
  std::memcpy(&old, at, 4);
  std::memcpy(&same, from, 4);
  if (rng() % 3 == 0) {  // a 16-bit half (tensor-ref slot or flags)
    const uint32_t half = (rng() & 1) * 16;
    const uint32_t v = PickValue(rng, (old >> half) & 0xFFFF, (same >> half) & 0xFFFF) & 0xFFFF;
    old = (old & ~(0xFFFFu << half)) | (v << half);
  } else {
    old = PickValue(rng, old, same);
  }
  std::memcpy(at, &old, 4);
  return true;
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::mt19937 rng(seed);
  static const bool slots_only = std::getenv("HPMOE_FUZZ_SLOTS_ONLY") != nullptr;
  if (slots_only) {  // only region slots of task records: retry until a task record was picked
    for (int tries = 0; tries < 64 && size != 0; ++tries)
      if (MutateField(data, size, rng)) break;
  } else if (size == 0 || rng() % 2 == 0 || !MutateField(data, size, rng)) {
    size = LLVMFuzzerMutate(data, size, max_size);
  }
  Restamp(data, size);
  return size;
}
