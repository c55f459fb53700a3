// The C++ reader against the golden SSC files the Python writer produced (tests/golden), and against
// damaged copies of them: every damage must give a one-line error, never a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ssc_file.h"
#include "ssc_loader.h"

using namespace hpmoe::ssc;

namespace {

const std::string kGolden = HPMOE_GOLDEN_DIR;

struct Loaded {
  AlignedBytes bytes;
  SscView view;
  std::string error;
};

void Load(const std::string& name, Loaded* out) { out->error = LoadSscFile(kGolden + "/" + name, &out->bytes, &out->view); }

// Re-parses a modified copy; `fix_checksum` recomputes the CRC so deeper checks are reached.
std::string ParseModified(const Loaded& src, bool fix_checksum, void (*mutate)(uint8_t*, size_t), size_t size = 0) {
  AlignedBytes copy;
  const size_t n = size ? size : src.bytes.size;
  copy.Allocate(n);
  std::memcpy(copy.data, src.bytes.data, n < src.bytes.size ? n : src.bytes.size);
  if (mutate) mutate(copy.data, n);
  if (fix_checksum) {
    SscHeader* h = reinterpret_cast<SscHeader*>(copy.data);
    h->checksum = Crc32(copy.data, n, offsetof(SscHeader, checksum));
  }
  SscView view;
  return ParseSsc(copy.data, n, &view);
}

}  // namespace

TEST(SscReader, ParsesGoldenForwardAndBackward) {
  for (const char* name : {"small_ep2_rank0.fwd.ssc", "small_ep2_rank1.bwd.ssc", "small_ep3_rank2.fwd.ssc",
                           "small_ep2_rank1_mixed_queues.bwd.ssc", "small_ep2_rank0_claim_pool.bwd.ssc"}) {
    Loaded l;
    Load(name, &l);
    ASSERT_EQ(l.error, "") << name;
    EXPECT_EQ(l.view.header->magic, kMagic);
    EXPECT_GT(l.view.num_tasks, 0u) << name;
    const uint32_t workers = l.view.config().num_aic + l.view.config().num_aiv;
    if (l.view.config().flags & kConfigClaimPool) {
      EXPECT_GE(l.view.num_queues, workers) << name;  // then pool queues
    } else {
      EXPECT_EQ(l.view.num_queues, workers) << name;
    }
    uint32_t queued = 0;
    for (uint32_t q = 0; q < l.view.num_queues; ++q) queued += l.view.queues[q].count;
    EXPECT_EQ(queued, l.view.num_tasks) << name << ": every task sits in exactly one queue";
  }
}

TEST(SscReader, GoldenConfigMatchesWhatPythonWrote) {
  Loaded l;
  Load("small_ep3_rank2.fwd.ssc", &l);
  ASSERT_EQ(l.error, "");
  EXPECT_EQ(l.view.header->rank, 2u);
  EXPECT_EQ(l.view.header->direction, uint32_t(kForward));
  SscConfig expected = l.view.config();
  EXPECT_EQ(expected.ep, 3u);
  EXPECT_EQ(CheckConfig(l.view, expected), "");
  expected.hidden += 1;
  EXPECT_NE(CheckConfig(l.view, expected).find("hidden"), std::string::npos);
}

TEST(SscReader, RejectsTruncation) {
  Loaded l;
  Load("small_ep2_rank0.fwd.ssc", &l);
  ASSERT_EQ(l.error, "");
  EXPECT_NE(ParseModified(l, false, nullptr, 100).find("truncated"), std::string::npos);
  EXPECT_NE(ParseModified(l, false, nullptr, l.bytes.size - 16).find("truncated"), std::string::npos);
}

TEST(SscReader, RejectsCorruptionByChecksum) {
  Loaded l;
  Load("small_ep2_rank0.fwd.ssc", &l);
  ASSERT_EQ(l.error, "");
  auto flip = [](uint8_t* d, size_t n) { d[n / 2] ^= 0x40; };
  EXPECT_NE(ParseModified(l, false, flip).find("checksum"), std::string::npos);
}

TEST(SscReader, RejectsWrongMagicAndVersion) {
  Loaded l;
  Load("small_ep2_rank0.fwd.ssc", &l);
  ASSERT_EQ(l.error, "");
  auto magic = [](uint8_t* d, size_t) { d[0] = 'X'; };
  EXPECT_NE(ParseModified(l, true, magic).find("not an SSC"), std::string::npos);
  auto version = [](uint8_t* d, size_t) { reinterpret_cast<SscHeader*>(d)->version_major = kVersionMajor + 1; };
  EXPECT_NE(ParseModified(l, true, version).find("version"), std::string::npos);
}

TEST(SscReader, RejectsBadIndicesBehindAValidChecksum) {
  Loaded l;
  Load("small_ep2_rank0.fwd.ssc", &l);
  ASSERT_EQ(l.error, "");
  auto bad_event = [](uint8_t* d, size_t) {
    SscHeader* h = reinterpret_cast<SscHeader*>(d);
    SscTask* tasks = reinterpret_cast<SscTask*>(d + h->sections[kSecTasks].offset);
    tasks[0].dependent_event[0] = h->sections[kSecEvents].count + 5;
  };
  EXPECT_NE(ParseModified(l, true, bad_event).find("waits on event"), std::string::npos);
  auto bad_region = [](uint8_t* d, size_t) {
    SscHeader* h = reinterpret_cast<SscHeader*>(d);
    SscTask* tasks = reinterpret_cast<SscTask*>(d + h->sections[kSecTasks].offset);
    tasks[h->sections[kSecTasks].count - 1].outputs[0].rows = 1u << 30;
  };
  EXPECT_NE(ParseModified(l, true, bad_region).find("exceeds"), std::string::npos);
  auto bad_queue = [](uint8_t* d, size_t) {
    SscHeader* h = reinterpret_cast<SscHeader*>(d);
    uint32_t* entries = reinterpret_cast<uint32_t*>(d + h->sections[kSecQueueEntries].offset);
    entries[0] = 0xFFFFFFF0u;
  };
  EXPECT_NE(ParseModified(l, true, bad_queue).find("entry"), std::string::npos);
  auto bad_section = [](uint8_t* d, size_t) {
    reinterpret_cast<SscHeader*>(d)->sections[kSecTasks].count = 0x7FFFFFFF;
  };
  EXPECT_NE(ParseModified(l, true, bad_section).find("outside the file"), std::string::npos);
}

// Who claims pool units is derived from the flags, here as in MoeConfig.pool_claimers (the Python validator's
// deadlock model): the cube-queue workers, and with mixed queues (no row pipelines) every worker. The golden
// config has 2 + 4 workers.
TEST(SscLoader, PoolClaimersFollowTheFlagsAsInPython) {
  const std::pair<const char*, uint32_t> cases[] = {{"small_ep2_rank0_claim_pool.bwd.ssc", 2u},
                                                    {"small_ep2_rank0_mixed_queues_claim_pool.bwd.ssc", 6u}};
  for (const auto& [name, claimers] : cases) {
    Loaded file;
    Load(name, &file);
    ASSERT_EQ(file.error, "") << name;
    LoadExpect expect;
    expect.from_file = true;
    LoadedSsc loaded;
    ASSERT_EQ(LoadSsc(file.bytes.data, file.bytes.size, expect, &loaded), "") << name;
    EXPECT_NE(loaded.program.pool, nullptr) << name;
    EXPECT_GT(loaded.program.num_pool, 0u) << name;
    EXPECT_EQ(loaded.program.claimers, claimers) << name;
  }
}
