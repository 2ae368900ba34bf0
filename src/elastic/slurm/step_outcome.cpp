// Reading srun's verdict. Its messages are stable across Slurm releases
// (they come from src/srun's task-exit and node-fail handlers), and the
// tests pin down the 22.05 wording.
#include "elastic/slurm/step_outcome.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstring>

#include <signal.h>
#include <sys/wait.h>

namespace cohort::detail {
namespace {

bool has(std::string_view line, std::string_view what) {
    return line.find(what) != std::string_view::npos;
}

// "task 0: Exited with exit code 3" -> 3; "task 0: Killed" -> the text
// after "task N: ". Empty when the line is not a task's end.
std::string_view task_status(std::string_view line) {
    const std::size_t task = line.find("task ");
    if (task == std::string_view::npos) return {};
    std::size_t i = task + 5;
    const std::size_t digits = i;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
    if (i == digits || line.substr(i, 2) != ": ") return {};
    return line.substr(i + 2);
}

// The last line srun wrote about the step's end, for the message.
std::string last_error(const std::vector<std::string>& lines) {
    for (auto it = lines.rbegin(); it != lines.rend(); ++it)
        if (has(*it, "error") || has(*it, "***") || has(*it, "oom-kill") || has(*it, "Node failure")) return *it;
    return lines.empty() ? std::string() : lines.back();
}

}  // namespace

ExitCause cause_from_srun(const std::vector<std::string>& lines) {
    bool preempted = false, lost = false;
    for (const std::string& line : lines) {
        if (has(line, "oom-kill") || has(line, "OUT_OF_MEMORY") || has(line, "Out Of Memory"))
            return ExitCause::out_of_memory;
        if (has(line, "PREEMPT")) preempted = true;  // "DUE TO PREEMPTION", "PREEMPTED"
        if (has(line, "Node failure") || has(line, "NODE_FAIL") || has(line, "DUE TO NODE FAILURE")) lost = true;
    }
    if (preempted) return ExitCause::preempted;
    return lost ? ExitCause::node_lost : ExitCause::none;
}

bool task_status_reported(const std::vector<std::string>& lines) {
    for (const std::string& line : lines)
        if (!task_status(line).empty()) return true;
    return false;
}

void describe_step(int srun_status, const std::vector<std::string>& lines, std::string_view node, WorkerExit& exit) {
    exit.cause = cause_from_srun(lines);
    std::string_view reported;
    for (const std::string& line : lines)
        if (const std::string_view s = task_status(line); !s.empty()) reported = s;
    if (exit.cause == ExitCause::node_lost && reported.empty()) {
        // srun exits 0 after a node failure: the task did not finish.
        exit.kind = ExitKind::exited;
        exit.exit_code = -1;
        exit.message = "the task's status is unknown";
    } else if (WIFSIGNALED(srun_status)) {
        // srun itself was killed: the step goes on without it until Slurm
        // notices; the task's own status is unknown.
        exit.kind = ExitKind::exited;
        exit.exit_code = -1;
        exit.message = fmt::format("srun for the step on {} was killed by signal {} ({}); the task's status is unknown",
                                   node, WTERMSIG(srun_status), ::strsignal(WTERMSIG(srun_status)));
    } else {
        const int code = WIFEXITED(srun_status) ? WEXITSTATUS(srun_status) : -1;
        int exited_with = -1;
        if (reported.starts_with("Exited with exit code ")) {
            const std::string_view n = reported.substr(22);
            std::from_chars(n.data(), n.data() + n.size(), exited_with);
        }
        if (exited_with >= 0 || (reported.empty() && code >= 0 && code <= 128)) {
            exit.kind = ExitKind::exited;
            exit.exit_code = exited_with >= 0 ? exited_with : code;
            exit.message = fmt::format("exit code {} on {}", exit.exit_code, node);
        } else if (!reported.empty() && code > 128 && code < 128 + NSIG) {
            exit.kind = ExitKind::signaled;
            exit.signal = code - 128;
            exit.message = fmt::format("killed by signal {} ({}) on {}", exit.signal, reported, node);
        } else {
            // "task 0: Out Of Memory" with srun exiting 1, or srun's own failure.
            exit.kind = ExitKind::exited;
            exit.exit_code = code;
            exit.message = reported.empty() ? fmt::format("srun exited {} for the step on {}", code, node)
                                            : fmt::format("{} on {} (srun exited {})", reported, node, code);
        }
    }
    switch (exit.cause) {
        case ExitCause::node_lost:
            exit.message = fmt::format("node {} lost ({})", node, exit.message);
            break;
        case ExitCause::out_of_memory:
            exit.message = fmt::format("out of memory: {}", exit.message);
            break;
        case ExitCause::preempted:
            exit.message = fmt::format("preempted: {}", exit.message);
            break;
        default:  // none, and the causes only other cluster managers report
            break;
    }
    if (!exit.succeeded() && !lines.empty()) exit.message += "; " + last_error(lines);
}

bool step_cancelled(const std::vector<std::string>& lines) {
    for (const std::string& line : lines)
        if (has(line, "***") && has(line, " CANCELLED AT ")) return true;
    return false;
}

bool job_preempted(std::string_view scontrol_line) {
    const std::size_t at = scontrol_line.find("PreemptTime=");
    if (at == std::string_view::npos) return false;
    std::string_view value = scontrol_line.substr(at + 12);
    value = value.substr(0, value.find_first_of(" \n"));
    return !value.empty() && value != "None" && value != "Unknown";
}

bool node_state_lost(std::string_view scontrol_line) {
    const std::size_t at = scontrol_line.find("State=");
    if (at == std::string_view::npos) return false;
    // "State=DOWN*+NOT_RESPONDING ThreadsPerCore=1": up to the next space.
    // Not "State=" inside another key (there is none before it in 22.05).
    std::string_view state = scontrol_line.substr(at + 6);
    state = state.substr(0, state.find(' '));
    return has(state, "DOWN") || has(state, "FAIL") || has(state, "NOT_RESPONDING");
}

}  // namespace cohort::detail
