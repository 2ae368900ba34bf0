// Reaping the children a scheduler starts (a worker's process-group leader,
// or the srun of a Slurm step), shared by the local and Slurm schedulers.
//
// A child's exit is seen with waitid(WNOWAIT), which leaves it a zombie:
// while it is one its pid (the group's id) cannot be reused, so what is left
// of its group can be killed safely before the zombie is reaped. Only the
// schedulers' own pids are waited for, never -1, so other children of the
// launcher are left alone.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>

namespace cohort::detail {

// True once the child `pid` has exited: a zombie now, or already reaped by
// someone else (ECHILD).
bool has_exited(pid_t pid);

// SIGKILLs what is left of `pid`'s process group, then reaps `pid`: its
// waitpid status, or empty when someone else reaped it (SIGCHLD ignored).
std::optional<int> kill_group_and_reap(pid_t pid);

// For each entry of `children` (a map from id to a record with a `pid`)
// whose child has exited: reap(id, record), then the entry is erased.
template <class Children, class Reap>
void reap_exited(Children& children, Reap&& reap) {
    for (auto it = children.begin(); it != children.end();) {
        if (has_exited(it->second.pid)) {
            reap(it->first, it->second);
            it = children.erase(it);
        } else {
            ++it;
        }
    }
}

// Calls reap_all() (which reaps and erases from `children`) until none of
// `ids` is left in `children` or `until` passes, polling at 1 ms doubling
// to 20 ms: a stop sees a quick exit at once without spinning on a slow one.
template <class Children, class ReapAll>
void wait_for_exits(const Children& children, const std::vector<std::string>& ids,
                    std::chrono::steady_clock::time_point until, ReapAll&& reap_all) {
    const auto any_left = [&] {
        return std::any_of(ids.begin(), ids.end(), [&](const std::string& id) { return children.contains(id); });
    };
    auto pause = std::chrono::milliseconds(1);
    for (;;) {
        reap_all();
        if (!any_left() || std::chrono::steady_clock::now() >= until) return;
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(20));
    }
}

}  // namespace cohort::detail
