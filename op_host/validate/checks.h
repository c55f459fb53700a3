// The load-time checks behind ssc::LoadSsc / ssc::ValidateGroup (op_host/ssc_loader.h), one concern per file.
// Each returns "" or one line naming the record, field and value; the loader prefixes rank and direction.
// Every check is one pass over its section(s), so validation is linear in the file size.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "../ssc_reader.h"
#include "../one_line.h"

namespace hpmoe {
namespace ssc {
namespace validate {

// Config values the shapes derive from: in range, divisible where tiles must divide, products within 32-bit
// row indices (check_config.cpp).
std::string CheckConfigRecord(const SscConfig& c);

// Tensor table: each slot once, every record equal to the shape, dtype, byte size and placement the config
// implies (op_kernel/runtime/slot_shapes.h), role and flags known (check_tensors.cpp).
std::string CheckTensorTable(const SscView& v);

// Tilings: task types known. Per task: enums and dims in range; every input/output slot allowed by the task type's access table
// (op_kernel/runtime/task_access.h); every region inside its tensor; ranks in the group, only puts write
// another rank, nobody reads one; the remote flag agrees with the rank; waits and local triggers name events
// of this file, remote triggers an event below `counter_capacity` (0: unknown) (check_tasks.cpp).
std::string CheckTaskRecords(const SscView& v, uint32_t rank, uint32_t counter_capacity);

// Queues: one per worker, AIC workers first; entries in range; each task in exactly one queue of its type;
// every entry in exactly one queue (check_queues.cpp).
std::string CheckQueueRecords(const SscView& v);

// Events of one rank's file alone: flags known, thresholds neither 0 nor 0xFFFFFFFF; a locally triggered
// event's threshold equals this file's triggers of it; a remote-triggered one lies above them by at most
// the puts the other ranks can send (check_events.cpp).
std::string CheckEventsAlone(const SscView& v, uint32_t rank);

}  // namespace validate
}  // namespace ssc
}  // namespace hpmoe
