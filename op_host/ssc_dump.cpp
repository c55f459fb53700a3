// hpmoe_ssc_dump FILE: prints the SSC as JSON (the same document as `hpmoe inspect --json`).
// Exit 0 on success, 2 with a one-line error on stderr otherwise.
#include <cstdio>
#include <string>

#include "ssc_file.h"

int main(int argc, char** argv) {
  if (argc != 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "usage: hpmoe_ssc_dump FILE.ssc\nPrints an SSC file as JSON after checking it.\n");
    return argc == 2 ? 0 : 2;
  }
  hpmoe::ssc::AlignedBytes bytes;
  hpmoe::ssc::SscView view;
  const std::string error = hpmoe::ssc::LoadSscFile(argv[1], &bytes, &view);
  if (!error.empty()) {
    std::fprintf(stderr, "hpmoe_ssc_dump: error: %s\n", error.c_str());
    return 2;
  }
  std::printf("%s\n", hpmoe::ssc::SscToJson(view).c_str());
  return 0;
}
