// printf-style formatting for the one-line messages every host-side refusal and fault report is made of.
#pragma once

#include <cstdio>
#include <cstring>
#include <string>

namespace hpmoe {

template <typename... Args>
std::string Format(const char* fmt, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

// Copies a message into a C ABI caller's buffer of `errlen` bytes, truncated and always NUL-terminated.
inline void CopyMessage(char* err, int errlen, const std::string& msg) {
  if (err == nullptr || errlen <= 0) return;
  std::strncpy(err, msg.c_str(), size_t(errlen) - 1);
  err[errlen - 1] = '\0';
}

}  // namespace hpmoe
