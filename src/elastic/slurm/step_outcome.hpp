// How a Slurm job step ended, read from what srun says: its exit status
// and its own lines on stderr ("srun: error: host2: task 0: Exited with
// exit code 3", "srun: error: Node failure on host1", "... oom-kill event
// ...", "*** STEP 12.3 ON host1 CANCELLED AT ... DUE TO PREEMPTION ***").
// srun's status alone is not enough: it exits 0 after a node failure, and
// 128+N both for a task killed by signal N and for a task that exited so.
#pragma once

#include <cohort/scheduler.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace cohort::detail {

// The cause srun's lines name, if any (OOM before preemption before node
// loss: a node failing under an OOM-killed task is reported as the OOM).
ExitCause cause_from_srun(const std::vector<std::string>& lines);

// Whether srun reported how the task ended ("task 0: Exited with exit
// code N", "task 0: Killed", ...); when it did not, a non-zero status may
// be srun's own failure, or a lost node it has not heard of yet.
bool task_status_reported(const std::vector<std::string>& lines);

// Fills kind, exit_code, signal, cause and message of `exit` from srun's
// wait status (waitpid) and its lines, for the worker's step on `node`.
// A task killed by a signal is ExitKind::signaled; a step whose node was
// lost has exit_code -1 (its task's status is unknown), never success.
void describe_step(int srun_status, const std::vector<std::string>& lines, std::string_view node, WorkerExit& exit);

// Whether slurmstepd said the step was cancelled ("*** STEP 7.0 ON host1
// CANCELLED AT 2026-11-26T15:23:47 ***"): with no reason given, the job
// may be being preempted (its grace time: Slurm 22.05 names no
// preemption in the step's line), which the job's record tells.
bool step_cancelled(const std::vector<std::string>& lines);

// True when one `scontrol show job -o` line says the job was preempted: a
// PreemptTime other than "None" (set when slurmctld starts preempting it).
bool job_preempted(std::string_view scontrol_line);

// True when one `scontrol show node -o` line says the node is gone from
// the cluster: a State with DOWN, FAIL or NOT_RESPONDING.
bool node_state_lost(std::string_view scontrol_line);

}  // namespace cohort::detail
