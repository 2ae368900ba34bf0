// A worker's command line and environment, started by core's
// spawn_process (a process group of its own, default signals, killed with
// its launcher).
#include "elastic/spawn.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

#include <cstring>
#include <string_view>
#include <vector>

#include <signal.h>
#include <sys/wait.h>

extern char** environ;

namespace cohort::detail {

std::vector<std::string> worker_environment(const WorkerSpec& spec) {
    for (const auto& [name, value] : spec.env)
        if (name.empty() || name.find('=') != std::string::npos)
            throw Error(Errc::invalid_argument,
                        fmt::format("worker '{}': environment variable name '{}' is empty or holds "
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

Spawned spawn_worker(const WorkerSpec& spec) {
    if (spec.argv.empty() || spec.argv[0].empty())
        throw Error(Errc::invalid_argument,
                    fmt::format("LocalScheduler: worker '{}' has no program to run (argv is empty)", spec.id));
    SpawnRequest request;
    request.argv = spec.argv;
    request.env = worker_environment(spec);
    request.cwd = spec.cwd;
    // SIGKILL, not SIGTERM: with the launcher gone nobody will escalate, and
    // a worker that handles SIGTERM slowly (or ignores it) would live on,
    // holding its GPU and ports. Its own children are its process group's:
    // a worker that is a wrapper script should exec the real program.
    request.parent_death_signal = SIGKILL;
    return spawn_process(request);
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
