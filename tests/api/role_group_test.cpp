// Role groups (cohort/role_group.hpp): the job each role maps to, and
// Membership in a role against a coordinator hosted in the test: workers
// and an evaluator form worlds of their own, each all-reduces in its own,
// and the evaluator's failure and its replacement never open a round for
// the workers.
#include "comm_support.hpp"

#include <cohort/coordinator.hpp>
#include <cohort/coordinator_client.hpp>
#include <cohort/membership.hpp>
#include <cohort/role_group.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;

TEST(RoleJob, TheDefaultRoleIsTheJobAndEveryOtherAJobOfItsOwn) {
    EXPECT_EQ(role_job("train", ""), "train");
    EXPECT_EQ(role_job("train", "default"), "train");
    EXPECT_EQ(role_job("train", "worker"), "train");
    EXPECT_EQ(role_job("train", "evaluator"), "train.evaluator");
    EXPECT_EQ(role_job("train", "ps"), "train.ps");
    EXPECT_EQ(role_job("train", "eval_2-b"), "train.eval_2-b");
    EXPECT_TRUE(is_default_role(""));
    EXPECT_TRUE(is_default_role("worker"));
    EXPECT_FALSE(is_default_role("evaluator"));
    EXPECT_FALSE(is_default_role("Worker"));
    EXPECT_EQ(role_name(""), "default");
    EXPECT_EQ(role_name("evaluator"), "evaluator");
}

TEST(RoleJob, BadRoleNamesAreRefusedByName) {
    for (const std::string& bad : std::vector<std::string>{"a.b", "sp ace", "x/y", std::string(65, 'r'), "t\xc3\xa9"}) {
        const std::string e = error_message(Errc::invalid_argument, [&] { role_job("train", bad); });
        EXPECT_THAT(e, HasSubstr("role: '" + bad + "' is not a role name")) << e;
        EXPECT_THAT(e, HasSubstr("letters, digits, '_' or '-'"));
    }
    EXPECT_THAT(error_message(Errc::invalid_argument, [] { check_role_name("", "--role"); }),
                HasSubstr("--role: '' is not a role name"));
    EXPECT_NO_THROW(check_role_name(std::string(64, 'r'), "x"));
}

CoordinatorOptions server_options() {
    CoordinatorOptions o;
    o.token.clear();
    o.tick = 20ms;
    return o;
}

CoordinatorClientOptions client_options() {
    CoordinatorClientOptions o;
    o.token.clear();
    o.request_timeout = 5s;
    o.retry_deadline = 5s;
    o.initial_backoff = 20ms;
    o.max_backoff = 200ms;
    return o;
}

JobSettings job_of(uint32_t nodes) {
    JobSettings s;
    s.min_nodes = nodes;
    s.max_nodes = nodes;
    s.last_call = 0.0;
    s.heartbeat_interval = 0.1;
    s.failure_timeout = 1.0;
    return s;
}

std::string fmt_id(int i) {
    return "m" + std::to_string(i);
}

MembershipOptions in_role(const std::string& url, const std::string& role, const std::string& id) {
    MembershipOptions o;
    o.coordinator = url;
    o.job = "train";
    o.role = role;
    o.node.id = id;
    o.node.host = "host-" + id;
    o.client = client_options();
    o.comm.address = "127.0.0.1";
    o.comm.timeout = 10s;
    o.comm.connect_timeout = 10s;
    return o;
}

TEST(MembershipRole, EachRoleIsAWorldOfItsOwnAndAnEvaluatorsFailureLeavesTheWorkersAlone) {
    Coordinator server(server_options());
    CoordinatorClient admin(server.url(), client_options());
    admin.create_job("train", job_of(2));
    admin.create_job("train.evaluator", job_of(1));

    // Two workers (the default role, one by name) and an evaluator, with
    // one member id in both roles: the jobs keep them apart.
    std::vector<Membership> workers;
    workers.emplace_back(in_role(server.url(), "", "n0"));
    workers.emplace_back(in_role(server.url(), "worker", "n1"));
    std::optional<Membership> evaluator(in_role(server.url(), "evaluator", "n0"));
    EXPECT_EQ(workers[0].job(), "train");
    EXPECT_EQ(workers[0].role(), "default");
    EXPECT_EQ(workers[1].job(), "train");
    EXPECT_EQ(workers[1].role(), "worker");
    EXPECT_EQ(evaluator->job(), "train.evaluator");
    EXPECT_EQ(evaluator->role(), "evaluator");

    std::vector<MemberWorld> worlds(3);
    expect_ok(spawn(3, [&](int i, int) {
        worlds[static_cast<std::size_t>(i)] =
            i < 2 ? workers[static_cast<std::size_t>(i)].next_world(10s) : evaluator->next_world(10s);
    }));
    EXPECT_EQ(worlds[0].world_size, 2u);
    EXPECT_EQ(worlds[1].world_size, 2u);
    EXPECT_EQ(worlds[0].generation, worlds[1].generation);
    EXPECT_EQ((std::set<uint32_t>{worlds[0].rank, worlds[1].rank}), (std::set<uint32_t>{0, 1}));
    EXPECT_EQ(worlds[2].world_size, 1u);
    EXPECT_EQ(worlds[2].rank, 0u);
    const uint64_t workers_generation = worlds[0].generation;
    // The evaluator's descriptor says its role; the workers' job has only workers.
    EXPECT_THAT(admin.job_state("train.evaluator"), HasSubstr("\"role\":\"evaluator\""));
    EXPECT_THAT(admin.job_state("train"), ::testing::Not(HasSubstr("evaluator")));

    // Each world's collectives on its own store: the workers sum over 2,
    // the evaluator over itself alone.
    expect_ok(spawn(3, [&](int i, int) {
        Communicator comm = i < 2 ? workers[static_cast<std::size_t>(i)].communicator() : evaluator->communicator();
        std::vector<int32_t> data = {comm.rank() + 1};
        comm.allreduce(std::span<int32_t>(data));
        const int32_t expected = i < 2 ? 3 : 1;
        if (data[0] != expected) throw std::runtime_error("wrong all-reduce result in role " + std::to_string(i));
    }));

    // The evaluator dies (no leave: its heartbeats stop) and the coordinator
    // fails it after failure_timeout; the workers hear of no round.
    evaluator.reset();
    std::this_thread::sleep_for(1800ms);
    EXPECT_THAT(admin.job_state("train.evaluator"), HasSubstr("failed"));
    EXPECT_FALSE(workers[0].round_pending());
    EXPECT_FALSE(workers[1].round_pending());

    // Its replacement joins the evaluators' next round, still alone with them.
    Membership replacement(in_role(server.url(), "evaluator", "n0.1"));
    const MemberWorld again = replacement.next_world(10s);
    EXPECT_GT(again.generation, worlds[2].generation);
    EXPECT_EQ(again.world_size, 1u);
    std::this_thread::sleep_for(300ms);
    EXPECT_FALSE(workers[0].round_pending());
    EXPECT_FALSE(workers[1].round_pending());
    EXPECT_EQ(workers[0].client().world("train", "n0", false).generation, workers_generation);
    EXPECT_EQ(workers[1].next_world(1s).generation, workers_generation);
}

// Each role's world is ranked by the topology among its own members: the
// ranks of one host are contiguous, local ranks count that host's members
// of the role only.
TEST(MembershipRole, RanksAreTopologyAwareWithinEachRole) {
    Coordinator server(server_options());
    CoordinatorClient admin(server.url(), client_options());
    admin.create_job("train", job_of(4));
    admin.create_job("train.evaluator", job_of(4));
    std::vector<Membership> members;
    for (int i = 0; i < 8; ++i) {
        MembershipOptions o = in_role(server.url(), i < 4 ? "worker" : "evaluator", fmt_id(i));
        o.node.host = (i % 2 == 0) ? "host-a" : "host-b";  // each role's members alternate between two hosts
        members.emplace_back(std::move(o));
    }
    std::vector<MemberWorld> worlds(8);
    expect_ok(spawn(8, [&](int i, int) {
        worlds[static_cast<std::size_t>(i)] = members[static_cast<std::size_t>(i)].next_world(20s);
    }));
    for (int role = 0; role < 2; ++role) {
        std::vector<std::string> host_by_rank(4);
        for (int i = role * 4; i < role * 4 + 4; ++i) {
            const MemberWorld& w = worlds[static_cast<std::size_t>(i)];
            ASSERT_EQ(w.world_size, 4u);
            EXPECT_EQ(w.local_world_size, 2u);
            EXPECT_EQ(w.local_rank, w.rank % 2) << "member " << i;
            EXPECT_EQ(w.node_rank, w.rank / 2) << "member " << i;
            host_by_rank[w.rank] = (i % 2 == 0) ? "host-a" : "host-b";
        }
        EXPECT_EQ(host_by_rank[0], host_by_rank[1]) << "role " << role;
        EXPECT_EQ(host_by_rank[2], host_by_rank[3]) << "role " << role;
        EXPECT_NE(host_by_rank[1], host_by_rank[2]) << "role " << role;
    }
}

TEST(MembershipRole, ABadRoleIsRefusedWhenTheMembershipIsMade) {
    const std::string e =
        error_message(Errc::invalid_argument, [] { Membership m(in_role("http://127.0.0.1:9", "eval.uator", "x")); });
    EXPECT_THAT(e, HasSubstr("Membership: role: 'eval.uator' is not a role name"));
}

}  // namespace
}  // namespace cohort::test
