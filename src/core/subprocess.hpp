// Running a helper program (nvidia-smi) with a hard deadline: a stuck GPU
// driver can leave such a program hanging forever, and the caller must not
// hang with it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <sys/types.h>

namespace cohort::detail {

// What spawn_process starts: argv[0] looked up on PATH unless it holds a '/'.
struct SpawnRequest {
    std::vector<std::string> argv;
    std::vector<std::string> env;  // "NAME=value" each; empty: the caller's environment
    std::filesystem::path cwd;     // empty: the caller's
    int stdout_fd = -1;            // dup2'd onto the child's stdout; -1: inherited
    int stderr_fd = -1;
    int parent_death_signal = 0;  // SIGKILL, SIGTERM...: sent when the spawning thread ends; 0: none
};

struct Spawned {
    pid_t pid = -1;
    int error = 0;  // errno when it could not start (ENOENT, EACCES, ...)
};

// Starts request.argv in a process group of its own (pgid = pid, so one
// killpg reaches whatever it forks), with stdin on /dev/null (a background
// group that read the terminal would stop on SIGTTIN), an empty signal mask
// and every signal at its default disposition, whatever the calling thread
// blocks or the program ignores (exec keeps both). A program that cannot
// start is Spawned::error (exec's errno: ENOENT, EACCES, ...), not a child
// that exits 127; never throws for it.
//
// With parent_death_signal set, the kernel sends that signal to the child
// when the *thread* that called spawn_process ends (PR_SET_PDEATHSIG follows
// the thread, not the process): call it from a thread that lives as long as
// the child should, such as the main thread. If the caller is already gone
// when the child gets there, the child kills itself with that signal.
//
// Descriptors: the child gets 0, 1 and 2 only, whatever else the caller has
// open, close-on-exec or not (Python's subprocess does the same, so torchrun
// workers get no more). cohort opens its own close-on-exec as well
// (core/cloexec.hpp), for the processes that its users start themselves.
Spawned spawn_process(const SpawnRequest& request);

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
