// waitid/waitpid for the schedulers' children, EINTR handled once.
#include "elastic/reap.hpp"

#include <cerrno>

#include <signal.h>
#include <sys/wait.h>

namespace cohort::detail {

bool has_exited(pid_t pid) {
    siginfo_t info{};
    for (;;) {
        if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0) return info.si_pid != 0;
        if (errno != EINTR) return true;  // ECHILD: someone else reaped it
    }
}

std::optional<int> kill_group_and_reap(pid_t pid) {
    ::killpg(pid, SIGKILL);
    int status = 0;
    pid_t r;
    do r = ::waitpid(pid, &status, 0);
    while (r < 0 && errno == EINTR);
    if (r != pid) return std::nullopt;
    return status;
}

}  // namespace cohort::detail
