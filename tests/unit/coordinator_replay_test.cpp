// coordinator/state: event sourcing. Replaying the events (through their
// JSON text) onto an empty state, or onto a snapshot taken midway, gives the
// same state; snapshots round-trip; malformed events and snapshots are
// refused with messages that name the field.
#include "coordinator/state/json_parse.hpp"
#include "coordinator/state/state.hpp"
#include "core/json_text.hpp"

#include "coordinator_support.hpp"

#include <gtest/gtest.h>

#include <iostream>
#include <random>
#include <string>
#include <vector>

namespace cohort::coord {
namespace {

using testing::expect_error;
using testing::expect_replays;

namespace json = boost::json;


std::vector<std::string> journal(std::vector<Event> events) {
    std::vector<std::string> lines;
    for (const Event& e : events) lines.push_back(detail::to_text(to_json(e)));
    return lines;
}

void replay(CoordinatorState& state, const std::vector<std::string>& lines) {
    for (const auto& line : lines) state.apply(event_from_json(parse_json(line)));
}

// A job driven at random: members join, heartbeat, go silent, come back,
// leave; the store and the shards are used; time moves in small steps.
class RandomJob {
public:
    explicit RandomJob(uint64_t seed) : rng_(seed) {
        JobSettings s;
        s.min_nodes = 2;
        s.max_nodes = 4;
        s.last_call = 1.5;
        s.failure_timeout = 4;
        s.join_timeout = 20;
        state.create_job("j", s, t_);
        DatasetPlan plan;
        for (int i = 0; i < 12; ++i)
            plan.shards.push_back(ShardSpec{"s" + std::to_string(i), 100, {"h" + std::to_string(i % 3)}});
        plan.epochs = 3;
        plan.lease_duration = 6;
        plan.shuffle = true;
        state.register_dataset("j", plan, t_);
        alive_.assign(6, true);
    }

    void step() {
        t_ += std::uniform_real_distribution<double>(0, 0.6)(rng_);
        const int who = static_cast<int>(rng_() % 6);
        const std::string id = "m" + std::to_string(who);
        const Member* m = state.job("j").find_member(id);
        const uint64_t gen = m != nullptr && m->state == MemberState::active ? m->generation : 0;
        try {
            switch (rng_() % 12) {
                case 0:
                case 1: {
                    // Mostly nodes that are out; now and then a restart.
                    if (m != nullptr && is_live(m->state) && m->state != MemberState::stale && rng_() % 8 != 0) break;
                    Node n;
                    n.id = id;
                    n.host = "h" + std::to_string(who % 3);
                    n.address = id + ":1";
                    alive_[who] = true;
                    state.join("j", n, t_);
                    break;
                }
                case 2:
                    alive_[who] = rng_() % 4 != 0;
                    break;  // goes silent now and then
                case 3:
                    if (rng_() % 5 == 0) state.leave("j", id, t_);
                    break;
                case 4:
                    state.tick(t_);
                    break;
                case 5: {
                    const uint64_t g = state.job("j").generation();
                    const std::string key = "k" + std::to_string(rng_() % 4);
                    switch (rng_() % 4) {
                        case 0:
                            state.store_set("j", g, key, std::string(1, static_cast<char>(rng_())), t_);
                            break;
                        case 1:
                            state.store_add("j", g, "n", static_cast<int64_t>(rng_() % 7), t_);
                            break;
                        case 2:
                            state.store_compare_and_set("j", g, key, std::nullopt, "x", t_);
                            break;
                        default:
                            state.store_remove("j", g, key, t_);
                            break;
                    }
                    break;
                }
                case 6:
                case 7: {
                    const ShardLease n = state.next_shard("j", id, t_);
                    if (n.granted) granted_.push_back({id, n.lease});
                    break;
                }
                case 8:
                    if (!granted_.empty()) {
                        const std::size_t i = rng_() % granted_.size();
                        state.shard_done("j", granted_[i].first, granted_[i].second, t_);
                        if (rng_() % 3 != 0) granted_.erase(granted_.begin() + static_cast<std::ptrdiff_t>(i));
                    }
                    break;
                default: {
                    HeartbeatMetrics metrics;
                    metrics.step = rng_() % 1000;
                    metrics.step_time = std::uniform_real_distribution<double>(0.01, 2)(rng_);
                    for (int k = 0; k < 6; ++k) {
                        const std::string other = "m" + std::to_string(k);
                        const Member* o = state.job("j").find_member(other);
                        if (!alive_[k] || o == nullptr ||
                            !(o->state == MemberState::active || o->state == MemberState::waiting))
                            continue;
                        const uint64_t g = o->state == MemberState::active ? o->generation : 0;
                        const HeartbeatReply r = state.heartbeat("j", other, g, metrics, t_);
                        if (r.rendezvous) {
                            Node again = o->node;
                            state.join("j", again, t_);
                        }
                    }
                    break;
                }
            }
        } catch (const Error&) {
            // Refusals are part of the game: they must change nothing.
        }
        (void)gen;
    }

    CoordinatorState state;

private:
    std::mt19937_64 rng_;
    double t_ = 1700000000.0;
    std::vector<bool> alive_;
    std::vector<std::pair<std::string, uint64_t>> granted_;
};

TEST(CoordinatorReplay, RandomJobsReplayExactly) {
    for (uint64_t seed : {1u, 2u, 3u, 4u, 5u, 6u}) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        RandomJob job(seed);
        for (int i = 0; i < 300; ++i) job.step();
        const std::string middle = detail::to_text(job.state.snapshot());
        const auto first = journal(job.state.take_events());
        for (int i = 0; i < 300; ++i) job.step();
        const auto second = journal(job.state.take_events());
        const json::value final_state = job.state.snapshot();

        CoordinatorState from_scratch;
        replay(from_scratch, first);
        replay(from_scratch, second);
        EXPECT_EQ(from_scratch.snapshot(), final_state);

        CoordinatorState from_middle = CoordinatorState::from_snapshot(parse_json(middle));
        replay(from_middle, second);
        EXPECT_EQ(from_middle.snapshot(), final_state);

        EXPECT_EQ(CoordinatorState::from_snapshot(parse_json(detail::to_text(final_state))).snapshot(), final_state);
        const JobMetrics stats = job.state.metrics().front();
        std::cout << "seed " << seed << ": generation " << stats.generation << ", failed "
                  << stats.members[static_cast<std::size_t>(MemberState::failed)] << ", granted "
                  << stats.leases.granted << ", requeued " << stats.leases.requeued << ", late " << stats.leases.late
                  << ", duplicate " << stats.leases.duplicate << ", done " << stats.shards_done << ", store version "
                  << job.state.job("j").store().version() << "\n";
        for (const CoordinatorState* st : {&job.state, &from_scratch, &from_middle}) {
            const Job& j = st->job("j");
            std::array<uint32_t, kMemberStateCount> by_state{};
            uint32_t survivors = 0;
            for (const auto& [id, m] : j.members()) {
                ++by_state[static_cast<std::size_t>(m.state)];
                survivors += j.is_survivor(m) ? 1 : 0;
            }
            for (int k = 0; k < kMemberStateCount; ++k) {
                EXPECT_EQ(j.count(static_cast<MemberState>(k)), by_state[static_cast<std::size_t>(k)]);
            }
            EXPECT_EQ(j.newcomers_waiting(), by_state[0] - survivors);
        }
        EXPECT_GT(job.state.job("j").generation(), 1u);
        EXPECT_GT(job.state.job("j").shards()->counters().granted, 5u);
    }
}

TEST(CoordinatorReplay, ResumeForgivesTheOutage) {
    CoordinatorState state;
    JobSettings s;
    s.min_nodes = s.max_nodes = 1;
    state.create_job("j", s, 10);
    Node n;
    n.id = "a";
    state.join("j", n, 10);
    DatasetPlan plan;
    plan.shards = {ShardSpec{"s0", 1, {}}};
    plan.lease_duration = 5;
    state.register_dataset("j", plan, 10);
    state.next_shard("j", "a", 10);
    // Restart an hour later from the snapshot.
    CoordinatorState restarted = CoordinatorState::from_snapshot(parse_json(detail::to_text(state.snapshot())));
    restarted.resume(3610);
    restarted.tick(3612);
    EXPECT_EQ(restarted.job("j").find_member("a")->state, MemberState::active);
    EXPECT_EQ(restarted.job("j").shards()->leases().size(), 1u);
    restarted.tick(3615);
    EXPECT_EQ(restarted.job("j").find_member("a")->state, MemberState::failed);
    EXPECT_TRUE(restarted.job("j").shards()->leases().empty());
}

TEST(CoordinatorReplay, ExactDoublesThroughText) {
    EXPECT_EQ(parse_json("60.8").as_double(), 60.8);
    EXPECT_EQ(parse_json(" {\"t\": 1013376322.4180611, \"n\": [1, -2, 18446744073709551615]} ").at("t").as_double(),
              1013376322.4180611);
    expect_error([] { parse_json("{\"a\": 1} x"); }, Errc::parse, "malformed JSON at byte");
    expect_error([] { parse_json("{\"a\": }"); }, Errc::parse, "malformed JSON at byte 6");
}

TEST(CoordinatorReplay, EveryEventTypeRoundTrips) {
    Node n;
    n.id = "a";
    n.host = "h";
    n.address = "10.0.0.1:5000";
    n.role = Role::chief;
    n.set_label(Level::zone, "z1");
    n.gpu_count = 8;
    HeartbeatMetrics m;
    m.step = 5;
    m.gpu_json = R"({"util":[1,2.5E0]})";
    DatasetPlan plan;
    plan.shards = {ShardSpec{"s0", 10, {"h"}}};
    const std::vector<Event> events = {
        event::JobCreated{"j", 1, JobSettings{}},
        event::JobDeleted{"j", 2},
        event::MemberJoined{"j", 3, n},
        event::MemberRemoved{"j", 4, "a", MemberState::timed_out, "not admitted"},
        event::RoundOpened{"j", 5, "because"},
        event::RoundClosed{"j", 6, 7, {"a", "b"}},
        event::Heartbeat{"j", 7, "a", m},
        event::Heartbeat{"j", 7.5, "a", std::nullopt},
        event::StoreSet{"j", 8, 7, std::string("k\xff", 2), "v"},
        event::StoreRemoved{"j", 9, 7, "k"},
        event::DatasetRegistered{"j", 10, plan},
        event::LeaseGranted{"j", 11, Lease{3, "a", 0, 0, 11, 71}},
        event::LeaseCompleted{"j", 12, "a", 3},
        event::LeaseExpired{"j", 13, 3},
        event::LeaseReleased{"j", 13.5, "a", 4},
        event::Resumed{14},
    };
    for (const Event& e : events) {
        const json::object j = to_json(e);
        EXPECT_EQ(to_json(event_from_json(parse_json(detail::to_text(j)))), j) << detail::to_text(j);
    }
}

TEST(CoordinatorReplay, MalformedEventsNameTheField) {
    expect_error([] { event_from_json(parse_json(R"({"time": 1})")); }, Errc::parse, "event: missing field 'type'");
    expect_error([] { event_from_json(parse_json(R"({"type": "member_jumped", "time": 1})")); }, Errc::parse,
                 "event 'member_jumped': type: unknown event type 'member_jumped'");
    expect_error([] { event_from_json(parse_json(R"({"type": "lease_expired", "time": 1, "job": "j"})")); },
                 Errc::parse, "event 'lease_expired': missing field 'lease'");
    expect_error(
        [] {
            event_from_json(parse_json(R"({"type": "lease_expired", "time": 1, "job": "j", "lease": 1, "leese": 2})"));
        },
        Errc::parse, "event 'lease_expired': unknown field 'leese' (did you mean 'lease'?)");
    expect_error(
        [] { event_from_json(parse_json(R"({"type": "heartbeat", "time": "now", "job": "j", "member": "a"})")); },
        Errc::parse, "event 'heartbeat': time: must be a number, not a string");
}

TEST(CoordinatorReplay, EventsThatDoNotFitAreRefused) {
    CoordinatorState state;
    expect_error(
        [&] {
            state.apply(event::MemberJoined{"j", 1, Node{}});
        },
        Errc::invalid_argument, "event member_joined: no job 'j'");
    state.apply(event::JobCreated{"j", 1, JobSettings{}});
    expect_error(
        [&] {
            state.apply(event::RoundClosed{"j", 2, 5, {"a"}});
        },
        Errc::invalid_argument, "job 'j': event round_closed for generation 5 does not follow generation 0");
    expect_error(
        [&] {
            state.apply(event::Heartbeat{"j", 2, "ghost", std::nullopt});
        },
        Errc::invalid_argument, "job 'j': event heartbeat names member 'ghost', which never joined");
}

TEST(CoordinatorReplay, MalformedSnapshotsAreRefused) {
    expect_error(
        [] { CoordinatorState::from_snapshot(parse_json(R"({"format": "x", "version": 1, "clock": 0, "jobs": []})")); },
        Errc::parse, "coordinator snapshot: format: is 'x', expected 'cohort-coordinator-state'");
    expect_error(
        [] {
            CoordinatorState::from_snapshot(
                parse_json(R"({"format": "cohort-coordinator-state", "version": 9, "clock": 0, "jobs": []})"));
        },
        Errc::parse, "version: 9 is not supported");
    CoordinatorState state;
    state.create_job("j", JobSettings{}, 1);
    json::value snap = state.snapshot();
    snap.at("jobs").as_array()[0].as_object()["members"] =
        json::array{json::object{{"node", json::object{{"id", "a"}}}}};
    expect_error([&] { CoordinatorState::from_snapshot(snap); }, Errc::parse,
                 "coordinator snapshot: jobs[0] ('j'): members[0]: missing field 'state'");
}

}  // namespace
}  // namespace cohort::coord
