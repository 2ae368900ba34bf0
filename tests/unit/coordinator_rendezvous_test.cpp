// coordinator/state: rounds forming, failures, leaves, late joiners, stable
// ranks and heartbeats, with time driven by hand. Every test also checks that
// replaying its events (through JSON text) rebuilds the same state.
#include "coordinator/state/json_parse.hpp"
#include "coordinator/state/state.hpp"
#include "core/json_text.hpp"

#include "coordinator_support.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cohort::coord {
namespace {

using testing::expect_error;
using testing::expect_replays;

Node node(std::string id, std::string host = "", std::string rack = "") {
    Node n;
    n.address = id + ":29500";
    n.id = std::move(id);
    n.host = std::move(host);
    n.set_label(Level::rack, std::move(rack));
    n.gpu_count = 8;
    return n;
}



class CoordinatorRendezvous : public ::testing::Test {
protected:
    void TearDown() override { expect_replays(state); }

    void create(uint32_t min_nodes, uint32_t max_nodes, RejoinPolicy policy = RejoinPolicy::automatic,
                uint32_t unit = 1) {
        JobSettings s;
        s.min_nodes = min_nodes;
        s.max_nodes = max_nodes;
        s.node_unit = unit;
        s.rejoin = policy;
        state.create_job("train", s, t);
    }
    uint32_t rank(std::string_view id) const { return state.world("train", id).value().rank; }
    std::vector<std::string> ranks() const {
        std::vector<std::string> out;
        for (const WorldSlot& slot : state.job("train").world().slots) out.push_back(slot.id);
        return out;
    }
    HeartbeatReply beat(std::string_view id) {
        const Member* m = state.job("train").find_member(id);
        const uint64_t gen = m->state == MemberState::active ? m->generation : 0;
        return state.heartbeat("train", id, gen, std::nullopt, t);
    }
    void beat_all() {
        for (const auto& [id, m] : state.job("train").members()) {
            if (m.state == MemberState::active || m.state == MemberState::waiting) beat(id);
        }
    }
    MemberState state_of(std::string_view id) const { return state.job("train").find_member(id)->state; }

    CoordinatorState state;
    double t = 100.0;
};

TEST_F(CoordinatorRendezvous, FourNodesFormWhenMinEqualsMax) {
    create(4, 4);
    // Two hosts, joined interleaved: ranks group each host.
    EXPECT_EQ(state.join("train", node("b-1", "hb"), t).state, "waiting");
    EXPECT_EQ(state.join("train", node("a-1", "ha"), t).state, "waiting");
    EXPECT_EQ(state.join("train", node("b-2", "hb"), t).state, "waiting");
    EXPECT_EQ(state.job("train").phase(), "forming");
    EXPECT_FALSE(state.world("train", "a-1").has_value());
    const JoinReply last = state.join("train", node("a-2", "ha"), t);
    EXPECT_EQ(last.state, "active");
    EXPECT_EQ(last.generation, 1u);
    EXPECT_EQ(last.rank, 1u);
    EXPECT_EQ(ranks(), (std::vector<std::string>{"a-1", "a-2", "b-1", "b-2"}));
    EXPECT_EQ(state.job("train").phase(), "running");

    const MemberWorld view = state.world("train", "b-2").value();
    EXPECT_EQ(view.generation, 1u);
    EXPECT_EQ(view.rank, 3u);
    EXPECT_EQ(view.world_size, 4u);
    EXPECT_EQ(view.local_rank, 1u);
    EXPECT_EQ(view.local_world_size, 2u);
    EXPECT_EQ(view.node_rank, 1u);
    ASSERT_EQ(view.peers.size(), 4u);
    EXPECT_EQ(view.peers[0].id, "a-1");
    EXPECT_EQ(view.peers[0].address, "a-1:29500");
    EXPECT_EQ(view.peers[2].host, "hb");
    const HeartbeatReply hb = beat("a-1");
    EXPECT_EQ(hb.generation, 1u);
    EXPECT_FALSE(hb.rendezvous);
}

TEST_F(CoordinatorRendezvous, MinTwoMaxFourClosesLastCallAfterTheLastArrival) {
    create(2, 4);  // last_call 3 s
    state.join("train", node("n1"), 100);
    state.join("train", node("n2"), 101);
    state.tick(103.9);
    EXPECT_EQ(state_of("n1"), MemberState::waiting);
    state.join("train", node("n3"), 102);  // resets the last call
    t = 104;
    beat_all();  // waiting nodes heartbeat too, or they fail
    state.tick(104.9);
    EXPECT_EQ(state_of("n1"), MemberState::waiting);
    EXPECT_EQ(state.job("train").closes_at(), 105.0);
    state.tick(105.0);
    EXPECT_EQ(state.job("train").generation(), 1u);
    EXPECT_EQ(ranks(), (std::vector<std::string>{"n1", "n2", "n3"}));
}

TEST_F(CoordinatorRendezvous, MaxNodesClosesAtOnce) {
    create(2, 3);
    state.join("train", node("n1"), t);
    state.join("train", node("n2"), t);
    EXPECT_EQ(state.join("train", node("n3"), t).state, "active");
    EXPECT_EQ(state.job("train").world().size(), 3u);
}

TEST_F(CoordinatorRendezvous, WorldSizeIsRoundedDownToNodeUnit) {
    create(2, 6, RejoinPolicy::automatic, 2);
    for (int i = 1; i <= 5; ++i) state.join("train", node("n" + std::to_string(i)), t + i);
    t = 108;
    beat_all();
    state.tick(t);
    EXPECT_EQ(state.job("train").world().size(), 4u);
    EXPECT_EQ(state_of("n5"), MemberState::waiting);  // the latest arrival waits for the next round
    EXPECT_FALSE(state.world("train", "n5").has_value());
    EXPECT_EQ(state.job("train").phase(), "running");  // 5 nodes make no bigger world than 4
    EXPECT_FALSE(beat("n1").rendezvous);

    // A sixth makes a world of 6 possible: a new round opens.
    state.join("train", node("n6"), ++t);
    EXPECT_EQ(state.job("train").phase(), "rendezvous");
    EXPECT_TRUE(beat("n1").rendezvous);
    for (const char* id : {"n1", "n2", "n3", "n4"}) state.join("train", node(id), t);
    state.tick(t + 3);
    EXPECT_EQ(state.job("train").generation(), 2u);
    EXPECT_EQ(ranks(), (std::vector<std::string>{"n1", "n2", "n3", "n4", "n5", "n6"}));
}

TEST_F(CoordinatorRendezvous, FailureAtExactlyFailureTimeout) {
    create(2, 2);  // failure_timeout 5 s
    state.join("train", node("n1"), t);
    state.join("train", node("n2"), t);
    t = 110;
    beat("n1");
    beat("n2");
    state.heartbeat("train", "n1", 1, std::nullopt, 114);
    state.tick(114.999);
    EXPECT_EQ(state_of("n2"), MemberState::active);
    state.tick(115.0);
    EXPECT_EQ(state_of("n2"), MemberState::failed);
    EXPECT_EQ(state_of("n1"), MemberState::active);
    EXPECT_EQ(state.job("train").phase(), "rendezvous");
    EXPECT_EQ(state.job("train").round_reason(), "node 'n2' failed");
    // The survivor learns it on its next heartbeat.
    t = 115.5;
    EXPECT_TRUE(beat("n1").rendezvous);
    expect_error([&] { beat("n2"); }, Errc::mismatch, "node 'n2' was declared failed (no heartbeat for 5 s");
}

TEST_F(CoordinatorRendezvous, RanksStayStableAcrossAFailure) {
    create(3, 4);
    // Two racks; joined out of order.
    const std::vector<Node> nodes = {node("w3", "h3", "r2"), node("w1", "h1", "r1"), node("w4", "h4", "r2"),
                                     node("w2", "h2", "r1")};
    for (const Node& n : nodes) state.join("train", n, t);
    ASSERT_EQ(ranks(), (std::vector<std::string>{"w1", "w2", "w3", "w4"}));

    // w2 dies; the survivors rejoin in another order; a replacement, w5,
    // comes up on w2's rack.
    t = 103;
    for (const char* id : {"w1", "w3", "w4"}) beat(id);
    t = 107;
    state.tick(t);
    ASSERT_EQ(state_of("w2"), MemberState::failed);
    for (const Node& n : {nodes[2], nodes[0]}) {
        EXPECT_TRUE(beat(n.id).rendezvous);
        state.join("train", n, t);
    }
    EXPECT_EQ(state.join("train", node("w5", "h5", "r1"), t).state, "waiting");
    EXPECT_TRUE(beat("w1").rendezvous);
    EXPECT_EQ(state.join("train", nodes[1], t).state, "active");  // max_nodes, every survivor back
    // w1 keeps rank 0, survivors keep their order, w5 sits next to its rack mate.
    EXPECT_EQ(ranks(), (std::vector<std::string>{"w1", "w5", "w3", "w4"}));
    EXPECT_EQ(state.job("train").generation(), 2u);
}

TEST_F(CoordinatorRendezvous, FirstSurvivorBecomesRankZero) {
    create(2, 3);
    for (const char* id : {"n1", "n2", "n3"}) state.join("train", node(id), t);
    t = 106;
    state.heartbeat("train", "n2", 1, std::nullopt, 104);
    state.heartbeat("train", "n3", 1, std::nullopt, 104);
    state.tick(t);  // n1 (rank 0) silent since 100
    ASSERT_EQ(state_of("n1"), MemberState::failed);
    // Survivors rejoin in reverse order; old order still wins.
    state.join("train", node("n3"), t);
    state.join("train", node("n2"), t);
    state.tick(t + 3);
    EXPECT_EQ(ranks(), (std::vector<std::string>{"n2", "n3"}));
}

TEST_F(CoordinatorRendezvous, NewcomersFollowTheirTopologyNeighbourCyclically) {
    // The previous world was not in topology order: survivors keep it anyway.
    std::vector<Node> survivors = {node("c", "hc"), node("a", "ha"), node("b", "hb")};
    std::vector<Node> newcomers = {node("a2", "ha"), node("0", "h0")};
    // T = 0, a, a2, b, c; from 'c' cyclically: c, 0 | a, a2 | b.
    EXPECT_EQ(stable_rank_order(survivors, newcomers), (std::vector<std::string>{"c", "0", "a", "a2", "b"}));
    EXPECT_EQ(stable_rank_order({}, newcomers), (std::vector<std::string>{"0", "a2"}));
}

TEST_F(CoordinatorRendezvous, GracefulLeaveOpensARoundAtOnce) {
    create(2, 3);
    for (const char* id : {"n1", "n2", "n3"}) state.join("train", node(id), t);
    t = 101;
    state.leave("train", "n2", t);
    EXPECT_EQ(state_of("n2"), MemberState::left);
    EXPECT_EQ(state.job("train").phase(), "rendezvous");
    EXPECT_EQ(state.job("train").round_reason(), "node 'n2' left");
    state.leave("train", "n2", t);  // a retry is harmless
    expect_error([&] { state.heartbeat("train", "n2", 1, std::nullopt, t); }, Errc::mismatch,
                 "node 'n2' left the job; join again");
    EXPECT_TRUE(beat("n1").rendezvous);
    state.join("train", node("n1"), t);
    state.join("train", node("n3"), t);
    state.tick(t + 3);
    EXPECT_EQ(ranks(), (std::vector<std::string>{"n1", "n3"}));
    EXPECT_EQ(state.job("train").rounds().back().reason, "node 'n2' left");
}

TEST_F(CoordinatorRendezvous, RoundAfterAFailureClosesOnceEverySurvivorIsBack) {
    create(2, 4);  // last_call 3 s
    for (const char* id : {"n1", "n2", "n3", "n4"}) state.join("train", node(id), t);
    ASSERT_EQ(state.job("train").generation(), 1u);
    t = 101;
    state.leave("train", "n4", t);
    state.join("train", node("n1"), t);
    state.join("train", node("n2"), t);
    // n3 has not rejoined yet: the round waits for it (or for last_call).
    state.tick(t);
    EXPECT_EQ(state.job("train").phase(), "rendezvous");
    t = 101.5;
    state.join("train", node("n3"), t);
    state.tick(t);  // every survivor is back: no last_call
    EXPECT_EQ(state.job("train").generation(), 2u);
    EXPECT_EQ(ranks(), (std::vector<std::string>{"n1", "n2", "n3"}));

    // A survivor that never comes back is not waited for past last_call.
    t = 110;
    for (const char* id : {"n1", "n2", "n3"}) beat(id);
    state.leave("train", "n3", t);
    state.join("train", node("n1"), t);
    state.tick(t + 2);
    EXPECT_EQ(state.job("train").phase(), "rendezvous");  // n2 still active, below min
    state.join("train", node("n2"), t + 2);
    state.tick(t + 2);
    EXPECT_EQ(state.job("train").generation(), 3u);
}

TEST_F(CoordinatorRendezvous, ALauncherReportsAFailureAtOnce) {
    create(2, 3);
    for (const char* id : {"n1", "n2", "n3"}) state.join("train", node(id), t);
    state.leave("train", "n2", t + 0.1, "killed by signal 9");
    EXPECT_EQ(state_of("n2"), MemberState::failed);
    EXPECT_EQ(state.job("train").find_member("n2")->reason, "killed by signal 9");
    EXPECT_EQ(state.job("train").round_reason(), "node 'n2' failed: killed by signal 9");
    // Its relaunch joins under the same id.
    EXPECT_EQ(state.join("train", node("n2"), t + 0.2).state, "waiting");
}

// A host dies with its launcher: a survivor saw the connection close and
// says so; the round closes once the live members are back, not last_call
// later, and the report is journaled (the fixture replays it).
TEST_F(CoordinatorRendezvous, ASurvivorReportsADeadPeerAndTheRoundClosesWithoutLastCall) {
    create(2, 4);  // last_call 3 s
    for (const char* id : {"n1", "n2", "n3", "n4"}) state.join("train", node(id), t);
    ASSERT_EQ(state.job("train").generation(), 1u);
    t = 101;
    state.request_round("train", "n1", t);
    state.join("train", node("n1"), t);
    state.join("train", node("n2"), t);
    state.join("train", node("n3"), t);
    state.tick(t + 0.5);
    EXPECT_EQ(state.job("train").phase(), "rendezvous");  // n4 still counts as active
    const ReportReply r = state.report_dead("train", "n3", 1, "n4", "connection closed", t + 0.5);
    EXPECT_EQ(r.member, "n4");
    EXPECT_EQ(r.outcome, "failed");
    EXPECT_EQ(state_of("n4"), MemberState::failed);
    EXPECT_EQ(state.job("train").find_member("n4")->reason,
              "reported dead by node 'n3' (generation 1): connection closed");
    // n3 had rejoined (a survivor of generation 1 may report), and the
    // round closes at once: no last_call.
    state.tick(t + 0.5);
    EXPECT_EQ(state.job("train").generation(), 2u);
    EXPECT_EQ(ranks(), (std::vector<std::string>{"n1", "n2", "n3"}));
}

TEST_F(CoordinatorRendezvous, AReportOpensTheRoundAndIsRefusedFromOutsideTheWorld) {
    create(2, 4);
    for (const char* id : {"n1", "n2", "n3"}) state.join("train", node(id), t);
    t += 4;  // past last_call
    state.tick(t);
    ASSERT_EQ(state.job("train").generation(), 1u);
    // A fourth node opens a round (rejoin auto); the world of 4 is
    // generation 2, and a fifth waits in no world (max_nodes 4).
    state.join("train", node("late"), t);
    for (const char* id : {"n1", "n2", "n3"}) state.join("train", node(id), t);
    state.tick(t);
    ASSERT_EQ(state.job("train").generation(), 2u);
    state.join("train", node("outsider"), t);
    // Refused, by name: a member of no world, a member reporting itself, a
    // generation the job never had, an unknown member.
    expect_error([&] { state.report_dead("train", "outsider", 2, "n1", "", t); }, Errc::mismatch,
                 "job 'train': node 'outsider' reports node 'n1' dead in generation 2: the reporter is waiting "
                 "(generation 0), not an active member of generation 2");
    expect_error([&] { state.report_dead("train", "n1", 2, "n1", "", t); }, Errc::invalid_argument,
                 "a member cannot report itself");
    expect_error([&] { state.report_dead("train", "n1", 3, "n2", "", t); }, Errc::mismatch,
                 "the job has no generation 3 (it is at 2)");
    expect_error([&] { state.report_dead("train", "n1", 2, "ghost", "", t); }, Errc::not_found,
                 "job 'train' has no member 'ghost'");
    expect_error([&] { state.report_dead("train", "n1", 2, "outsider", "", t); }, Errc::mismatch,
                 "node 'outsider' is not in generation 2 (it is waiting, generation 0)");
    // A report about the world before: ignored, nothing changes.
    EXPECT_EQ(state.report_dead("train", "n1", 1, "n2", "", t).outcome, "ignored");
    EXPECT_EQ(state_of("n2"), MemberState::active);
    // Accepted from a member of the world: a round opens at once.
    EXPECT_EQ(state.report_dead("train", "n1", 2, "n2", "", t).outcome, "failed");
    EXPECT_EQ(state.job("train").round_reason(), "node 'n2' failed: reported dead by node 'n1' (generation 2)");
    // A second survivor saying the same: nothing more happens.
    EXPECT_EQ(state.report_dead("train", "n3", 2, "n2", "", t).outcome, "already_gone");
    // The dead member cannot report anyone: it is no longer active.
    expect_error([&] { state.report_dead("train", "n2", 2, "n3", "", t); }, Errc::mismatch,
                 "the reporter is failed (generation 2)");
    // A member that died and came back (joined again) is left alone.
    state.join("train", node("n2"), t);
    EXPECT_EQ(state.report_dead("train", "n3", 2, "n2", "", t).outcome, "rejoined");
    EXPECT_EQ(state_of("n2"), MemberState::waiting);
}

// A process that failed and comes back starts its steps over: the step its
// predecessor reported must not read as the new process's progress.
TEST_F(CoordinatorRendezvous, ARelaunchedMemberForgetsTheStepsOfTheOneBefore) {
    create(1, 1);
    state.join("train", node("n1"), t);
    HeartbeatMetrics m;
    m.step = 42;
    state.heartbeat("train", "n1", 1, m, t + 0.5);
    ASSERT_TRUE(state.job("train").find_member("n1")->metrics);
    state.leave("train", "n1", t + 1, "killed by signal 9");
    state.join("train", node("n1"), t + 2);
    EXPECT_FALSE(state.job("train").find_member("n1")->metrics);
    const auto view = state.job("train").view(t + 2);
    EXPECT_FALSE(view.at("members").as_array()[0].as_object().contains("step"));
}

TEST_F(CoordinatorRendezvous, LateJoinerOpensARoundWithPolicyAuto) {
    create(2, 4);
    state.join("train", node("n1"), t);
    state.join("train", node("n2"), t);
    t = 103;
    state.tick(t);
    ASSERT_EQ(state.job("train").generation(), 1u);
    state.join("train", node("n0"), ++t);  // sorts before n1 in topology order
    EXPECT_EQ(state.job("train").phase(), "rendezvous");
    EXPECT_TRUE(beat("n1").rendezvous);
    EXPECT_FALSE(beat("n0").rendezvous);  // already waiting
    state.join("train", node("n1"), t);
    state.join("train", node("n2"), t);
    state.tick(t + 3);
    EXPECT_EQ(state.job("train").generation(), 2u);
    // n1 stays rank 0; n0 goes after the survivor it follows cyclically (n2).
    EXPECT_EQ(ranks(), (std::vector<std::string>{"n1", "n2", "n0"}));
}

TEST_F(CoordinatorRendezvous, LateJoinerWaitsForARequestWithPolicyOnRequest) {
    create(2, 4, RejoinPolicy::on_request);
    state.join("train", node("n1"), t);
    state.join("train", node("n2"), t);
    t = 103;
    state.tick(t);
    state.join("train", node("n3"), ++t);
    for (int i = 0; i < 10; ++i) {
        ++t;
        beat_all();
        state.tick(t);
    }
    EXPECT_EQ(state.job("train").phase(), "running");
    EXPECT_EQ(state_of("n3"), MemberState::waiting);
    EXPECT_FALSE(beat("n1").rendezvous);
    expect_error([&] { state.request_round("train", "n3", t); }, Errc::unavailable, "waits for a round already");
    state.request_round("train", "n2", t);
    EXPECT_EQ(state.job("train").round_reason(), "requested by node 'n2'");
    EXPECT_TRUE(beat("n1").rendezvous);
    state.join("train", node("n1"), t);
    state.join("train", node("n2"), t);
    state.tick(t + 3);
    EXPECT_EQ(ranks(), (std::vector<std::string>{"n1", "n2", "n3"}));
}

TEST_F(CoordinatorRendezvous, HeartbeatWithTheWrongGenerationIsAMismatch) {
    create(2, 2);
    state.join("train", node("n1"), t);
    state.join("train", node("n2"), t);
    expect_error([&] { state.heartbeat("train", "n1", 2, std::nullopt, t); }, Errc::mismatch,
                 "job 'train': heartbeat from node 'n1' carries generation 2, but the node is in generation 1");
    // Generation 0 is a member that has not read its world yet: accepted,
    // and the answer tells it its rank.
    const auto first = state.heartbeat("train", "n1", 0, std::nullopt, t);
    EXPECT_EQ(first.state, "active");
    ASSERT_TRUE(first.rank.has_value());
    EXPECT_EQ(*first.rank, state.job("train").find_member("n1")->rank);
    EXPECT_EQ(first.world_size, std::optional<uint32_t>(2));
    expect_error([&] { state.heartbeat("train", "nobody", 1, std::nullopt, t); }, Errc::not_found,
                 "job 'train' has no member 'nobody' (join first)");
    expect_error([&] { state.heartbeat("eval", "n1", 1, std::nullopt, t); }, Errc::not_found, "no job 'eval'");

    // A waiting node has no world: its heartbeat carries 0.
    state.join("train", node("n3"), t);
    expect_error([&] { state.heartbeat("train", "n3", 1, std::nullopt, t); }, Errc::mismatch,
                 "but the node waits for a round; send 0");
}

TEST_F(CoordinatorRendezvous, MemberThatMissesTheRoundIsStale) {
    create(1, 2);
    state.join("train", node("n1"), t);
    state.join("train", node("n2"), t);
    state.request_round("train", "n1", ++t);
    state.join("train", node("n1"), t);  // n2 never rejoins
    state.tick(t + 3);
    EXPECT_EQ(state.job("train").generation(), 2u);
    EXPECT_EQ(state_of("n2"), MemberState::stale);
    expect_error([&] { state.heartbeat("train", "n2", 1, std::nullopt, t + 3); }, Errc::mismatch,
                 "node 'n2' was in generation 1, but generation 2 formed without it; join again");
}

TEST_F(CoordinatorRendezvous, RestartedMemberOpensARound) {
    create(2, 2);
    state.join("train", node("n1"), t);
    state.join("train", node("n2"), t);
    EXPECT_EQ(state.join("train", node("n2"), ++t).state, "waiting");
    EXPECT_EQ(state.job("train").round_reason(), "node 'n2' joined again while in generation 1");
}

TEST_F(CoordinatorRendezvous, WaitingPastJoinTimeoutIsAnError) {
    JobSettings s;
    s.min_nodes = s.max_nodes = 2;
    s.join_timeout = 30;
    state.create_job("train", s, t);
    state.join("train", node("n1"), t);
    for (int i = 1; i <= 30; ++i) {
        t = 100 + i;
        beat("n1");
        state.tick(t);
    }
    EXPECT_EQ(state_of("n1"), MemberState::timed_out);
    expect_error([&] { state.heartbeat("train", "n1", 0, std::nullopt, t); }, Errc::timeout,
                 "node 'n1' was not admitted within join_timeout (30 s); join again");
    expect_error([&] { state.world("train", "n1"); }, Errc::timeout, "join_timeout");
    EXPECT_EQ(state.join("train", node("n1"), t).state, "waiting");
}

TEST_F(CoordinatorRendezvous, JobIsFullWhenAWholeWorldAlreadyWaits) {
    create(2, 2);
    for (const char* id : {"n1", "n2", "n3", "n4"}) state.join("train", node(id), t);
    expect_error([&] { state.join("train", node("n5"), t); }, Errc::unavailable,
                 "job 'train' is full: 2 nodes already wait for a place (at most 2, the largest world)");
    // A retry of a waiting node's join is not a new node.
    EXPECT_EQ(state.join("train", node("n3"), t).state, "waiting");
}

TEST_F(CoordinatorRendezvous, HeartbeatKeepsTheLatestMetrics) {
    create(1, 1);
    state.join("train", node("n1"), t);
    HeartbeatMetrics m;
    m.step = 1200;
    m.step_time = 0.25;
    m.samples_per_sec = 4096.5;
    m.gpu_json = R"([{"util":9.75E1}])";
    state.heartbeat("train", "n1", 1, m, t + 1.5);
    state.heartbeat("train", "n1", 1, std::nullopt, t + 2);
    const Member& member = *state.job("train").find_member("n1");
    EXPECT_EQ(member.metrics, m);
    EXPECT_EQ(member.last_heartbeat, t + 2);
    const auto view = state.job("train").view(t + 3);
    const auto& row = view.at("members").as_array()[0].as_object();
    EXPECT_EQ(row.at("step").as_uint64(), 1200u);
    EXPECT_EQ(row.at("last_heartbeat_age").as_double(), 1.0);
    EXPECT_EQ(row.at("rank").as_uint64(), 0u);
    EXPECT_EQ(view.at("phase").as_string(), "running");
}

TEST_F(CoordinatorRendezvous, TimeNeverRunsBackwards) {
    create(1, 1);
    state.join("train", node("n1"), 200);
    state.heartbeat("train", "n1", 1, std::nullopt, 150);  // an older clock reading counts as 200
    EXPECT_EQ(state.job("train").find_member("n1")->last_heartbeat, 200);
    EXPECT_EQ(state.next_deadline(), 205);
}

}  // namespace
}  // namespace cohort::coord
