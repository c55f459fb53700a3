#include "shm_heap.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "../../op_kernel/cpu/heap_layout.h"

namespace hpmoe {
namespace cpu {
namespace {

std::string Shm(const std::string& name) { return name.empty() || name[0] != '/' ? "/" + name : name; }

void* MapFd(int fd, uint64_t bytes, std::string* error, const std::string& what) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    *error = what + ": mmap of " + std::to_string(bytes) + " bytes failed: " + std::strerror(errno);
    return nullptr;
  }
  return p;
}

}  // namespace

void* ShmCreate(const std::string& name, uint64_t bytes, std::string* error) {
  const std::string path = Shm(name);
  const int fd = shm_open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    *error = "shm_open(" + path + ") failed: " + std::strerror(errno);
    return nullptr;
  }
  if (ftruncate(fd, off_t(bytes)) != 0) {
    *error = "ftruncate(" + path + ") failed: " + std::strerror(errno);
    close(fd);
    shm_unlink(path.c_str());
    return nullptr;
  }
  return MapFd(fd, bytes, error, path);
}

void* ShmAttach(const std::string& name, uint64_t bytes, std::string* error) {
  const std::string path = Shm(name);
  const int fd = shm_open(path.c_str(), O_RDWR, 0600);
  if (fd < 0) {
    *error = "shm_open(" + path + ") failed: " + std::strerror(errno);
    return nullptr;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || uint64_t(st.st_size) != bytes) {
    *error = path + " holds " + std::to_string(uint64_t(st.st_size)) + " bytes, expected " + std::to_string(bytes);
    close(fd);
    return nullptr;
  }
  return MapFd(fd, bytes, error, path);
}

void* AnonymousCreate(uint64_t bytes, std::string* error) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    *error = "mmap of " + std::to_string(bytes) + " bytes failed: " + std::strerror(errno);
    return nullptr;
  }
  return p;
}

void Unmap(void* base, uint64_t bytes) {
  if (base != nullptr) munmap(base, bytes);
}

bool ShmUnlink(const std::string& name) { return shm_unlink(Shm(name).c_str()) == 0; }

void InitGroupHeap(void* base, uint32_t ep, uint64_t segment_bytes) {
  for (uint32_t r = 0; r < ep; ++r) {
    ControlBlock* cb = reinterpret_cast<ControlBlock*>(static_cast<uint8_t*>(base) + uint64_t(r) * segment_bytes);
    cb->ep = ep;
    cb->segment_bytes = segment_bytes;
    __atomic_store_n(&cb->magic, kControlMagic, __ATOMIC_RELEASE);
  }
}

void AbortGroup(void* base, uint32_t ep, uint64_t segment_bytes, uint32_t rank) {
  for (uint32_t r = 0; r < ep; ++r) {
    ControlBlock* cb = reinterpret_cast<ControlBlock*>(static_cast<uint8_t*>(base) + uint64_t(r) * segment_bytes);
    uint32_t expected = 0;
    __atomic_compare_exchange_n(&cb->abort_rank_plus1, &expected, rank + 1, false, __ATOMIC_RELEASE,
                                __ATOMIC_RELAXED);
  }
}

}  // namespace cpu
}  // namespace hpmoe
