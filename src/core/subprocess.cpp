// run_with_deadline: spawn_process into a process group of its own, poll() the
// pipes against the deadline, SIGKILL the group when it passes.
#include "core/subprocess.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cohort::detail {
namespace {

using Clock = std::chrono::steady_clock;

// Output past this is read and dropped: nvidia-smi prints kilobytes, and a
// runaway child must not exhaust memory.
constexpr std::size_t max_output = 16u << 20;
// How long to wait for a SIGKILLed child to be reaped before handing it to a
// reaper thread (a process in uninterruptible sleep in the driver dies only
// when the driver lets go).
constexpr auto kill_grace = std::chrono::milliseconds(250);
// The longest poll() between checks that the child has exited; a grandchild
// may hold the pipes open after the child is gone, so EOF alone is not enough.
constexpr int max_poll_ms = 10;

// A file descriptor closed on every path out.
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() { reset(); }
    int get() const { return fd_; }
    void reset(int fd = -1) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }

private:
    int fd_ = -1;
};

struct Pipe {
    Fd read, write;
};

// O_CLOEXEC from the start, so a fork on another thread cannot inherit the
// pipe and keep it open (which would hold off our EOF).
void open_pipe(Pipe& p) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(Errc::io, fmt::format("pipe2: {}", std::strerror(errno)));
    // Only our end is non-blocking: the child's end must keep blocking writes.
    ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    p.read.reset(fds[0]);
    p.write.reset(fds[1]);
}

// Reads what is there now. Returns false at EOF.
bool drain(int fd, std::string& into) {
    char buffer[65536];
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n > 0) {
            const std::size_t keep =
                std::min<std::size_t>(static_cast<std::size_t>(n), max_output - std::min(max_output, into.size()));
            into.append(buffer, keep);
            continue;
        }
        if (n == 0) return false;
        if (errno == EINTR) continue;
        return errno == EAGAIN || errno == EWOULDBLOCK;  // other errors: treat as closed
    }
}

void record_status(RunResult& result, int status) {
    if (WIFEXITED(status)) {
        result.exited = true;
        result.exit_status = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        result.signal = WTERMSIG(status);
    }
}

// True once `pid` has been reaped (its status recorded in `result`).
bool try_reap(pid_t pid, RunResult& result) {
    int status = 0;
    for (;;) {
        const pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            record_status(result, status);
            return true;
        }
        if (r < 0 && errno == EINTR) continue;
        // ECHILD: someone else reaped it (SIGCHLD ignored); it is gone.
        return r < 0;
    }
}

}  // namespace

RunResult run_with_deadline(std::vector<std::string> argv, double deadline_seconds) {
    if (argv.empty() || argv[0].empty()) throw Error(Errc::invalid_argument, "run_with_deadline: no program to run");
    if (!(deadline_seconds > 0) || !std::isfinite(deadline_seconds))
        throw Error(Errc::invalid_argument, fmt::format("{}: the deadline must be a positive number of seconds, not {}",
                                                        argv[0], deadline_seconds));

    const auto start = Clock::now();
    const auto deadline =
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(deadline_seconds));

    Pipe out, err;
    open_pipe(out);
    open_pipe(err);
    SpawnRequest request;
    request.argv = argv;
    request.stdout_fd = out.write.get();
    request.stderr_fd = err.write.get();
    const Spawned spawned = spawn_process(request);
    const pid_t pid = spawned.pid;
    const int rc = spawned.error;
    if (rc != 0) {
        const bool on_path = argv[0].find('/') == std::string::npos;
        if (rc == ENOENT)
            throw Error(Errc::unavailable, fmt::format("{}: not found{}", argv[0], on_path ? " on PATH" : ""));
        if (rc == EACCES)
            throw Error(Errc::unavailable, fmt::format("{}: permission denied (not executable?)", argv[0]));
        throw Error(Errc::unavailable, fmt::format("{}: cannot start: {}", argv[0], std::strerror(rc)));
    }
    // Our copies of the write ends must go, or we would never see EOF.
    out.write.reset();
    err.write.reset();

    RunResult result;
    bool reaped = false;
    bool out_open = true, err_open = true;
    for (;;) {
        if (!reaped) reaped = try_reap(pid, result);
        if (reaped) {
            // The child's own fds closed before it became reapable: what it
            // wrote is in the pipes. Anything still open is held by a
            // descendant left in its group; kill it rather than wait for it.
            if (out_open) out_open = drain(out.read.get(), result.stdout_text);
            if (err_open) err_open = drain(err.read.get(), result.stderr_text);
            if (out_open || err_open) ::killpg(pid, SIGKILL);
            break;
        }
        const auto now = Clock::now();
        if (now >= deadline) break;
        const auto left_ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
        pollfd fds[2];
        nfds_t n = 0;
        if (out_open) fds[n++] = {out.read.get(), POLLIN, 0};
        if (err_open) fds[n++] = {err.read.get(), POLLIN, 0};
        const int ready = ::poll(fds, n, static_cast<int>(std::min<long long>(left_ms, max_poll_ms)));
        if (ready < 0 && errno != EINTR) break;
        if (ready > 0) {
            if (out_open) out_open = drain(out.read.get(), result.stdout_text);
            if (err_open) err_open = drain(err.read.get(), result.stderr_text);
        }
    }

    if (!reaped) {
        result.timed_out = true;
        // The group first (a wrapper script's children), then the child in
        // case it moved to a group of its own.
        ::killpg(pid, SIGKILL);
        ::kill(pid, SIGKILL);
        const auto give_up = Clock::now() + kill_grace;
        while (!(reaped = try_reap(pid, result)) && Clock::now() < give_up)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (!reaped) {
            // Stuck in the kernel: it dies when the driver lets go. Reap it
            // then, so it does not stay a zombie, without making the caller wait.
            std::thread([pid] {
                int status = 0;
                while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
                }
            }).detach();
            result.signal = SIGKILL;
        }
        // Whatever it printed before the deadline.
        if (out_open) drain(out.read.get(), result.stdout_text);
        if (err_open) drain(err.read.get(), result.stderr_text);
    }
    result.elapsed_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
}

std::string format_seconds(double seconds) {
    return fmt::format("{:g}", seconds);
}

std::string describe_failure(const RunResult& result, double deadline_seconds) {
    if (result.timed_out) return fmt::format("timed out after {}s (killed)", format_seconds(deadline_seconds));
    std::string what = result.exited ? fmt::format("exit status {}", result.exit_status)
                       : result.signal != 0
                           ? fmt::format("killed by signal {} ({})", result.signal, ::strsignal(result.signal))
                           : std::string("ended with an unknown status (reaped elsewhere)");
    // nvidia-smi prints some failures on stdout ("No devices were found").
    const std::string& text =
        result.stderr_text.find_first_not_of(" \t\r\n") != std::string::npos ? result.stderr_text : result.stdout_text;
    std::string quoted;
    std::size_t pos = 0;
    for (int lines = 0; lines < 3 && pos < text.size(); ++lines) {
        std::size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        std::string_view line(text.data() + pos, end - pos);
        pos = end + 1;
        while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
        while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.remove_prefix(1);
        if (line.empty()) {
            --lines;
            continue;
        }
        if (!quoted.empty()) quoted += ' ';
        quoted += line;
    }
    if (quoted.size() > 400) quoted = quoted.substr(0, 400) + "...";
    if (!quoted.empty()) what += ": " + quoted;
    return what;
}

}  // namespace cohort::detail
