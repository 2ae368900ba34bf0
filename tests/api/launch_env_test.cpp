// read_launch_env and communicator_from_env over environments given as
// maps: every launcher, the precedence between them, the store, and the
// message of each malformed or inconsistent value.
#include "support.hpp"

#include <cohort/launch_env.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <span>
#include <string>

#include <stdlib.h>  // setenv, unistd

namespace cohort {
namespace {

using test::error_message;
using ::testing::Contains;
using ::testing::HasSubstr;
using Env = std::map<std::string, std::string>;

std::string read_error(const Env& env) {
    return error_message(Errc::invalid_argument, [&] { read_launch_env(env); });
}

TEST(LaunchEnv, NothingSetIsOneProcessWithSourceNone) {
    const LaunchEnv e = read_launch_env(Env{{"HOME", "/root"}, {"SLURM_NTASKS", "8"}});
    EXPECT_EQ(e.source, "none");
    EXPECT_EQ(e.rank, 0);
    EXPECT_EQ(e.world_size, 1);
    EXPECT_EQ(e.local_rank, 0);
    EXPECT_EQ(e.local_world_size, 1);
    EXPECT_EQ(e.node_rank, 0);
    EXPECT_EQ(e.store_url, "");
    ASSERT_EQ(e.notes.size(), 1u);
    EXPECT_THAT(e.notes[0], HasSubstr("no launcher variables found"));
    EXPECT_THAT(e.notes[0], HasSubstr("OMPI_COMM_WORLD_RANK"));
}

TEST(LaunchEnv, Cohort) {
    const LaunchEnv e = read_launch_env(Env{{"COHORT_RANK", "5"},
                                            {"COHORT_WORLD_SIZE", "8"},
                                            {"COHORT_LOCAL_RANK", "1"},
                                            {"COHORT_LOCAL_WORLD_SIZE", "4"},
                                            {"COHORT_NODE_RANK", "1"},
                                            {"COHORT_STORE", "file:///shared/rdzv"}});
    EXPECT_EQ(e.source, "cohort");
    EXPECT_EQ(e.rank, 5);
    EXPECT_EQ(e.world_size, 8);
    EXPECT_EQ(e.local_rank, 1);
    EXPECT_EQ(e.local_world_size, 4);
    EXPECT_EQ(e.node_rank, 1);
    EXPECT_EQ(e.store_url, "file:///shared/rdzv");
    EXPECT_THAT(e.notes, Contains("rank 5 from COHORT_RANK"));
    EXPECT_THAT(e.notes, Contains("store file:///shared/rdzv from COHORT_STORE"));
}

TEST(LaunchEnv, CohortWithoutLocalFieldsLeavesThemUnknown) {
    const LaunchEnv e = read_launch_env(Env{{"COHORT_RANK", "2"}, {"COHORT_WORLD_SIZE", "4"}});
    EXPECT_EQ(e.local_rank, -1);
    EXPECT_EQ(e.local_world_size, -1);
    EXPECT_EQ(e.node_rank, -1);
    // A world of one has nothing to be unsure of.
    const LaunchEnv one = read_launch_env(Env{{"COHORT_RANK", "0"}, {"COHORT_WORLD_SIZE", "1"}});
    EXPECT_EQ(one.local_rank, 0);
    EXPECT_EQ(one.local_world_size, 1);
    EXPECT_EQ(one.node_rank, 0);
}

TEST(LaunchEnv, Torchrun) {
    const LaunchEnv e = read_launch_env(Env{{"RANK", "3"},
                                            {"WORLD_SIZE", "4"},
                                            {"LOCAL_RANK", "1"},
                                            {"LOCAL_WORLD_SIZE", "2"},
                                            {"GROUP_RANK", "1"},
                                            {"MASTER_ADDR", "node-0"},
                                            {"MASTER_PORT", "29500"}});
    EXPECT_EQ(e.source, "torchrun");
    EXPECT_EQ(e.rank, 3);
    EXPECT_EQ(e.world_size, 4);
    EXPECT_EQ(e.local_rank, 1);
    EXPECT_EQ(e.local_world_size, 2);
    EXPECT_EQ(e.node_rank, 1);
    EXPECT_EQ(e.store_url, "tcp://node-0:29500");
    EXPECT_THAT(e.notes, Contains("store tcp://node-0:29500 from MASTER_ADDR/MASTER_PORT"));
}

TEST(LaunchEnv, MasterAddrIpv6IsBracketed) {
    const Env env{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "fe80::1"}, {"MASTER_PORT", "1234"}};
    EXPECT_EQ(read_launch_env(env).store_url, "tcp://[fe80::1]:1234");
    const Env bracketed{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "[::1]"}, {"MASTER_PORT", "1234"}};
    EXPECT_EQ(read_launch_env(bracketed).store_url, "tcp://[::1]:1234");
}

TEST(LaunchEnv, TorchrunAgentStoreLeavesANote) {
    const LaunchEnv e = read_launch_env(Env{{"RANK", "0"},
                                            {"WORLD_SIZE", "2"},
                                            {"MASTER_ADDR", "h"},
                                            {"MASTER_PORT", "29500"},
                                            {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
    EXPECT_EQ(e.store_url, "tcp://h:29500");
    EXPECT_THAT(e.notes, Contains(HasSubstr("set COHORT_STORE to another port")));
}

TEST(LaunchEnv, OpenMpiHasNoNodeRank) {
    const LaunchEnv e = read_launch_env(Env{{"OMPI_COMM_WORLD_RANK", "2"},
                                            {"OMPI_COMM_WORLD_SIZE", "3"},
                                            {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
                                            // a per-node process index, not a node index
                                            {"OMPI_COMM_WORLD_NODE_RANK", "2"}});
    EXPECT_EQ(e.source, "openmpi");
    EXPECT_EQ(e.rank, 2);
    EXPECT_EQ(e.world_size, 3);
    EXPECT_EQ(e.local_rank, 2);
    EXPECT_EQ(e.local_world_size, 3);
    EXPECT_EQ(e.node_rank, -1);
    EXPECT_EQ(e.store_url, "");
    EXPECT_THAT(e.notes, Contains("node rank unknown: openmpi gives no node index"));
}

TEST(LaunchEnv, Slurm) {
    const Env base{{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "7"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "2"}};
    Env env = base;
    env["SLURM_NTASKS_PER_NODE"] = "2";
    env["SLURM_TASKS_PER_NODE"] = "9";  // SLURM_NTASKS_PER_NODE comes first
    LaunchEnv e = read_launch_env(env);
    EXPECT_EQ(e.source, "slurm");
    EXPECT_EQ(e.rank, 5);
    EXPECT_EQ(e.world_size, 7);
    EXPECT_EQ(e.local_rank, 1);
    EXPECT_EQ(e.node_rank, 2);
    EXPECT_EQ(e.local_world_size, 2);
    EXPECT_THAT(e.notes, Contains("local world size 2 from SLURM_NTASKS_PER_NODE"));

    // SLURM_TASKS_PER_NODE: this node's entry of "2(x2),3".
    env = base;
    env["SLURM_TASKS_PER_NODE"] = "2(x2),3";
    e = read_launch_env(env);
    EXPECT_EQ(e.local_world_size, 3);
    env["SLURM_NODEID"] = "1";
    EXPECT_EQ(read_launch_env(env).local_world_size, 2);
    env["SLURM_TASKS_PER_NODE"] = "4";  // past the list: the first entry
    env["SLURM_NODEID"] = "3";
    EXPECT_EQ(read_launch_env(env).local_world_size, 4);
}

TEST(LaunchEnv, PrecedenceCohortTorchrunOpenMpiSlurm) {
    Env env{{"COHORT_RANK", "0"},          {"COHORT_WORLD_SIZE", "2"},    {"RANK", "1"},         {"WORLD_SIZE", "3"},
            {"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "5"}};
    LaunchEnv e = read_launch_env(env);
    EXPECT_EQ(e.source, "cohort");
    EXPECT_EQ(e.world_size, 2);
    EXPECT_THAT(e.notes, Contains("ignored RANK=1 (torchrun): COHORT_RANK comes first"));
    EXPECT_THAT(e.notes, Contains("ignored SLURM_PROCID=3 (slurm): COHORT_RANK comes first"));

    env.erase("COHORT_RANK");
    env.erase("COHORT_WORLD_SIZE");
    e = read_launch_env(env);
    EXPECT_EQ(e.source, "torchrun");
    EXPECT_EQ(e.world_size, 3);

    env.erase("RANK");
    env.erase("WORLD_SIZE");
    e = read_launch_env(env);
    EXPECT_EQ(e.source, "openmpi");
    EXPECT_EQ(e.world_size, 4);

    env.erase("OMPI_COMM_WORLD_RANK");
    env.erase("OMPI_COMM_WORLD_SIZE");
    e = read_launch_env(env);
    EXPECT_EQ(e.source, "slurm");
    EXPECT_EQ(e.world_size, 5);
}

TEST(LaunchEnv, CohortStoreWinsWhateverTheSource) {
    const LaunchEnv e = read_launch_env(Env{{"OMPI_COMM_WORLD_RANK", "0"},
                                            {"OMPI_COMM_WORLD_SIZE", "2"},
                                            {"COHORT_STORE", "tcp://a:1"},
                                            {"MASTER_ADDR", "b"},
                                            {"MASTER_PORT", "2"}});
    EXPECT_EQ(e.source, "openmpi");
    EXPECT_EQ(e.store_url, "tcp://a:1");
    EXPECT_THAT(e.notes, Contains("ignored MASTER_ADDR/MASTER_PORT: COHORT_STORE comes first"));
    // MASTER_* serve any source, not only torchrun.
    const LaunchEnv s =
        read_launch_env(Env{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"MASTER_ADDR", "b"}, {"MASTER_PORT", "2"}});
    EXPECT_EQ(s.store_url, "tcp://b:2");
}

TEST(LaunchEnv, EmptyVariablesCountAsUnset) {
    const LaunchEnv e = read_launch_env(
        Env{{"COHORT_RANK", ""}, {"COHORT_WORLD_SIZE", ""}, {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"COHORT_STORE", ""}});
    EXPECT_EQ(e.source, "torchrun");
    EXPECT_EQ(e.store_url, "");
}

TEST(LaunchEnvErrors, NotANumber) {
    EXPECT_EQ(read_error(Env{{"RANK", "one"}, {"WORLD_SIZE", "2"}}),
              "RANK='one' is not a number: it must be a non-negative integer");
    EXPECT_THAT(read_error(Env{{"COHORT_RANK", "0"}, {"COHORT_WORLD_SIZE", "2 "}}),
                HasSubstr("COHORT_WORLD_SIZE='2 '"));
    EXPECT_THAT(read_error(Env{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "x"}}),
                HasSubstr("SLURM_LOCALID='x' is not a number"));
    EXPECT_THAT(read_error(Env{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "http"}}),
                HasSubstr("MASTER_PORT='http' is not a number"));
}

TEST(LaunchEnvErrors, NegativeAndTooLarge) {
    EXPECT_EQ(read_error(Env{{"OMPI_COMM_WORLD_RANK", "-1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}),
              "OMPI_COMM_WORLD_RANK=-1 is negative: it must be 0 or more");
    EXPECT_THAT(read_error(Env{{"RANK", "0"}, {"WORLD_SIZE", "99999999999"}}),
                HasSubstr("WORLD_SIZE=99999999999 is too large"));
    EXPECT_EQ(read_error(Env{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}),
              "MASTER_PORT=70000 is outside 1..65535");
}

TEST(LaunchEnvErrors, RankNotBelowWorldSize) {
    EXPECT_EQ(read_error(Env{{"RANK", "4"}, {"WORLD_SIZE", "4"}}), "RANK=4 is not below WORLD_SIZE=4 (ranks run 0..3)");
    EXPECT_EQ(read_error(Env{{"COHORT_RANK", "0"}, {"COHORT_WORLD_SIZE", "0"}}),
              "COHORT_WORLD_SIZE=0: a world has at least one rank");
}

TEST(LaunchEnvErrors, InconsistentLocalFields) {
    const Env base{{"COHORT_RANK", "1"}, {"COHORT_WORLD_SIZE", "4"}};
    Env env = base;
    env["COHORT_LOCAL_RANK"] = "2";
    env["COHORT_LOCAL_WORLD_SIZE"] = "2";
    EXPECT_EQ(read_error(env), "COHORT_LOCAL_RANK=2 is not below COHORT_LOCAL_WORLD_SIZE=2");
    env = base;
    env["COHORT_LOCAL_WORLD_SIZE"] = "5";
    EXPECT_EQ(read_error(env), "COHORT_LOCAL_WORLD_SIZE=5 is outside 1..4 (COHORT_WORLD_SIZE=4)");
    env = base;
    env["COHORT_LOCAL_RANK"] = "4";
    EXPECT_EQ(read_error(env), "COHORT_LOCAL_RANK=4 is not below COHORT_WORLD_SIZE=4");
    env = base;
    env["COHORT_NODE_RANK"] = "4";
    EXPECT_THAT(read_error(env), HasSubstr("COHORT_NODE_RANK=4 is not below COHORT_WORLD_SIZE=4"));
    EXPECT_EQ(read_error(Env{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_TASKS_PER_NODE", "2(x"}}),
              "SLURM_TASKS_PER_NODE='2(x' is malformed: expected counts like '2(x3),1'");
}

TEST(LaunchEnvErrors, HalfAPair) {
    EXPECT_EQ(read_error(Env{{"RANK", "1"}}),
              "RANK=1 is set but WORLD_SIZE is not: torchrun sets both; set WORLD_SIZE too or unset RANK");
    EXPECT_EQ(read_error(Env{{"COHORT_WORLD_SIZE", "2"}}),
              "COHORT_WORLD_SIZE=2 is set but COHORT_RANK is not: cohort sets both; set COHORT_RANK too or unset "
              "COHORT_WORLD_SIZE");
    EXPECT_THAT(read_error(Env{{"SLURM_PROCID", "1"}}), HasSubstr("SLURM_PROCID=1 is set but SLURM_NTASKS is not"));
    EXPECT_EQ(read_error(Env{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}),
              "MASTER_ADDR=h is set but MASTER_PORT is not: set both, or COHORT_STORE");
    EXPECT_EQ(read_error(Env{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}),
              "MASTER_PORT=1 is set but MASTER_ADDR is not: set both, or COHORT_STORE");
}

TEST(CommunicatorFromEnv, NothingSetIsNotFound) {
    const std::string m = error_message(Errc::not_found, [] { communicator_from_env({}, read_launch_env(Env{})); });
    EXPECT_THAT(m, HasSubstr("no launcher variables found"));
    EXPECT_THAT(m, HasSubstr("COHORT_RANK/COHORT_WORLD_SIZE, RANK/WORLD_SIZE (torchrun)"));
    EXPECT_THAT(m, HasSubstr("COHORT_RANK=0 COHORT_WORLD_SIZE=1"));
    // Unless the options give rank and size themselves.
    CommOptions base;
    base.rank = 0;
    base.size = 1;
    const Communicator comm = communicator_from_env(base, read_launch_env(Env{}));
    EXPECT_EQ(comm.size(), 1);
}

TEST(CommunicatorFromEnv, NoStoreForMoreThanOneRank) {
    const std::string m = error_message(Errc::invalid_argument, [] {
        communicator_from_env({}, read_launch_env(Env{{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "3"}}));
    });
    EXPECT_EQ(m,
              "rank 1 of 3 (from openmpi) needs a store where the ranks meet: set COHORT_STORE=tcp://HOST:PORT "
              "(rank 0's host listens there) or COHORT_STORE=file:///SHARED/DIR, or MASTER_ADDR and MASTER_PORT");
}

TEST(CommunicatorFromEnv, SingleRankNeedsNoStore) {
    Communicator comm = communicator_from_env({}, read_launch_env(Env{{"RANK", "0"}, {"WORLD_SIZE", "1"}}));
    EXPECT_EQ(comm.rank(), 0);
    EXPECT_EQ(comm.size(), 1);
    int32_t x = 7;
    comm.allreduce(std::span<int32_t>(&x, 1));
    EXPECT_EQ(x, 7);
}

TEST(CommunicatorFromEnv, OptionsWinOverTheEnvironment) {
    // The options' size 1 wins over WORLD_SIZE=4, so no store is needed.
    CommOptions base;
    base.rank = 0;
    base.size = 1;
    const Communicator comm = communicator_from_env(base, read_launch_env(Env{{"RANK", "3"}, {"WORLD_SIZE", "4"}}));
    EXPECT_EQ(comm.rank(), 0);
    EXPECT_EQ(comm.size(), 1);
}

TEST(CommunicatorFromEnv, ProcessEnvironment) {
    // Only variables no test runner sets; restored afterwards.
    ASSERT_EQ(::setenv("COHORT_RANK", "0", 1), 0);
    ASSERT_EQ(::setenv("COHORT_WORLD_SIZE", "1", 1), 0);
    const LaunchEnv e = read_launch_env();
    Communicator comm = communicator_from_env();
    ::unsetenv("COHORT_RANK");
    ::unsetenv("COHORT_WORLD_SIZE");
    EXPECT_EQ(e.source, "cohort");
    EXPECT_EQ(comm.size(), 1);
}

}  // namespace
}  // namespace cohort
