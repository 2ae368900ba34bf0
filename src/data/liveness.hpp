// Whether a process still runs, robust to zombies and to pids reused by a
// new process (the workload registry's check).
#pragma once

#include <cstdint>
#include <optional>

namespace cohort::data {

// The process's start time in clock ticks since boot (/proc/PID/stat field
// 22), or nothing where /proc cannot say.
std::optional<uint64_t> process_start_time(int64_t pid);

// kill(pid, 0) says whether the pid exists (EPERM: it does, another user's);
// /proc then says whether it is a zombie, and, given the start time seen at
// registration, whether the pid now belongs to another process.
bool process_alive(int64_t pid, std::optional<uint64_t> start_time);

}  // namespace cohort::data
