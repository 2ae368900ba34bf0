// Starting a worker process for the local scheduler, and the words for how
// one ended.
#pragma once

#include <cohort/scheduler.hpp>

#include "core/subprocess.hpp"

#include <string>
#include <vector>

#include <sys/types.h>

namespace cohort::detail {

// Starts spec.argv in a process group of its own (pgid = pid) with stdin
// on /dev/null, an empty signal mask and default signal dispositions, in
// spec.cwd, with the caller's environment plus spec.env, and killed
// (SIGKILL) when the calling thread ends: launch from a thread that lives as
// long as the workers should (cohort-run's main thread). Throws
// Error(invalid_argument) for an empty argv or a bad variable name.
Spawned spawn_worker(const WorkerSpec& spec);

// The caller's environment with spec.env set on top, for a worker's
// process (or the srun that starts it). Throws Error(invalid_argument) for
// a variable name that is empty or holds '='.
std::vector<std::string> worker_environment(const WorkerSpec& spec);

// "cannot start 'trainer': No such file or directory"
std::string start_failure(const WorkerSpec& spec, int error);

// Fills kind, exit_code, signal and message from a waitpid status.
void describe_status(int status, WorkerExit& exit);

}  // namespace cohort::detail
