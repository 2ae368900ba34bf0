// Membership against a coordinator hosted in the test: two members form a
// world and all-reduce through its store; a leave opens a round the other
// member hears of and both join; metrics reach the job's state; a launcher's
// join is taken over; heartbeats outlive a coordinator restart; and the
// errors of options_from_env name the variable.
#include "comm_support.hpp"

#include <cohort/coordinator.hpp>
#include <cohort/coordinator_client.hpp>
#include <cohort/membership.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;

CoordinatorOptions server_options(uint16_t port = 0, std::filesystem::path data_dir = {}) {
    CoordinatorOptions o;
    o.token.clear();
    o.port = port;
    o.data_dir = std::move(data_dir);
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

// min_nodes = max_nodes = `nodes`: a round closes as soon as they wait.
JobSettings job_of(uint32_t nodes) {
    JobSettings s;
    s.min_nodes = nodes;
    s.max_nodes = nodes;
    s.last_call = 0.0;
    s.heartbeat_interval = 0.1;
    s.failure_timeout = 1.0;
    return s;
}

MembershipOptions member_options(const std::string& url, const std::string& job, const std::string& id) {
    MembershipOptions o;
    o.coordinator = url;
    o.job = job;
    o.node.id = id;
    o.node.host = "host-" + id;
    o.client = client_options();
    o.comm.address = "127.0.0.1";
    o.comm.timeout = 10s;
    o.comm.connect_timeout = 10s;
    return o;
}

// The member's entry in the job's state JSON (up to the next member's).
std::string member_entry(const std::string& state, const std::string& id) {
    const auto start = state.find("{\"id\":\"" + id + "\"");
    if (start == std::string::npos) return {};
    const auto end = state.find("{\"id\":", start + 1);
    return state.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// The number after "field": in `text`, or -1.
double number_after(const std::string& text, const std::string& field) {
    const auto at = text.find("\"" + field + "\":");
    if (at == std::string::npos) return -1;
    return std::strtod(text.c_str() + at + field.size() + 3, nullptr);
}

// Polls `done` until it holds or `limit` passes.
bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit = 5s) {
    const auto start = Clock::now();
    while (!done()) {
        if (since(start) > limit) return false;
        std::this_thread::sleep_for(20ms);
    }
    return true;
}

// Both members wait for their next world at once; returns them by member.
std::vector<MemberWorld> next_worlds(std::vector<Membership>& members) {
    std::vector<MemberWorld> worlds(members.size());
    expect_ok(spawn(static_cast<int>(members.size()), [&](int i, int) {
        worlds[static_cast<std::size_t>(i)] = members[static_cast<std::size_t>(i)].next_world(10s);
    }));
    return worlds;
}

class MembershipTest : public ::testing::Test {
protected:
    Coordinator server_{server_options()};
    CoordinatorClient admin_{server_.url(), client_options()};
};

TEST_F(MembershipTest, TwoMembersFormAWorldAllReduceAndRejoinAfterALeave) {
    admin_.create_job("train", job_of(2));
    std::vector<Membership> members;
    members.emplace_back(member_options(server_.url(), "train", "a"));
    members.emplace_back(member_options(server_.url(), "train", "b"));
    EXPECT_EQ(members[0].member(), "a");
    EXPECT_EQ(members[1].job(), "train");
    EXPECT_FALSE(members[0].world().active);
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { members[0].communicator(); }), HasSubstr("next_world"));

    const std::vector<MemberWorld> first = next_worlds(members);
    std::set<uint32_t> ranks;
    for (const MemberWorld& w : first) {
        EXPECT_TRUE(w.active);
        EXPECT_EQ(w.world_size, 2u);
        EXPECT_EQ(w.generation, first[0].generation);
        ranks.insert(w.rank);
    }
    EXPECT_EQ(ranks, (std::set<uint32_t>{0, 1}));
    EXPECT_EQ(members[1].world().rank, first[1].rank);
    EXPECT_FALSE(members[0].round_pending());
    // Called again with no round pending: the same world.
    EXPECT_EQ(members[0].next_world(1s).generation, first[0].generation);

    expect_ok(spawn(2, [&](int i, int) {
        Communicator comm = members[static_cast<std::size_t>(i)].communicator();
        std::vector<float> data = {static_cast<float>(comm.rank()) + 1.0f, 0.5f, -2.0f};
        comm.allreduce(std::span<float>(data));
        if (data != std::vector<float>{3.0f, 1.0f, -4.0f}) throw std::runtime_error("wrong all-reduce result");
    }));

    // Heartbeats keep both members in the world well past failure_timeout.
    std::this_thread::sleep_for(1500ms);
    EXPECT_FALSE(members[0].round_pending());
    EXPECT_EQ(member_entry(admin_.job_state("train"), "a").find("\"state\":\"active\"") != std::string::npos, true);

    members[1].leave();
    members[1].leave();  // idempotent
    EXPECT_TRUE(eventually([&] { return members[0].round_pending(); }));
    EXPECT_FALSE(members[1].round_pending());

    // Both join the new round: a after round_pending, b after its leave.
    const std::vector<MemberWorld> second = next_worlds(members);
    for (const MemberWorld& w : second) {
        EXPECT_TRUE(w.active);
        EXPECT_EQ(w.world_size, 2u);
        EXPECT_GT(w.generation, first[0].generation);
    }
    EXPECT_EQ(second[0].generation, second[1].generation);
    EXPECT_FALSE(members[0].round_pending());
    expect_ok(spawn(2, [&](int i, int) {
        Communicator comm = members[static_cast<std::size_t>(i)].communicator();
        std::vector<int32_t> data = {comm.rank() * 10};
        comm.allreduce(std::span<int32_t>(data));
        if (data[0] != 10) throw std::runtime_error("wrong all-reduce result in the second world");
    }));
}

TEST_F(MembershipTest, MetricsReachTheJobState) {
    admin_.create_job("metrics", job_of(1));
    Membership m(member_options(server_.url(), "metrics", "solo"));
    const MemberWorld w = m.next_world(5s);
    ASSERT_TRUE(w.active);
    EXPECT_EQ(w.rank, 0u);
    for (uint64_t step = 1; step <= 3; ++step) {
        m.record_step(
            {.step = step, .step_time = 0.25, .samples_per_sec = 128, .data_wait = 0.01, .collective_wait = -1});
    }
    m.set_collective(17, true);
    m.set_gpu_json(R"([{"index": 0, "utilization": 93}])");
    std::string entry;
    EXPECT_TRUE(eventually([&] {
        entry = member_entry(admin_.job_state("metrics"), "solo");
        return number_after(entry, "step") == 3 && entry.find("\"utilization\":93") != std::string::npos;
    })) << entry;
    EXPECT_EQ(number_after(entry, "collective_seq"), 17);
    EXPECT_THAT(entry, HasSubstr("\"in_collective\":true"));
    EXPECT_EQ(number_after(entry, "data_wait"), 0.01);
    EXPECT_EQ(number_after(entry, "step_time"), 0.25);
    EXPECT_EQ(number_after(entry, "samples_per_sec"), 128);
    EXPECT_THAT(entry, HasSubstr("\"utilization\":93"));

    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { m.set_gpu_json("{not json"); }), HasSubstr("not JSON"));
    EXPECT_THAT(
        error_message(Errc::invalid_argument,
                      [&] { m.record_step({.step = 4, .step_time = std::numeric_limits<double>::quiet_NaN()}); }),
        HasSubstr("step 4"));
    m.leave();
}

TEST_F(MembershipTest, ShardsAreLeasedToTheMember) {
    admin_.create_job("shards", job_of(1));
    admin_.register_dataset("shards", R"({"shards": [{"id": "s0"}, {"id": "s1"}]})");
    Membership m(member_options(server_.url(), "shards", "w"));
    m.next_world(5s);
    std::set<std::string> seen;
    for (;;) {
        const ShardLease lease = m.next_shard();
        if (!lease.granted) {
            EXPECT_TRUE(lease.finished);
            break;
        }
        seen.insert(lease.shard_id);
        EXPECT_TRUE(m.shard_done(lease.lease).counted);
    }
    EXPECT_EQ(seen, (std::set<std::string>{"s0", "s1"}));
}

TEST_F(MembershipTest, ALaunchersJoinIsTakenOver) {
    admin_.create_job("launched", job_of(1));
    MemberDescriptor node;
    node.id = "worker-0";
    node.host = "host-worker-0";
    const JoinReply joined = admin_.join("launched", node);
    ASSERT_EQ(joined.state, "active");

    MembershipOptions o = member_options(server_.url(), "launched", "worker-0");
    o.joined_generation = joined.generation;
    Membership m(o);
    const MemberWorld w = m.next_world(5s);
    // Not joined again: that would have opened a round and a new generation.
    EXPECT_TRUE(w.active);
    EXPECT_EQ(w.generation, joined.generation);
    std::this_thread::sleep_for(300ms);
    EXPECT_FALSE(m.round_pending());
    EXPECT_EQ(admin_.world("launched", "worker-0", false).generation, joined.generation);
}

// Two members with communicators; b then stops as under SIGSTOP: no more
// heartbeats, its sockets open and silent. a waits in an all-reduce.
// Returns how a's all-reduce ended (the message; "" when it succeeded) and
// how long it took.
std::pair<std::string, std::chrono::milliseconds> wait_for_a_stopped_peer(Coordinator& server, const std::string& job,
                                                                          bool abort_stale,
                                                                          std::chrono::milliseconds timeout) {
    std::vector<Membership> members;
    for (const char* id : {"a", "b"}) {
        MembershipOptions o = member_options(server.url(), job, id);
        o.abort_stale_collectives = abort_stale;
        members.emplace_back(o);
    }
    const std::vector<MemberWorld> worlds = next_worlds(members);
    std::vector<std::optional<Communicator>> comms(2);
    expect_ok(spawn(2, [&](int i, int) {
        comms[static_cast<std::size_t>(i)].emplace(members[static_cast<std::size_t>(i)].communicator());
    }));
    members.pop_back();  // b's heartbeats stop; it does not leave

    members[0].set_collective(1, true);
    const auto start = Clock::now();
    std::string message;
    try {
        int32_t v = 1;
        comms[0]->allreduce(&v, 1, DataType::int32, ReduceOp::sum, {Algorithm::automatic, timeout});
    } catch (const Error& e) {
        message = std::string(errc_name(e.code())) + ": " + e.what();
    }
    return {message, since(start)};
}

// The coordinator declares b failed after failure_timeout (1 s) and opens
// a round; a's Membership hears of it and, a being in one collective for
// longer than a heartbeat interval, aborts that world's communicator: the
// all-reduce ends then, not at its 30 s timeout.
TEST_F(MembershipTest, AStoppedPeerEndsTheWaitWhenTheNewRoundOpens) {
    admin_.create_job("stopped", job_of(2));
    const auto [message, took] = wait_for_a_stopped_peer(server_, "stopped", true, 30s);
    EXPECT_THAT(message, HasSubstr("closed"));
    EXPECT_THAT(message, HasSubstr("aborted: world 1 of job 'stopped' is over: the coordinator opened a new round"));
    EXPECT_GE(took, 900ms);  // not before b was declared failed
    EXPECT_LT(took, 5s);
}

// Without abort_stale_collectives the all-reduce waits out its timeout.
TEST_F(MembershipTest, AStoppedPeerIsWaitedForWithoutAbortStaleCollectives) {
    admin_.create_job("patient", job_of(2));
    const auto [message, took] = wait_for_a_stopped_peer(server_, "patient", false, 2500ms);
    EXPECT_THAT(message, HasSubstr("timed out"));
    EXPECT_GE(took, 2400ms);
}

TEST_F(MembershipTest, NextWorldTimesOutWhileTheRoundCannotClose) {
    admin_.create_job("short", job_of(2));
    Membership m(member_options(server_.url(), "short", "alone"));
    const std::string message = error_message(Errc::timeout, [&] { m.next_world(300ms); });
    EXPECT_THAT(message, HasSubstr("member 'alone' has no world after 300 ms"));
    EXPECT_THAT(message, HasSubstr("/v1/jobs/short"));
    // It still waits (heartbeating) in the job: a second member closes the round.
    Membership other(member_options(server_.url(), "short", "other"));
    std::optional<MemberWorld> mine;
    std::thread waiter([&] { mine = m.next_world(10s); });
    const MemberWorld theirs = other.next_world(10s);
    waiter.join();
    ASSERT_TRUE(mine);
    EXPECT_EQ(mine->generation, theirs.generation);

    EXPECT_THAT(error_message(Errc::not_found,
                              [&] { Membership(member_options(server_.url(), "no-such-job", "x")).next_world(1s); }),
                HasSubstr("no-such-job"));
}

TEST(MembershipRestart, HeartbeatsOutliveACoordinatorRestart) {
    CommTempDir dir;
    std::optional<Coordinator> server(std::in_place, server_options(0, dir.path()));
    const uint16_t port = server->port();
    const std::string url = server->url();
    CoordinatorClient admin(url, client_options());
    JobSettings settings = job_of(1);
    settings.failure_timeout = 2.0;
    admin.create_job("durable", settings);
    Membership m(member_options(url, "durable", "survivor"));
    const MemberWorld w = m.next_world(5s);
    ASSERT_TRUE(w.active);

    // Down for less than failure_timeout: the member's heartbeats fail
    // meanwhile, and are simply sent again.
    server.reset();
    std::this_thread::sleep_for(1200ms);
    server.emplace(server_options(port, dir.path()));
    const double before = number_after(member_entry(admin.job_state("durable"), "survivor"), "heartbeats");
    EXPECT_TRUE(eventually([&] {
        return number_after(member_entry(admin.job_state("durable"), "survivor"), "heartbeats") >= before + 3;
    }));
    // Past failure_timeout counted from the last heartbeat before the
    // outage: the coordinator does not count its own downtime as silence.
    std::this_thread::sleep_for(1200ms);
    EXPECT_THAT(member_entry(admin.job_state("durable"), "survivor"), HasSubstr("\"state\":\"active\""));
    EXPECT_FALSE(m.round_pending());
    EXPECT_EQ(m.world().generation, w.generation);
}

// No heartbeat answered for failure_timeout (the coordinator gone, as
// behind a partition): the member fences itself. Its round is pending, its
// world's communicator is aborted naming why, and once the coordinator is
// back it joins a later generation.
TEST(MembershipFence, AMemberCutOffForFailureTimeoutFencesItself) {
    CommTempDir dir;
    std::optional<Coordinator> server(std::in_place, server_options(0, dir.path()));
    const uint16_t port = server->port();
    const std::string url = server->url();
    CoordinatorClient admin(url, client_options());
    admin.create_job("cut", job_of(1));  // failure_timeout 1 s, heartbeat 100 ms
    Membership m(member_options(url, "cut", "alone"));
    const MemberWorld w = m.next_world(5s);
    ASSERT_TRUE(w.active);
    Communicator comm = m.communicator();
    int32_t v = 1;
    comm.allreduce(&v, 1, DataType::int32, ReduceOp::sum);

    const auto cut = Clock::now();
    server.reset();
    std::this_thread::sleep_for(500ms);
    EXPECT_FALSE(m.round_pending());  // half the failure timeout: still in its world
    ASSERT_TRUE(eventually([&] { return m.round_pending(); }, 5s));
    // failure_timeout, then at most one heartbeat attempt (half of it) and an interval.
    EXPECT_GE(since(cut), 900ms);
    EXPECT_LT(since(cut), 2500ms);
    const std::string message =
        error_message(Errc::closed, [&] { comm.allreduce(&v, 1, DataType::int32, ReduceOp::sum); });
    EXPECT_THAT(message, HasSubstr("fenced: no heartbeat of member 'alone' reached the coordinator"));
    EXPECT_THAT(message, HasSubstr("failure_timeout 1.0 s"));

    server.emplace(server_options(port, dir.path()));
    const MemberWorld again = m.next_world(10s);
    EXPECT_TRUE(again.active);
    EXPECT_GT(again.generation, w.generation);
    EXPECT_FALSE(m.round_pending());
}

TEST(MembershipStop, DestructionDoesNotWaitForTheNextHeartbeat) {
    Coordinator server(server_options());
    CoordinatorClient admin(server.url(), client_options());
    admin.create_job("slow", job_of(1));
    MembershipOptions o = member_options(server.url(), "slow", "m");
    o.heartbeat_interval = 30s;
    std::optional<Membership> m(std::in_place, o);
    m->next_world(5s);
    const auto start = Clock::now();
    m.reset();
    EXPECT_LT(since(start), 5s);  // not the 30 s interval
}

// A peer in another process exits without closing (as a host that dies
// takes its launcher along: nobody else says so): the survivor's
// collective fails, report_dead names the peer, and the coordinator marks
// it failed at once, by the survivor's word, long before failure_timeout.
TEST(MembershipReport, ASurvivorReportsAPeerThatDied) {
    int url_pipe[2];
    ASSERT_EQ(::pipe(url_pipe), 0);
    // Forked before the coordinator's threads start: the child is a plain
    // single-threaded process.
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::close(url_pipe[1]);
        char buffer[256] = {};
        const ssize_t n = ::read(url_pipe[0], buffer, sizeof buffer - 1);
        int status = 3;
        if (n > 0) {
            try {
                Membership m(member_options(std::string(buffer, static_cast<std::size_t>(n)), "r", "b"));
                m.next_world(10s);
                Communicator comm = m.communicator();
                comm.barrier();
                ::_exit(0);  // inside the scope: no destructor says goodbye
            } catch (...) {
                status = 4;
            }
        }
        ::_exit(status);  // no goodbye, no leave: as if killed
    }
    ::close(url_pipe[0]);
    Coordinator server(server_options());
    CoordinatorClient admin(server.url(), client_options());
    JobSettings settings = job_of(2);
    settings.min_nodes = 1;
    settings.failure_timeout = 60.0;
    settings.last_call = 30.0;
    admin.create_job("r", settings);
    ASSERT_EQ(::write(url_pipe[1], server.url().data(), server.url().size()),
              static_cast<ssize_t>(server.url().size()));
    ::close(url_pipe[1]);
    Membership a(member_options(server.url(), "r", "a"));
    const MemberWorld w = a.next_world(10s);
    EXPECT_EQ(w.world_size, 2u);
    Communicator comm = a.communicator();
    comm.barrier();
    int status = -1;
    for (int i = 0; i < 200 && ::waitpid(child, &status, WNOHANG) != child; ++i) std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    int32_t v = 1;
    EXPECT_THROW(comm.allreduce(&v, 1, DataType::int32, ReduceOp::sum), Error);
    EXPECT_EQ(comm.dead_ranks(), std::vector<int>{static_cast<int>(1 - w.rank)});
    const auto start = Clock::now();
    EXPECT_EQ(a.report_dead(comm), std::vector<std::string>{"b"});
    EXPECT_TRUE(a.round_pending());
    const std::string entry = member_entry(admin.job_state("r"), "b");
    EXPECT_THAT(entry, HasSubstr("\"failed\""));
    EXPECT_THAT(entry, HasSubstr("reported dead by node 'a' (generation " + std::to_string(w.generation)));
    // The round closes with a alone, without waiting last_call for b.
    const MemberWorld next = a.next_world(10s);
    EXPECT_EQ(next.world_size, 1u);
    EXPECT_LT(since(start), 10s);
}

// Sets variables for one test and puts the old values back.
class ScopedEnv {
public:
    ScopedEnv() {
        for (const char* name : kNames) {
            if (const char* v = std::getenv(name)) saved_[name] = v;
            ::unsetenv(name);
        }
    }
    ~ScopedEnv() {
        for (const char* name : kNames) {
            ::unsetenv(name);
            if (auto it = saved_.find(name); it != saved_.end()) ::setenv(name, it->second.c_str(), 1);
        }
    }
    void set(const char* name, const char* value) { ::setenv(name, value, 1); }

private:
    static constexpr const char* kNames[] = {"COHORT_COORDINATOR", "COHORT_JOB",  "COHORT_MEMBER",
                                             "COHORT_GENERATION",  "COHORT_HOST", "COHORT_COORDINATOR_TOKEN",
                                             "COHORT_ROLE"};
    std::map<std::string, std::string> saved_;
};

TEST(MembershipEnv, OptionsFromTheEnvironment) {
    ScopedEnv env;
    env.set("COHORT_COORDINATOR", "10.0.0.1:8080");
    env.set("COHORT_JOB", "train");
    MembershipOptions o = Membership::options_from_env();
    EXPECT_EQ(o.coordinator, "http://10.0.0.1:8080");
    EXPECT_EQ(o.job, "train");
    EXPECT_EQ(o.joined_generation, 0u);
    EXPECT_FALSE(o.node.host.empty());
    EXPECT_EQ(o.node.id, o.node.host + "-" + std::to_string(::getpid()));

    env.set("COHORT_COORDINATOR", "http://[::1]:9000/");
    env.set("COHORT_MEMBER", "node-7");
    env.set("COHORT_HOST", "rack1-host3");
    env.set("COHORT_GENERATION", "12");
    env.set("COHORT_COORDINATOR_TOKEN", "t0ken");
    o = Membership::options_from_env();
    EXPECT_EQ(o.coordinator, "http://[::1]:9000");
    EXPECT_EQ(o.node.id, "node-7");
    EXPECT_EQ(o.node.host, "rack1-host3");
    EXPECT_EQ(o.joined_generation, 12u);
    EXPECT_EQ(o.token, "t0ken");
    EXPECT_EQ(o.role, "");

    // A launcher's role group: the role, mapped to its job by the Membership.
    env.set("COHORT_ROLE", "evaluator");
    o = Membership::options_from_env();
    EXPECT_EQ(o.role, "evaluator");
    EXPECT_EQ(o.job, "train");
    const Membership m(o);
    EXPECT_EQ(m.job(), "train.evaluator");
    EXPECT_EQ(m.role(), "evaluator");
    env.set("COHORT_ROLE", "");  // empty is unset: the default role
    EXPECT_EQ(Membership(Membership::options_from_env()).job(), "train");
}

TEST(MembershipEnv, ErrorsNameTheVariableAndValue) {
    ScopedEnv env;
    auto message = [] { return error_message(Errc::invalid_argument, [] { Membership::options_from_env(); }); };
    EXPECT_THAT(message(), HasSubstr("COHORT_COORDINATOR is not set"));
    env.set("COHORT_COORDINATOR", "127.0.0.1:8080");
    EXPECT_THAT(message(), HasSubstr("COHORT_JOB is not set"));
    env.set("COHORT_JOB", "train");

    for (const char* bad : {"ftp://c:80", "c", "c:0", "c:http", "http://c:80/v1", ":80"}) {
        env.set("COHORT_COORDINATOR", bad);
        EXPECT_THAT(message(), HasSubstr(std::string("COHORT_COORDINATOR='") + bad + "'"));
    }
    env.set("COHORT_COORDINATOR", "127.0.0.1:8080");
    env.set("COHORT_GENERATION", "two");
    EXPECT_THAT(message(), HasSubstr("COHORT_GENERATION='two' is not a number"));
    env.set("COHORT_GENERATION", "-1");
    EXPECT_THAT(message(), HasSubstr("COHORT_GENERATION='-1'"));
    env.set("COHORT_GENERATION", "99999999999999999999999");
    EXPECT_THAT(message(), HasSubstr("COHORT_GENERATION=99999999999999999999999 is too large"));
    env.set("COHORT_GENERATION", "3");
    env.set("COHORT_MEMBER", "has space");
    EXPECT_THAT(message(), HasSubstr("COHORT_MEMBER='has space' is not a valid member id"));
    env.set("COHORT_MEMBER", "ok");
    env.set("COHORT_JOB", "a/b");
    EXPECT_THAT(message(), HasSubstr("COHORT_JOB='a/b' is not a valid job name"));
    env.set("COHORT_JOB", "train");
    env.set("COHORT_ROLE", "eval.1");
    EXPECT_THAT(message(), HasSubstr("COHORT_ROLE: 'eval.1' is not a role name"));
}

}  // namespace
}  // namespace cohort::test
