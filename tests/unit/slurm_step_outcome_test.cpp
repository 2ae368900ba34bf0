// How a step ended, from srun's status and its lines on stderr, as Slurm
// 22.05 words them (taken from runs on the test cluster, and from srun's
// and slurmstepd's messages for OOM kills and preemption).
#include "elastic/slurm/step_outcome.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cohort::detail {
namespace {

using ::testing::HasSubstr;

int exited(int code) {
    return (code & 0xff) << 8;
}

WorkerExit outcome(int status, const std::vector<std::string>& lines) {
    WorkerExit exit;
    exit.id = "w0";
    describe_step(status, lines, "host2", exit);
    return exit;
}

TEST(SlurmStepOutcome, SuccessIsSuccess) {
    const WorkerExit e = outcome(exited(0), {});
    EXPECT_TRUE(e.succeeded());
    EXPECT_EQ(e.cause, ExitCause::none);
    EXPECT_EQ(e.message, "exit code 0 on host2");
}

TEST(SlurmStepOutcome, TaskExitCode) {
    const WorkerExit e = outcome(exited(3), {"srun: error: host2: task 0: Exited with exit code 3"});
    EXPECT_EQ(e.kind, ExitKind::exited);
    EXPECT_EQ(e.exit_code, 3);
    EXPECT_EQ(e.cause, ExitCause::none);
    EXPECT_THAT(e.message, HasSubstr("exit code 3 on host2"));
    EXPECT_THAT(e.message, HasSubstr("task 0: Exited with exit code 3"));
}

TEST(SlurmStepOutcome, TaskKilledBySignal) {
    const WorkerExit e =
        outcome(exited(137), {"srun: error: host2: task 0: Killed", "srun: Force Terminated StepId=1.1"});
    EXPECT_EQ(e.kind, ExitKind::signaled);
    EXPECT_EQ(e.signal, 9);
    EXPECT_EQ(e.cause, ExitCause::none);
    EXPECT_THAT(e.message, HasSubstr("killed by signal 9 (Killed) on host2"));
}

TEST(SlurmStepOutcome, ExitCodeAbove128WithoutASignalLineIsAnExit) {
    // A task that exits 130 by itself: srun says "Exited with exit code 130".
    const WorkerExit e = outcome(exited(130), {"srun: error: host2: task 0: Exited with exit code 130"});
    EXPECT_EQ(e.kind, ExitKind::exited);
    EXPECT_EQ(e.exit_code, 130);
}

TEST(SlurmStepOutcome, NodeFailureIsNodeLostEvenThoughSrunExitsZero) {
    const WorkerExit e = outcome(exited(0), {"srun: error: Node failure on host2"});
    EXPECT_FALSE(e.succeeded());
    EXPECT_EQ(e.cause, ExitCause::node_lost);
    EXPECT_EQ(e.exit_code, -1);
    EXPECT_THAT(e.message, HasSubstr("node host2 lost"));
    EXPECT_THAT(e.message, HasSubstr("Node failure on host2"));
}

TEST(SlurmStepOutcome, StepCancelledForNodeFailure) {
    const WorkerExit e =
        outcome(exited(0), {"slurmstepd: error: *** STEP 7.2 ON host2 CANCELLED AT 2026-11-26T15:00:00 DUE TO NODE "
                            "FAILURE ***"});
    EXPECT_EQ(e.cause, ExitCause::node_lost);
}

TEST(SlurmStepOutcome, OomKillEvent) {
    const WorkerExit e =
        outcome(exited(137), {"slurmstepd: error: Detected 1 oom-kill event(s) in StepId=7.2. Some of your processes "
                              "may have been killed by the cgroup out-of-memory handler.",
                              "srun: error: host2: task 0: Out Of Memory"});
    EXPECT_EQ(e.cause, ExitCause::out_of_memory);
    EXPECT_EQ(e.kind, ExitKind::signaled);
    EXPECT_THAT(e.message, HasSubstr("out of memory"));
    EXPECT_FALSE(e.succeeded());
}

// What Slurm 22.05 printed on the test cluster with task/cgroup and
// ConstrainRAMSpace=yes, for a step of --mem=50M that allocated 400 MB:
// srun exits 1.
TEST(SlurmStepOutcome, OomKillAsSlurm2205PrintsIt) {
    const WorkerExit e =
        outcome(exited(1), {"slurmstepd-host2: error: Detected 1 oom-kill event(s) in StepId=1.0. Some of your "
                            "processes may have been killed by the cgroup out-of-memory handler.",
                            "srun: error: host2: task 0: Out Of Memory"});
    EXPECT_EQ(e.cause, ExitCause::out_of_memory);
    EXPECT_EQ(e.kind, ExitKind::exited);
    EXPECT_EQ(e.exit_code, 1);
    EXPECT_FALSE(e.succeeded());
    EXPECT_THAT(e.message, HasSubstr("out of memory: Out Of Memory on host2 (srun exited 1)"));
}

TEST(SlurmStepOutcome, OutOfMemoryState) {
    EXPECT_EQ(cause_from_srun({"srun: error: task 0 launch failed: OUT_OF_MEMORY"}), ExitCause::out_of_memory);
}

TEST(SlurmStepOutcome, Preemption) {
    const WorkerExit e =
        outcome(exited(143), {"slurmstepd: error: *** STEP 7.2 ON host2 CANCELLED AT 2026-11-26T15:00:00 DUE TO "
                              "PREEMPTION ***",
                              "srun: error: host2: task 0: Terminated"});
    EXPECT_EQ(e.cause, ExitCause::preempted);
    EXPECT_EQ(e.kind, ExitKind::signaled);
    EXPECT_EQ(e.signal, 15);
    EXPECT_THAT(e.message, HasSubstr("preempted"));
    EXPECT_EQ(cause_from_srun({"srun: Job 7 state is PREEMPTED"}), ExitCause::preempted);
}

TEST(SlurmStepOutcome, OomWinsOverNodeLossAndPreemptionOverNodeLoss) {
    EXPECT_EQ(
        cause_from_srun({"srun: error: Node failure on host2", "slurmstepd: error: Detected 1 oom-kill event(s)"}),
        ExitCause::out_of_memory);
    EXPECT_EQ(cause_from_srun({"srun: error: Node failure on host2", "*** JOB 7 CANCELLED DUE TO PREEMPTION ***"}),
              ExitCause::preempted);
}

TEST(SlurmStepOutcome, OrdinaryLinesNameNoCause) {
    EXPECT_EQ(cause_from_srun({"srun: error: host2: task 0: Exited with exit code 1", "srun: Job step aborted"}),
              ExitCause::none);
    EXPECT_TRUE(task_status_reported({"srun: error: host2: task 0: Exited with exit code 1"}));
    EXPECT_TRUE(task_status_reported({"srun: error: host2: task 12: Segmentation fault"}));
    EXPECT_FALSE(task_status_reported({"srun: error: Node failure on host2"}));
    EXPECT_FALSE(task_status_reported({"srun: error: Unable to create step for job 7: Invalid node name"}));
}

TEST(SlurmStepOutcome, SrunsOwnFailure) {
    const WorkerExit e = outcome(exited(1), {"srun: error: Unable to create step for job 7: Invalid node name "
                                             "specified"});
    EXPECT_EQ(e.exit_code, 1);
    EXPECT_THAT(e.message, HasSubstr("Unable to create step"));
}

TEST(SlurmStepOutcome, SrunKilled) {
    const WorkerExit e = outcome(9, {});  // waitpid status: killed by SIGKILL
    EXPECT_EQ(e.exit_code, -1);
    EXPECT_FALSE(e.succeeded());
    EXPECT_THAT(e.message, HasSubstr("srun for the step on host2 was killed by signal 9"));
}

// Slurm 22.05 with PreemptMode=CANCEL and GraceTime on the test cluster:
// the step's line gives no reason; the job's record has a PreemptTime.
TEST(SlurmStepOutcome, PreemptionWithinGraceTime) {
    const std::vector<std::string> lines{
        "slurmstepd-host1: error: *** STEP 1.0 ON host1 CANCELLED AT "
        "2026-11-26T15:23:47 ***",
        "srun: error: host1: task 0: Exited with exit code 143"};
    EXPECT_TRUE(step_cancelled(lines));
    EXPECT_EQ(cause_from_srun(lines), ExitCause::none);
    EXPECT_FALSE(step_cancelled({"srun: error: host1: task 0: Exited with exit code 143"}));
    EXPECT_TRUE(
        job_preempted("JobId=1 JobName=job.sh JobState=RUNNING Reason=None PreemptEligibleTime=2026-11-26T15:23:44 "
                      "PreemptTime=2026-11-26T15:23:47 SuspendTime=None"));
    EXPECT_FALSE(
        job_preempted("JobId=1 JobState=RUNNING PreemptEligibleTime=2026-11-26T15:23:44 PreemptTime=None "
                      "SuspendTime=None"));
    EXPECT_FALSE(job_preempted("JobId=1 JobState=RUNNING"));
}

TEST(SlurmStepOutcome, NodeStates) {
    EXPECT_TRUE(
        node_state_lost("NodeName=host1 Arch=x86_64 CoresPerSocket=1 State=DOWN*+NOT_RESPONDING "
                        "ThreadsPerCore=1"));
    EXPECT_TRUE(node_state_lost("NodeName=host1 State=IDLE+NOT_RESPONDING ThreadsPerCore=1"));
    EXPECT_TRUE(node_state_lost("NodeName=host1 State=MIXED+FAIL ThreadsPerCore=1"));
    EXPECT_FALSE(node_state_lost("NodeName=host1 State=MIXED ThreadsPerCore=1"));
    EXPECT_FALSE(node_state_lost("NodeName=host1 State=ALLOCATED ThreadsPerCore=1 Reason=down for maintenance"));
    EXPECT_FALSE(node_state_lost("garbage"));
}

}  // namespace
}  // namespace cohort::detail
