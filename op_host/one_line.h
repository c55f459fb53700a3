// printf-style formatting for the one-line messages every host-side refusal and fault report is made of.
#pragma once

#include <cstdio>
#include <string>

namespace hpmoe {

template <typename... Args>
std::string Format(const char* fmt, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

}  // namespace hpmoe
