// Communicator::dead_ranks(): the peers a survivor may report dead. A rank
// in another process is killed (or exits without closing, or closes and
// exits): only a connection that ended without a goodbye or an abort puts
// it there, and a live rank that gave up because of it never does.
#include "comm_support.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <latch>
#include <string>
#include <thread>
#include <vector>

namespace cohort::test {
namespace {

using namespace std::chrono_literals;

enum class End { killed, exited, closed };

CommOptions rank_options(const std::string& url, int rank, int size) {
    CommOptions o;
    o.rank = rank;
    o.size = size;
    o.store_url = url;
    o.address = "127.0.0.1";
    o.timeout = 10s;
    o.connect_timeout = 20s;
    o.shm_size = 0;  // every byte over TCP: the connection is what ends
    return o;
}

// Forks rank `rank`: it joins, passes one barrier, then ends as `end` says
// (killed: waits for the parent's SIGKILL, at most 60 s).
pid_t fork_rank(const std::string& url, int rank, int size, End end) {
    const pid_t pid = ::fork();
    if (pid != 0) return pid;
    int status = 0;
    try {
        Communicator comm(rank_options(url, rank, size));
        comm.barrier();
        if (end == End::closed) comm.close();
        if (end == End::killed) {
            for (int i = 0; i < 600; ++i) std::this_thread::sleep_for(100ms);
            status = 4;  // never killed
        }
        // Without close: _exit skips the destructor, so no goodbye.
        ::_exit(status);
    } catch (...) {
        ::_exit(3);
    }
}

int reap(pid_t pid, bool kill_it) {
    if (kill_it) ::kill(pid, SIGKILL);
    int status = 0;
    for (int i = 0; i < 300; ++i) {  // at most 30 s
        if (::waitpid(pid, &status, WNOHANG) == pid) return status;
        std::this_thread::sleep_for(100ms);
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    ADD_FAILURE() << "rank process " << pid << " did not end";
    return status;
}

class TwoRanks : public ::testing::TestWithParam<End> {};

// Rank 1 ends as the parameter says; rank 0's next operation fails, and
// dead_ranks() is {1} only when rank 1 ended without a goodbye.
TEST_P(TwoRanks, DeadRanksHoldOnlyAPeerThatEndedWithoutGoodbye) {
    const End end = GetParam();
    CommTempDir dir;
    const std::string url = "file://" + dir.path().string();
    const pid_t pid = fork_rank(url, 1, 2, end);
    ASSERT_GT(pid, 0);
    Communicator comm(rank_options(url, 0, 2));
    comm.barrier();
    EXPECT_TRUE(comm.dead_ranks().empty());
    const int status = reap(pid, end == End::killed);
    if (end != End::killed) {
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    }
    std::vector<float> data(1000, 1.0f);
    try {
        comm.allreduce(std::span<float>(data));
        ADD_FAILURE() << "the allreduce succeeded without rank 1";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    }
    if (end == End::closed) {
        EXPECT_TRUE(comm.dead_ranks().empty()) << "a rank that said goodbye is not dead";
    } else {
        EXPECT_EQ(comm.dead_ranks(), std::vector<int>{1});
    }
    EXPECT_EQ(comm.dead_ranks(), comm.dead_ranks());  // asking again changes nothing
}

INSTANTIATE_TEST_SUITE_P(Ends, TwoRanks, ::testing::Values(End::killed, End::exited, End::closed),
                         [](const ::testing::TestParamInfo<End>& p) {
                             return std::string(p.param == End::killed   ? "killed"
                                                : p.param == End::exited ? "exited"
                                                                         : "closed");
                         });

// Three ranks, the third killed: a survivor may fail first on the other
// survivor's abort ("rank 0 gave up"), but a live rank is never among the
// dead, and both list the killed one (a broken communicator also looks at
// what waits on its connections).
TEST(ThreeRanks, AKilledRankIsDeadAndTheSurvivorsAreNot) {
    CommTempDir dir;
    const std::string url = "file://" + dir.path().string();
    const pid_t pid = fork_rank(url, 2, 3, End::killed);
    ASSERT_GT(pid, 0);
    std::latch ready(3);
    std::latch killed(1);
    std::vector<std::vector<int>> dead(2);
    std::vector<std::string> errors(2);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 2; ++rank) {
        threads.emplace_back([&, rank] {
            try {
                Communicator comm(rank_options(url, rank, 3));
                comm.barrier();
                ready.count_down();
                killed.wait();
                std::vector<float> data(1 << 16, 1.0f);
                try {
                    comm.allreduce(std::span<float>(data), ReduceOp::sum, {Algorithm::ring, {}});
                    errors[rank] = "the allreduce succeeded without rank 2";
                } catch (const Error&) {
                }
                dead[rank] = comm.dead_ranks();
            } catch (const Error& e) {
                errors[rank] = e.what();
                ready.count_down();
            }
        });
    }
    ready.arrive_and_wait();
    reap(pid, true);
    std::this_thread::sleep_for(200ms);  // both ends of stream reach the survivors first
    killed.count_down();
    for (auto& t : threads) t.join();
    for (int rank = 0; rank < 2; ++rank) {
        EXPECT_EQ(errors[rank], "") << "rank " << rank;
        for (const int r : dead[rank]) EXPECT_EQ(r, 2) << "rank " << rank << " lists live rank " << r << " as dead";
    }
    EXPECT_EQ(dead[0], std::vector<int>{2});
    EXPECT_EQ(dead[1], std::vector<int>{2});
}

// A rank that aborts is alive: after every rank failed on its abort (and
// broke, closing what it had), nobody lists anybody, the aborting rank
// included.
TEST(GaveUp, NoRankIsDeadAfterAnAbort) {
    World world;
    world.shm_size = 0;
    world.direct_copy = false;
    std::latch failed(3);
    std::vector<std::vector<int>> dead(3);
    const auto outcomes = spawn_comms(3, world, [&](Communicator& comm) {
        std::vector<float> data(1000, 1.0f);
        // The abort may reach a rank still finishing the barrier (an abort
        // overtakes what is queued): then the barrier fails. Either way
        // every rank reaches the latch.
        try {
            comm.barrier();
            if (comm.rank() == 0) comm.abort("stopping on purpose");
            comm.allreduce(std::span<float>(data));
        } catch (const Error&) {
        }
        failed.arrive_and_wait();
        std::this_thread::sleep_for(100ms);
        dead[static_cast<std::size_t>(comm.rank())] = comm.dead_ranks();
    });
    expect_ok(outcomes);
    for (std::size_t r = 0; r < 3; ++r) EXPECT_TRUE(dead[r].empty()) << "rank " << r << " lists " << dead[r].size();
}

}  // namespace
}  // namespace cohort::test
