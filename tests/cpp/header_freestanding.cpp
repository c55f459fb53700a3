// Compiled with -ffreestanding -fno-exceptions -fno-rtti (see CMakeLists.txt): the SSC layout header must
// stay usable as device code (AscendC, CUDA), so it may need nothing from a hosted C++ library.
#include "../../op_kernel/ssc_layout.h"

extern "C" unsigned hpmoe_freestanding_probe(const hpmoe::ssc::SscTask* task) {
  return task->task_type + static_cast<unsigned>(sizeof(hpmoe::ssc::SscHeader));
}
