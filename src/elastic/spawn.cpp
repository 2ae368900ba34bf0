// posix_spawnp rather than fork/exec: glibc (2.24 and later) runs the child
// with CLONE_VFORK and hands back exec's errno as the return value, so a
// missing program is an error here, not a child that exits 127, and nothing
// async-signal-unsafe runs between fork and exec in a threaded launcher.
#include "elastic/spawn.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

#include <cstring>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace cohort::detail {
namespace {

// posix_spawn's attribute and file-action objects, destroyed on every path.
struct SpawnSetup {
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t actions;
    SpawnSetup() {
        posix_spawnattr_init(&attr);
        posix_spawn_file_actions_init(&actions);
    }
    ~SpawnSetup() {
        posix_spawn_file_actions_destroy(&actions);
        posix_spawnattr_destroy(&attr);
    }
    SpawnSetup(const SpawnSetup&) = delete;
    SpawnSetup& operator=(const SpawnSetup&) = delete;
};

// The caller's environment with the spec's variables set on top.
std::vector<std::string> environment(const WorkerSpec& spec) {
    for (const auto& [name, value] : spec.env)
        if (name.empty() || name.find('=') != std::string::npos)
            throw Error(Errc::invalid_argument,
                        fmt::format("LocalScheduler: worker '{}': environment variable name '{}' is empty or holds "
                                    "'='",
                                    spec.id, name));
    std::vector<std::string> out;
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
        const std::string_view text(*entry);
        const std::string_view name = text.substr(0, text.find('='));
        if (!spec.env.contains(std::string(name))) out.emplace_back(text);
    }
    for (const auto& [name, value] : spec.env) out.push_back(name + "=" + value);
    return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (std::string& s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

}  // namespace

Spawned spawn_worker(const WorkerSpec& spec) {
    if (spec.argv.empty() || spec.argv[0].empty())
        throw Error(Errc::invalid_argument,
                    fmt::format("LocalScheduler: worker '{}' has no program to run (argv is empty)", spec.id));
    std::vector<std::string> argv = spec.argv;
    std::vector<std::string> env = environment(spec);
    std::vector<char*> argv_p = pointers(argv), env_p = pointers(env);

    SpawnSetup setup;
    // A worker in a background process group that read the terminal would
    // be stopped by SIGTTIN, hanging the job; and N workers cannot share one.
    posix_spawn_file_actions_addopen(&setup.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    if (!spec.cwd.empty()) posix_spawn_file_actions_addchdir_np(&setup.actions, spec.cwd.c_str());
    // exec keeps the signal mask and ignored signals: a launcher that blocks
    // SIGCHLD or ignores SIGPIPE must not pass that on.
    sigset_t empty, defaults;
    sigemptyset(&empty);
    sigfillset(&defaults);
    sigdelset(&defaults, SIGKILL);
    sigdelset(&defaults, SIGSTOP);
    posix_spawnattr_setsigmask(&setup.attr, &empty);
    posix_spawnattr_setsigdefault(&setup.attr, &defaults);
    posix_spawnattr_setpgroup(&setup.attr, 0);
    posix_spawnattr_setflags(&setup.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

    Spawned out;
    const int rc = ::posix_spawnp(&out.pid, argv[0].c_str(), &setup.actions, &setup.attr, argv_p.data(), env_p.data());
    if (rc != 0) {
        out.pid = -1;
        out.error = rc;
    }
    return out;
}

std::string start_failure(const WorkerSpec& spec, int error) {
    const std::string& program = spec.argv.empty() ? spec.id : spec.argv[0];
    std::string where = spec.cwd.empty() ? std::string() : fmt::format(" in '{}'", spec.cwd.string());
    std::string hint;
    if (error == ENOENT && program.find('/') == std::string::npos) hint = " (not found on PATH)";
    return fmt::format("cannot start '{}'{}: {}{}", program, where, std::strerror(error), hint);
}

void describe_status(int status, WorkerExit& exit) {
    if (WIFEXITED(status)) {
        exit.kind = ExitKind::exited;
        exit.exit_code = WEXITSTATUS(status);
        exit.message = fmt::format("exit code {}", exit.exit_code);
    } else if (WIFSIGNALED(status)) {
        exit.kind = ExitKind::signaled;
        exit.signal = WTERMSIG(status);
        const char* name = ::strsignal(exit.signal);
        exit.message = fmt::format("killed by signal {} ({}){}", exit.signal, name != nullptr ? name : "unknown",
                                   WCOREDUMP(status) ? ", core dumped" : "");
    } else {
        exit.kind = ExitKind::exited;
        exit.exit_code = -1;
        exit.message = fmt::format("ended with wait status {:#x}", status);
    }
}

}  // namespace cohort::detail
