// Running a helper program (nvidia-smi) with a hard deadline: a stuck GPU
// driver can leave such a program hanging forever, and the caller must not
// hang with it.
#pragma once

#include <string>
#include <vector>

namespace cohort::detail {

struct RunResult {
    bool exited = false;  // it exited by itself: exit_status holds its status
    int exit_status = -1;
    int signal = 0;  // the signal that ended it (SIGKILL after a timeout)
    bool timed_out = false;
    std::string stdout_text;  // not `stdout`: that is a macro in <cstdio>
    std::string stderr_text;
    double elapsed_seconds = 0;

    bool succeeded() const { return exited && exit_status == 0 && !timed_out; }
};

// Runs argv[0] (looked up on PATH unless it holds a '/') with stdin on
// /dev/null and stdout/stderr captured, in a process group of its own. Past
// `deadline_seconds` the whole group is killed with SIGKILL, so children of a
// wrapper script die too. Returns within the deadline plus a fraction of a
// second even if the child is stuck in the kernel (it is then reaped later on
// a thread of its own). No file descriptor outlives the call.
// Throws Error(unavailable) "NAME: not found on PATH" / "NAME: permission
// denied" when it cannot start, Error(invalid_argument) for an empty argv or
// a deadline that is not positive.
RunResult run_with_deadline(std::vector<std::string> argv, double deadline_seconds);

// "2", "0.5": a deadline as messages print it ("timed out after 2s").
std::string format_seconds(double seconds);

// Why a run did not succeed, for messages: "timed out after 2s (killed)",
// "exit status 9: NVIDIA-SMI has failed ...", "killed by signal 11
// (Segmentation fault)". Quotes the first lines of stderr (else stdout).
std::string describe_failure(const RunResult& result, double deadline_seconds);

}  // namespace cohort::detail
