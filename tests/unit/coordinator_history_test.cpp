// The job history the dashboard draws (coordinator/state/history.hpp): the
// rounds and member events from a job's events, the points sampled from
// heartbeats and health, every bound, and the query the route takes.
#include "coordinator_support.hpp"

#include "coordinator/state/history.hpp"
#include "coordinator/state/state.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace cohort::coord {
namespace {

namespace json = boost::json;
using testing::expect_error;

Node node(const std::string& id) {
    Node n;
    n.id = id;
    n.host = "host-" + id;
    n.address = id + ":29500";
    return n;
}

HeartbeatMetrics step_metrics(uint64_t step, double step_time, double rate) {
    HeartbeatMetrics m;
    m.step = step;
    m.step_time = step_time;
    m.samples_per_sec = rate;
    return m;
}

JobPoint job_point(double time) {
    JobPoint p;
    p.time = time;
    return p;
}

const json::object& round_at(const json::object& history, std::size_t i) {
    return history.at("rounds").as_array().at(i).as_object();
}

std::vector<std::string> ids(const json::value& named) {
    std::vector<std::string> out;
    for (const auto& v : named.at("ids").as_array()) out.emplace_back(v.as_string());
    return out;
}

TEST(CoordinatorHistory, RoundsSayWhoJoinedFailedAndLeft) {
    CoordinatorState s;
    JobSettings settings;
    settings.min_nodes = 2;
    settings.max_nodes = 2;
    settings.last_call = 0;
    settings.failure_timeout = 5;
    s.create_job("j", settings, 100);
    s.join("j", node("a"), 101);
    s.join("j", node("b"), 102);
    s.tick(102);
    ASSERT_EQ(s.job("j").generation(), 1u);
    // b falls silent: failed, and the round it opens admits c with a.
    s.heartbeat("j", "a", 1, std::nullopt, 106);
    s.tick(108);
    ASSERT_EQ(s.job("j").find_member("b")->state, MemberState::failed);
    s.join("j", node("a"), 109);
    s.join("j", node("c"), 109.5);
    s.tick(110);
    ASSERT_EQ(s.job("j").generation(), 2u);

    const json::object h = s.job("j").history().to_json(HistoryQuery{}, 111);
    ASSERT_EQ(h.at("rounds").as_array().size(), 2u) << json::serialize(h);
    const json::object& first = round_at(h, 0);
    EXPECT_EQ(first.at("generation").as_uint64(), 1u);
    EXPECT_EQ(first.at("reason").as_string(), "job created");
    EXPECT_EQ(first.at("opened_at").as_double(), 100.0);
    EXPECT_EQ(first.at("closed_at").as_double(), 102.0);
    EXPECT_EQ(ids(first.at("joined")), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(first.at("failed").at("count").as_uint64(), 0u);
    const json::object& second = round_at(h, 1);
    EXPECT_EQ(second.at("generation").as_uint64(), 2u);
    EXPECT_EQ(second.at("reason").as_string(), "node 'b' failed");
    EXPECT_EQ(second.at("opened_at").as_double(), 108.0);
    EXPECT_EQ(ids(second.at("joined")), (std::vector<std::string>{"c"}));
    EXPECT_EQ(ids(second.at("failed")), (std::vector<std::string>{"b"}));
    EXPECT_FALSE(second.at("open").as_bool());

    // a leaves: an open round names it, with no closed_at.
    s.leave("j", "a", 112);
    const json::object after = s.job("j").history().to_json(HistoryQuery{}, 113);
    const json::object& open = round_at(after, 2);
    EXPECT_TRUE(open.at("open").as_bool());
    EXPECT_FALSE(open.contains("closed_at"));
    EXPECT_EQ(ids(open.at("left")), (std::vector<std::string>{"a"}));

    std::vector<std::string> kinds;
    for (const auto& e : after.at("events").as_array()) {
        kinds.push_back(std::string(e.at("kind").as_string()) + ":" + std::string(e.at("member").as_string()));
    }
    EXPECT_EQ(kinds, (std::vector<std::string>{"joined:a", "joined:b", "failed:b", "joined:a", "joined:c", "left:a"}));
    const json::value& failure = after.at("events").as_array().at(2);
    EXPECT_NE(std::string(failure.at("reason").as_string()).find("no heartbeat"), std::string::npos);

    // since: only what came after.
    HistoryQuery later;
    later.since = 109.2;
    EXPECT_EQ(s.job("j").history().to_json(later, 113).at("events").as_array().size(), 2u);
}

TEST(CoordinatorHistory, PointsComeFromHeartbeatsAndHealthOncePerSecond) {
    CoordinatorState s;
    JobSettings settings;
    settings.min_nodes = 2;
    settings.max_nodes = 2;
    settings.last_call = 0;
    settings.failure_timeout = 60;
    s.create_job("j", settings, 0);
    s.join("j", node("a"), 0);
    s.join("j", node("b"), 0);
    s.tick(0);
    HeartbeatMetrics gpu = step_metrics(1, 0.5, 64);
    gpu.gpu_json = R"({"gpus":[{"memory_used_bytes":1073741824,"memory_total_bytes":4294967296,)"
                   R"("gpu_utilization_percent":80,"temperature_celsius":61},)"
                   R"({"memory_used_bytes":1073741824,"memory_total_bytes":4294967296,)"
                   R"("gpu_utilization_percent":{"state":"not_available"},"temperature_celsius":70}]})";
    for (int t = 1; t <= 5; ++t) {
        HeartbeatMetrics a = gpu;
        a.step = static_cast<uint64_t>(t);
        s.heartbeat("j", "a", 1, a, t);
        s.heartbeat("j", "b", 1, step_metrics(static_cast<uint64_t>(t), 2.0, 16), t);
        s.evaluate_health(t + 0.25);
        s.evaluate_health(t + 0.5);  // within the second: no second point
    }
    const JobHistory& h = s.job("j").history();
    ASSERT_EQ(h.series().size(), 5u);
    const JobPoint& last = h.series().back();
    EXPECT_EQ(last.time, 5.25);
    EXPECT_EQ(last.active, 2u);
    EXPECT_FLOAT_EQ(last.step_time_p50, 0.5f);
    EXPECT_FLOAT_EQ(last.step_time_max, 2.0f);
    EXPECT_FLOAT_EQ(last.samples_per_sec, 80.0f);
    const auto& a = h.members().at("a");
    ASSERT_EQ(a.size(), 5u);
    EXPECT_EQ(a.back().step, 5u);
    EXPECT_FLOAT_EQ(a.back().step_time, 0.5f);
    EXPECT_FLOAT_EQ(a.back().gpu_memory_used, 2147483648.0f);
    EXPECT_FLOAT_EQ(a.back().gpu_memory_total, 8589934592.0f);
    EXPECT_FLOAT_EQ(a.back().gpu_utilization, 80.0f);  // the GPU without a reading does not count
    EXPECT_FLOAT_EQ(a.back().gpu_temperature, 70.0f);
    EXPECT_TRUE(std::isnan(h.members().at("b").back().gpu_temperature));

    const json::object j = h.to_json(HistoryQuery{}, 6);
    const json::array& members = j.at("members").as_array();
    ASSERT_EQ(members.size(), 2u);
    EXPECT_TRUE(members[0].as_object().contains("gpu_memory_used"));
    EXPECT_FALSE(members[1].as_object().contains("gpu_memory_used"));
    EXPECT_EQ(members[1].at("step_time").as_array().back().as_double(), 2.0);
    EXPECT_EQ(j.at("series").at("time").as_array().size(), 5u);

    // The slowest member first; members=none leaves them out.
    HistoryQuery slowest;
    slowest.members = HistoryQuery::Members::slowest;
    slowest.limit = 1;
    const json::object one = h.to_json(slowest, 6);
    ASSERT_EQ(one.at("members").as_array().size(), 1u);
    EXPECT_EQ(one.at("members").as_array()[0].at("id").as_string(), "b");
    EXPECT_EQ(one.at("members_total").as_uint64(), 2u);
    HistoryQuery none;
    none.members = HistoryQuery::Members::none;
    EXPECT_TRUE(h.to_json(none, 6).at("members").as_array().empty());
    HistoryQuery recent;
    recent.since = 3.5;
    EXPECT_EQ(h.to_json(recent, 6).at("members").as_array()[0].at("time").as_array().size(), 2u);
}

TEST(CoordinatorHistory, EveryRingIsBounded) {
    JobHistory h(0);
    for (uint64_t g = 1; g <= HistoryLimits::kRounds + 10; ++g) {
        const std::string id = "m" + std::to_string(g);
        h.joined(id, static_cast<double>(g));
        h.removed(id, MemberState::left, "bye", static_cast<double>(g));
        h.round_opened("again", static_cast<double>(g));
        const std::vector<std::string> ranks{id};
        h.round_closed(g, ranks, {}, static_cast<double>(g) + 0.5);
    }
    ASSERT_EQ(h.rounds().size(), HistoryLimits::kRounds);
    EXPECT_EQ(h.rounds().front().generation, 11u);  // the oldest went first
    for (int i = 0; i < 600; ++i) h.joined("x", 1000 + i);
    ASSERT_EQ(h.events().size(), HistoryLimits::kEvents);
    EXPECT_EQ(h.events().back().time, 1599.0);

    // A round names kNamed members and counts them all.
    std::vector<std::string> many;
    for (int i = 0; i < 40; ++i) many.push_back("n" + std::to_string(i));
    h.round_opened("grow", 2000);
    h.round_closed(HistoryLimits::kRounds + 11, many, {}, 2001);
    EXPECT_EQ(h.rounds().back().joined.ids.size(), HistoryLimits::kNamed);
    EXPECT_EQ(h.rounds().back().joined.count, 40u);

    // Points: kMemberPoints per member, kJobPoints for the job.
    for (int t = 0; t < 2000; ++t) {
        MemberPoint p;
        p.time = 3000 + t;
        h.add("w", p);
        h.add(job_point(3000.0 + t));
    }
    EXPECT_EQ(h.members().at("w").size(), HistoryLimits::kMemberPoints);
    EXPECT_EQ(h.members().at("w").front().time, 3000.0 + 2000 - HistoryLimits::kMemberPoints);
    EXPECT_EQ(h.series().size(), HistoryLimits::kJobPoints);

    // Many members share the budget: fewer points each.
    const std::size_t n = 10'000;
    for (std::size_t i = 0; i < n; ++i) {
        MemberPoint p;
        p.time = 5000;
        h.add("big" + std::to_string(i), p);
    }
    h.add(job_point(5000));
    EXPECT_EQ(h.member_capacity(), HistoryLimits::kPointBudget / (n + 1));
    EXPECT_LE(h.members().at("w").size(), h.member_capacity());

    // A member silent longer than the job's series reaches is forgotten.
    MemberPoint p;
    p.time = 5000 + HistoryLimits::kJobPoints * HistoryLimits::kInterval + 10;
    h.add("late", p);
    h.add(job_point(p.time));
    EXPECT_EQ(h.members().size(), 1u);
    EXPECT_TRUE(h.members().contains("late"));
    EXPECT_EQ(h.member_capacity(), HistoryLimits::kMemberPoints);
}

TEST(CoordinatorHistory, TheQuerySaysWhatIsWrong) {
    using Query = std::map<std::string, std::string, std::less<>>;
    const auto bad = [](Query q, std::string_view text) {
        expect_error([&] { history_query(q, "history of job 'j'"); }, Errc::invalid_argument, text);
    };
    bad({{"since", "soon"}}, "history of job 'j': since must be a time in seconds");
    bad({{"since", "-1"}}, "since must be a time");
    bad({{"since", "nan"}}, "since must be a time");
    bad({{"since", ""}}, "since must be a time");
    bad({{"since", "12abc"}}, "not '12abc'");
    bad({{"members", "fast"}}, "members must be all, none or slowest, not 'fast'");
    bad({{"members", "slowest"}, {"limit", "0"}}, "limit must be a whole number from 1 to 10000, not '0'");
    bad({{"members", "slowest"}, {"limit", "10001"}}, "not '10001'");
    bad({{"members", "slowest"}, {"limit", "2.5"}}, "limit must be a whole number");
    bad({{"limit", "3"}}, "limit goes with members=slowest");
    bad({{"from", "3"}}, "unknown parameter 'from' (this route takes since, members and limit)");

    const HistoryQuery q = history_query({{"since", "1764000000.125"}, {"members", "slowest"}, {"limit", "7"}}, "h");
    EXPECT_EQ(q.since, 1764000000.125);
    EXPECT_EQ(q.members, HistoryQuery::Members::slowest);
    EXPECT_EQ(q.limit, 7u);
    EXPECT_EQ(history_query({}, "h").members, HistoryQuery::Members::all);
}

TEST(CoordinatorHistory, ASnapshotBringsTheRoundsBackAndReplayIsUnchanged) {
    CoordinatorState s;
    JobSettings settings;
    settings.min_nodes = 1;
    settings.max_nodes = 1;
    settings.last_call = 0;
    s.create_job("j", settings, 10);
    s.join("j", node("a"), 11);
    s.tick(11);
    // The history is not part of the snapshot: state and replay still match.
    testing::expect_replays(s);
    const CoordinatorState loaded = CoordinatorState::from_snapshot(s.snapshot());
    const JobHistory& h = loaded.job("j").history();
    ASSERT_EQ(h.rounds().size(), 1u);
    EXPECT_EQ(h.rounds()[0].generation, 1u);
    EXPECT_EQ(h.rounds()[0].reason, "job created");
    EXPECT_EQ(h.rounds()[0].closed_at, 11.0);
    EXPECT_FALSE(h.round_is_open());
}

}  // namespace
}  // namespace cohort::coord
