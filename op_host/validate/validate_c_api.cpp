// C ABI of the load-time validator for tools (`hpmoe verify`) and launchers that hold a whole group's files
// (the CPU twin's Python launcher): scheduler/hpmoe/runtime/native.py binds it with ctypes.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../ssc_loader.h"
#include "../one_line.h"

extern "C" {

// Validates `n` SSC files of one direction as one loader would: each on its own (ssc::LoadSsc, rank and
// direction from its header), and, when they are every rank of one EP group, together (ssc::ValidateGroup).
// Returns 0 when valid (*whole_group says which scope ran), 1 with one line in `err` otherwise.
int hpmoe_ssc_validate(const uint8_t* const* files, const uint64_t* sizes, uint32_t n, uint32_t* whole_group,
                       char* err, int errlen) {
  using namespace hpmoe::ssc;
  *whole_group = 0;
  if (n == 0) {
    hpmoe::CopyMessage(err, errlen, "no SSC files given");
    return 1;
  }
  std::vector<std::unique_ptr<LoadedSsc>> loaded(n);
  for (uint32_t i = 0; i < n; ++i) {
    loaded[i].reset(new LoadedSsc());
    LoadExpect expect;
    expect.from_file = true;
    const std::string e = LoadSsc(files[i], size_t(sizes[i]), expect, loaded[i].get());
    if (!e.empty()) {
      hpmoe::CopyMessage(err, errlen, e);
      return 1;
    }
  }
  const SscConfig& cfg = loaded[0]->view.config();
  // Sized by the files given, never by the file's ep (a hostile header could claim 2^30 ranks).
  std::vector<const LoadedSsc*> by_rank(n, nullptr);
  std::vector<uint32_t> ranks;
  for (uint32_t i = 0; i < n; ++i) ranks.push_back(loaded[i]->view.header->rank);
  std::sort(ranks.begin(), ranks.end());
  for (uint32_t i = 0; i < n; ++i) {
    const SscView& v = loaded[i]->view;
    std::string e = CheckConfig(v, cfg);
    if (e.empty() && v.header->direction != loaded[0]->view.header->direction) e = "the direction differs";
    const std::string rank = "rank " + std::to_string(v.header->rank) + " SSC: ";
    if (!e.empty()) {
      hpmoe::CopyMessage(err, errlen, rank + "config or direction differs from the first file's (" + e +
                                "); a group must come from one compile");
      return 1;
    }
    if (std::count(ranks.begin(), ranks.end(), v.header->rank) > 1) {
      hpmoe::CopyMessage(err, errlen, rank + "given twice");
      return 1;
    }
    if (n == cfg.ep) by_rank[v.header->rank] = loaded[i].get();  // ranks distinct and < ep: a permutation
  }
  if (n != cfg.ep) return 0;
  const std::string e = ValidateGroup(by_rank.data(), n);
  if (!e.empty()) {
    hpmoe::CopyMessage(err, errlen, e);
    return 1;
  }
  *whole_group = 1;
  return 0;
}

}  // extern "C"
