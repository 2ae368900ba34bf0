// The coordinator's protocol (src/coordinator/protocol): every message reads
// back what its writer wrote, requests are strict and replies tolerant, and
// the errors name the field.
#include "coordinator/protocol/job_settings.hpp"
#include "coordinator/protocol/json_bytes.hpp"
#include "coordinator/protocol/metrics.hpp"
#include "coordinator/protocol/replies.hpp"
#include "coordinator/protocol/requests.hpp"
#include "coordinator/protocol/store.hpp"
#include "coordinator/server/http_reply.hpp"

#include "coordinator_support.hpp"

#include <cohort/coordinator_protocol.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

namespace cohort::coord::protocol {
namespace {

using coord::testing::expect_error;

// write, to text, parse, read: the message comes back equal.
template <class T>
T round_trip(const T& message, ReadAs as = kJournal) {
    return read<T>(parse_json(boost::json::serialize(write(message))), "again", as);
}

bool operator_eq(const MemberWorld& a, const MemberWorld& b) {
    if (a.active != b.active || a.generation != b.generation || a.rank != b.rank || a.world_size != b.world_size ||
        a.local_rank != b.local_rank || a.local_world_size != b.local_world_size || a.node_rank != b.node_rank ||
        a.peers.size() != b.peers.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.peers.size(); ++i) {
        const WorldPeer &x = a.peers[i], &y = b.peers[i];
        if (x.rank != y.rank || x.id != y.id || x.host != y.host || x.address != y.address) return false;
    }
    return true;
}

TEST(CoordinatorProtocol, RepliesRoundTrip) {
    const JoinReply join{"active", 7, 3u};
    const JoinReply join_back = round_trip(join);
    EXPECT_EQ(join_back.state, "active");
    EXPECT_EQ(join_back.generation, 7u);
    EXPECT_EQ(join_back.rank, 3u);
    EXPECT_FALSE(round_trip(JoinReply{"waiting", 0, std::nullopt}).rank);

    const HeartbeatReply hb{9, "active", true, 1u, 4u};
    const HeartbeatReply hb_back = round_trip(hb);
    EXPECT_EQ(hb_back.generation, 9u);
    EXPECT_TRUE(hb_back.rendezvous);
    EXPECT_EQ(hb_back.world_size, 4u);
    EXPECT_EQ(boost::json::serialize(write(HeartbeatReply{2, "waiting", false, std::nullopt, std::nullopt})),
              R"({"generation":2,"state":"waiting","rendezvous":false})");

    const RoundReply round = round_trip(RoundReply{true, 5});
    EXPECT_TRUE(round.round_open);
    EXPECT_EQ(round.generation, 5u);

    const ShardDone done = round_trip(ShardDone{"counted_late", true});
    EXPECT_EQ(done.outcome, "counted_late");
    EXPECT_TRUE(done.counted);
}

TEST(CoordinatorProtocol, WorldWithAndWithoutPeers) {
    MemberWorld w{true, 3, 1, 2, 1, 2, 0, {}};
    w.peers = {WorldPeer{0, "a", "h", "10.0.0.1:5"}, WorldPeer{1, "b", "h", ""}};
    EXPECT_TRUE(operator_eq(read<MemberWorld>(parse_json(boost::json::serialize(write(w, true))), "w", kReply), w));
    // The server writes the peers once per generation and splices them in:
    // the same text as writing the whole world.
    const std::string peers = boost::json::serialize(peers_to_json(w.peers));
    EXPECT_EQ(world_text(w, peers), boost::json::serialize(write(w, true)));
    // Without peers, and while waiting.
    const MemberWorld no_peers = read<MemberWorld>(write(w, false), "w", kReply);
    EXPECT_TRUE(no_peers.active);
    EXPECT_TRUE(no_peers.peers.empty());
    const MemberWorld waiting{false, 4, 0, 0, 0, 0, 0, {}};
    EXPECT_EQ(boost::json::serialize(write(waiting, true)), R"({"state":"waiting","generation":4})");
    EXPECT_EQ(world_text(waiting, peers), R"({"state":"waiting","generation":4})");
    expect_error([] { read<MemberWorld>(parse_json(R"({"state": "gone", "generation": 1})"), "world", kReply); },
                 Errc::peer_failed, R"(world: state: must be "active" or "waiting", not "gone")");
}

TEST(CoordinatorProtocol, Leases) {
    const ShardLease granted{true, false, 12, "s3", 3, 1, 4096, 99.5};
    const ShardLease back = round_trip(granted);
    EXPECT_TRUE(back.granted);
    EXPECT_EQ(back.lease, 12u);
    EXPECT_EQ(back.shard_id, "s3");
    EXPECT_EQ(back.epoch, 1u);
    EXPECT_EQ(back.bytes, 4096u);
    EXPECT_EQ(back.expiry, 99.5);
    ShardLease finished;
    finished.finished = true;
    EXPECT_EQ(boost::json::serialize(write(finished)), R"({"granted":false,"finished":true})");
    EXPECT_TRUE(round_trip(finished).finished);
    // A reply without "granted" grants when it names a lease.
    EXPECT_TRUE(read<ShardLease>(parse_json(R"({"finished": false, "lease": 1, "shard_id": "a", "shard": 0,
        "epoch": 0})"),
                                 "lease", kReply)
                    .granted);
}

TEST(CoordinatorProtocol, RequestsAreStrictRepliesTolerant) {
    // A client's body: an unknown field is a 400 naming it.
    expect_error([] { read<MemberRequest>(parse_json(R"({"member": "a", "membr": 1})"), "round", kRequest); },
                 Errc::invalid_argument, "round: unknown field 'membr' (did you mean 'member'?)");
    expect_error([] { read<DoneRequest>(parse_json(R"({"member": "a"})"), "shards/done", kRequest); },
                 Errc::invalid_argument, "shards/done: missing field 'lease'");
    expect_error([] { read<DoneRequest>(parse_json(R"({"member": "a", "lease": "7"})"), "done", kRequest); },
                 Errc::invalid_argument, "done: lease: must be a whole number, not a string");
    // A newer server's extra field does not break the client.
    const HeartbeatReply r = read<HeartbeatReply>(
        parse_json(R"({"generation": 1, "state": "active", "rendezvous": false, "new": 1})"), "heartbeat", kReply);
    EXPECT_EQ(r.generation, 1u);
    // A reply missing what it must say is the server's fault: peer_failed.
    expect_error([] { read<RoundReply>(parse_json(R"({"round_open": true})"), "round", kReply); }, Errc::peer_failed,
                 "round: missing field 'generation'");
    // uint32 fields are range-checked.
    expect_error(
        [] {
            read<JoinReply>(parse_json(R"({"state": "active", "generation": 1, "rank": 4294967296})"), "join", kReply);
        },
        Errc::peer_failed, "join: rank: 4294967296 is past 4294967295");
}

TEST(CoordinatorProtocol, MemberRequests) {
    LeaveRequest goodbye{"a", std::nullopt};
    EXPECT_EQ(boost::json::serialize(write(goodbye)), R"({"member":"a"})");
    EXPECT_FALSE(round_trip(goodbye, kRequest).failed);
    const LeaveRequest failed = round_trip(LeaveRequest{"a", "killed by signal 9"}, kRequest);
    EXPECT_EQ(failed.failed, "killed by signal 9");

    HeartbeatRequest hb{"a", 3, HeartbeatMetrics{}};
    hb.metrics->step = 5;
    hb.metrics->samples.push_back(StepSample{0.5, 4, 0.25, std::nullopt, std::nullopt, 0.1});
    const HeartbeatRequest back = round_trip(hb, kRequest);
    EXPECT_EQ(back.member, "a");
    EXPECT_EQ(back.generation, 3u);
    ASSERT_TRUE(back.metrics);
    EXPECT_EQ(*back.metrics, *hb.metrics);
    // The metrics' errors name where they are.
    expect_error(
        [] {
            read<HeartbeatRequest>(parse_json(R"({"member": "a", "generation": 0, "metrics": {"step_time": -2}})"),
                                   "heartbeat job 'j'", kRequest);
        },
        Errc::invalid_argument, "heartbeat job 'j': metrics: step_time: must not be negative, not -2");
}

TEST(CoordinatorProtocol, MetricsKeepGpuAsTextAndSamplesInOrder) {
    const HeartbeatMetrics m =
        read<HeartbeatMetrics>(parse_json(R"({"step": 3, "gpu": {"gpus": [{"index": 0}]}, "in_collective": true,
                       "samples": [{"step": 2, "age": 1.5}, {"step": 3}]})"),
                               "metrics", kRequest);
    EXPECT_EQ(m.gpu_json, R"({"gpus":[{"index":0}]})");
    EXPECT_EQ(m.in_collective, true);
    ASSERT_EQ(m.samples.size(), 2u);
    EXPECT_EQ(m.samples[0].age, 1.5);
    EXPECT_EQ(m.samples[1].age, 0);  // defaulted
    EXPECT_EQ(round_trip(m), m);
    EXPECT_TRUE(gpu_value(m).is_object());
    expect_error([] { read<HeartbeatMetrics>(parse_json(R"({"samples": [{"age": 1}]})"), "m", kRequest); },
                 Errc::invalid_argument, "m: samples[0]: missing field 'step'");
}

TEST(CoordinatorProtocol, JobSettingsLeaveUnsetFieldsOut) {
    cohort::JobSettings s;
    s.min_nodes = 2;
    s.rejoin = "on_request";
    s.health.window = 60;
    EXPECT_EQ(boost::json::serialize(write(s)), R"({"min_nodes":2,"rejoin":"on_request","health":{"window":60}})");
    const cohort::JobSettings back = round_trip(s, kRequest);
    EXPECT_EQ(back.min_nodes, 2u);
    EXPECT_FALSE(back.max_nodes);
    EXPECT_EQ(back.health.window, 60u);
    EXPECT_EQ(boost::json::serialize(write(cohort::JobSettings{})), "{}");
    expect_error([] { read<cohort::JobSettings>(parse_json(R"({"health": {"windw": 1}})"), "job settings", kRequest); },
                 Errc::invalid_argument, "job settings: health: unknown field 'windw' (did you mean 'window'?)");
}

TEST(CoordinatorProtocol, StoreBodiesCarryBytes) {
    // Bytes that are not UTF-8 travel as base64; an absent expected value is null.
    const StoreCasRequest cas{std::nullopt, std::string("\xff\x00\x01", 3)};
    EXPECT_EQ(boost::json::serialize(write(cas)), R"({"expected":null,"desired":{"base64":"/wAB"}})");
    const StoreCasRequest back = round_trip(cas, kRequest);
    EXPECT_FALSE(back.expected);
    EXPECT_EQ(back.desired, cas.desired);
    const StoreCasResult result = round_trip(StoreCasResult{std::string("v"), true});
    EXPECT_EQ(result.value, "v");
    EXPECT_TRUE(result.stored);
    expect_error([] { read<StoreCasRequest>(parse_json(R"({"desired": {"base64": "!"}})"), "cas", kRequest); },
                 Errc::invalid_argument, "cas: desired: base64: is not valid base64");

    EXPECT_EQ(add_request_from_json(add_request(-4), "add", kRequest), -4);
    EXPECT_EQ(add_reply_from_json(add_reply(7), "add", kReply), 7);
    EXPECT_TRUE(remove_reply_from_json(remove_reply(true), "delete", kReply));
    const StoreWaitRequest wait = read<StoreWaitRequest>(write(StoreWaitRequest{{"a", "b"}, 250}), "wait", kRequest);
    EXPECT_EQ(wait.keys, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(wait.timeout_ms, 250u);
    expect_error([] { read<StoreWaitRequest>(parse_json(R"({"keys": []})"), "wait", kRequest); },
                 Errc::invalid_argument, "wait: keys: must name at least one key");
}

// The public text forms are the protocol's writers.
TEST(CoordinatorProtocol, PublicTextForms) {
    ShardLease none;
    EXPECT_EQ(cohort::to_json_text(none), R"({"granted":false,"finished":false})");
    EXPECT_EQ(cohort::to_json_text(ShardDone{"counted", true}), R"({"outcome":"counted","counted":true})");
    const HeartbeatMetrics m = cohort::heartbeat_metrics_from_json_text(R"({"step": 1})", "fn: metrics_json");
    EXPECT_EQ(m.step, 1u);
    expect_error([] { cohort::heartbeat_metrics_from_json_text("{", "fn: metrics_json"); }, Errc::invalid_argument,
                 "fn: metrics_json: not JSON");
    expect_error([] { cohort::heartbeat_metrics_from_json_text(R"({"speed": 1})", "fn: metrics_json"); },
                 Errc::invalid_argument, "fn: metrics_json: unknown field 'speed'");
}

// A byte that is not UTF-8 in any string of a reply (a message that forgot to
// escape it) leaves the body JSON and UTF-8: it reads back as the text \xNN.
TEST(Protocol, ReplyBodiesAreUtf8) {
    const auto reply = server::error_response(400, "invalid_argument",
                                              "a\xff"
                                              "b \xc3\xa9 \xed\xa0\x80");
    EXPECT_TRUE(is_utf8(reply.body)) << reply.body;
    const boost::json::value parsed = boost::json::parse(reply.body);
    EXPECT_EQ(parsed.at("detail"), "a\\xffb \xc3\xa9 \\xed\\xa0\\x80");  // valid UTF-8 (the é) is kept
    const auto plain = server::error_response(400, "invalid_argument", std::string("nul \0 kept", 10));
    EXPECT_EQ(std::string(boost::json::parse(plain.body).at("detail").as_string()), std::string("nul \0 kept", 10));
}

}  // namespace
}  // namespace cohort::coord::protocol
