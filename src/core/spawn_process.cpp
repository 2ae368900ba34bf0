// spawn_process: fork, set the child up, exec.
//
// fork rather than posix_spawnp: a worker must die with its launcher, and
// PR_SET_PDEATHSIG can only be set in the child, between fork and exec,
// which posix_spawn gives no way to do. (A shim program that set it and
// exec'd the worker would have to be found at run time by every program
// that links cohort; a reaper process would be one more process to lose.)
// Between fork and exec the child calls only async-signal-safe system
// calls: everything it needs (paths, argv, envp) is built before the fork,
// and exec's errno comes back over a close-on-exec pipe, as posix_spawnp
// does it, so a missing program is an error here, not a child that exits 127.
#include "core/subprocess.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace cohort::detail {
namespace {

std::vector<char*> pointers(std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (std::string& s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

// Where exec should look for argv[0], in order: itself if it holds a '/',
// else each directory of the caller's PATH (as posix_spawnp looks; an empty
// entry is the working directory).
std::vector<std::string> candidates(const std::string& program) {
    if (program.find('/') != std::string::npos) return {program};
    const char* env = std::getenv("PATH");
    const std::string path = env != nullptr ? env : "/bin:/usr/bin";
    std::vector<std::string> out;
    std::size_t pos = 0;
    for (;;) {
        const std::size_t end = path.find(':', pos);
        std::string dir = path.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        out.push_back(dir.empty() ? program : dir + "/" + program);
        if (end == std::string::npos) break;
        pos = end + 1;
    }
    return out;
}

// Marks every descriptor from 3 up close-on-exec, in the child. cohort opens
// its own close-on-exec (core/cloexec.hpp), but a library under it may not
// (libcurl 7.88's wakeup socketpair, a driver's device files): the child
// gets 0, 1 and 2 only, as Python's subprocess (and so torchrun) gives its
// children. Marked rather than closed, so the report pipe lasts until exec.
// close_range is Linux 5.11; before that, one fcntl per possible descriptor
// up to `limit`.
void mark_inherited_cloexec(int limit) {
    if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
    for (int fd = 3; fd < limit; ++fd) {
        const int flags = ::fcntl(fd, F_GETFD);
        if (flags >= 0 && (flags & FD_CLOEXEC) == 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
    }
}

// Makes `from` the child's `to`. dup2 onto itself would keep close-on-exec
// set, so that case clears the flag instead.
bool move_fd(int from, int to) {
    if (from == to) return ::fcntl(to, F_SETFD, 0) == 0;
    return ::dup2(from, to) == to;
}

// The child, from fork to exec: async-signal-safe calls only. Reports the
// errno that stopped it on `report` and exits 127.
[[noreturn]] void become(const SpawnRequest& request, pid_t parent, int report, int fd_limit,
                         const std::vector<char*>& paths, char* const* argv, char* const* envp) {
    int error = 0;
    // Every signal back at its default (exec keeps what is ignored), then
    // the mask the parent blocked for the fork lifted.
    struct sigaction defaults {};
    defaults.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &defaults, nullptr);
    ::setpgid(0, 0);
    if (request.parent_death_signal != 0) {
        ::prctl(PR_SET_PDEATHSIG, request.parent_death_signal);
        // The parent may have died before prctl: then no signal will come.
        if (::getppid() != parent) ::kill(::getpid(), request.parent_death_signal);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);

    const int in = ::open("/dev/null", O_RDONLY);
    if (in < 0 || !move_fd(in, STDIN_FILENO)) error = errno;
    if (in > STDIN_FILENO) ::close(in);
    if (error == 0 && request.stdout_fd >= 0 && !move_fd(request.stdout_fd, STDOUT_FILENO)) error = errno;
    if (error == 0 && request.stderr_fd >= 0 && !move_fd(request.stderr_fd, STDERR_FILENO)) error = errno;
    if (error == 0) mark_inherited_cloexec(fd_limit);
    if (error == 0 && !request.cwd.empty() && ::chdir(request.cwd.c_str()) != 0) error = errno;
    if (error == 0) {
        bool denied = false;
        for (char* path : paths) {
            if (path == nullptr) break;
            ::execve(path, argv, envp);
            error = errno;
            if (error == EACCES) denied = true;
            // Like execvp: a directory that lacks it is no reason to stop.
            if (error != ENOENT && error != ENOTDIR && error != EACCES && error != ESTALE) break;
        }
        if (denied && (error == ENOENT || error == ENOTDIR)) error = EACCES;
    }
    while (::write(report, &error, sizeof error) < 0 && errno == EINTR) {
    }
    ::_exit(127);
}

}  // namespace

Spawned spawn_process(const SpawnRequest& request) {
    Spawned out;
    std::vector<std::string> argv = request.argv, env = request.env;
    std::vector<std::string> where = candidates(argv.empty() ? std::string() : argv[0]);
    std::vector<char*> argv_p = pointers(argv), env_p = pointers(env), paths = pointers(where);
    char* const* envp = request.env.empty() ? environ : env_p.data();

    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) {
        out.error = errno;
        return out;
    }
    // No handler of ours may run in the child before it resets them all.
    sigset_t all, old;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &old);
    const pid_t parent = ::getpid();
    // For the fallback of mark_inherited_cloexec (sysconf may not be called
    // after fork); past a million descriptors it gives up.
    const long open_max = ::sysconf(_SC_OPEN_MAX);
    const int fd_limit = open_max > 0 && open_max < (1 << 20) ? static_cast<int>(open_max) : (1 << 20);
    const pid_t pid = ::fork();
    if (pid == 0) become(request, parent, report[1], fd_limit, paths, argv_p.data(), envp);
    const int fork_error = errno;
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    ::close(report[1]);
    if (pid < 0) {
        ::close(report[0]);
        out.error = fork_error;
        return out;
    }
    // EOF: exec succeeded (the pipe closed with it). An int: why it did not.
    int error = 0;
    ssize_t got;
    do got = ::read(report[0], &error, sizeof error);
    while (got < 0 && errno == EINTR);
    ::close(report[0]);
    if (got == static_cast<ssize_t>(sizeof error) && error != 0) {
        int status = 0;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        out.error = error;
        return out;
    }
    out.pid = pid;
    return out;
}

}  // namespace cohort::detail
