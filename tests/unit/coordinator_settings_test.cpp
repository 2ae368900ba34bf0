// coordinator/state: what clients send is checked, and the messages say
// what is wrong and where: job settings, join descriptors, dataset plans,
// heartbeat metrics, names.
#include "coordinator/protocol/descriptor.hpp"
#include "coordinator/protocol/json_bytes.hpp"
#include "coordinator/protocol/metrics.hpp"
#include "coordinator/state/json_parse.hpp"
#include "coordinator/state/state.hpp"

#include "coordinator_support.hpp"

#include <gtest/gtest.h>

#include <string>

namespace cohort::coord {
namespace {

using testing::expect_error;
using testing::expect_replays;


JobSettings settings(std::string_view text) {
    return settings_from_json(parse_json(text));
}

TEST(CoordinatorSettings, DefaultsAreDocumentedValues) {
    const JobSettings s = settings("{}");
    EXPECT_EQ(s, JobSettings{});
    EXPECT_EQ(s.min_nodes, 1u);
    EXPECT_EQ(s.max_nodes, 1u);
    EXPECT_EQ(s.last_call, 3.0);
    EXPECT_EQ(s.node_unit, 1u);
    EXPECT_EQ(s.join_timeout, 600.0);
    EXPECT_EQ(s.heartbeat_interval, 1.0);
    EXPECT_EQ(s.failure_timeout, 5.0);
    EXPECT_EQ(s.rejoin, RejoinPolicy::automatic);
    EXPECT_EQ(settings(R"({"min_nodes": 4})").max_nodes, 4u);  // max defaults to min
    const JobSettings full = settings(R"({"min_nodes": 2, "max_nodes": 8, "node_unit": 2, "last_call": 0.5,
        "join_timeout": 60, "heartbeat_interval": 0.5, "failure_timeout": 2, "rejoin": "on_request"})");
    EXPECT_EQ(settings_from_json(to_json(full)), full);
    EXPECT_EQ(full.largest_world(), 8u);
    EXPECT_EQ(full.world_for(7), 6u);
}

TEST(CoordinatorSettings, BadSettingsSayWhatToChange) {
    expect_error([] { settings(R"({"min_nodes": 0})"); }, Errc::invalid_argument,
                 "job settings: min_nodes must be at least 1, not 0");
    expect_error([] { settings(R"({"min_nodes": 4, "max_nodes": 2})"); }, Errc::invalid_argument,
                 "job settings: max_nodes (2) is below min_nodes (4); raise max_nodes or lower min_nodes");
    expect_error([] { settings(R"({"min_nodes": 3, "max_nodes": 3, "node_unit": 2})"); }, Errc::invalid_argument,
                 "job settings: no world size from min_nodes 3 to max_nodes 3 is a multiple of node_unit 2");
    expect_error([] { settings(R"({"node_unit": 0})"); }, Errc::invalid_argument,
                 "job settings: node_unit must be at least 1, not 0");
    expect_error([] { settings(R"({"last_call": -1})"); }, Errc::invalid_argument,
                 "job settings: last_call must be 0 or more seconds, not -1");
    expect_error([] { settings(R"({"join_timeout": 0})"); }, Errc::invalid_argument,
                 "job settings: join_timeout must be more than 0 seconds, not 0");
    expect_error([] { settings(R"({"failure_timeout": 1, "heartbeat_interval": 2})"); }, Errc::invalid_argument,
                 "job settings: failure_timeout (1 s) must be longer than heartbeat_interval (2 s)");
    expect_error([] { settings(R"({"failure_timeout": 5000000000})"); }, Errc::invalid_argument,
                 "failure_timeout is 5000000000 s, more than a year; durations are in seconds");
    expect_error([] { settings(R"({"rejoin": "sometimes"})"); }, Errc::invalid_argument,
                 "job settings: rejoin: unknown policy 'sometimes' (expected 'auto' or 'on_request')");
    expect_error([] { settings(R"({"min_node": 2})"); }, Errc::invalid_argument,
                 "job settings: unknown field 'min_node' (did you mean 'min_nodes'?)");
    expect_error([] { settings(R"({"min_nodes": "two"})"); }, Errc::invalid_argument,
                 "job settings: min_nodes: must be a whole number, not a string");
    expect_error([] { settings(R"({"max_nodes": 2.5})"); }, Errc::invalid_argument,
                 "job settings: max_nodes: must be a whole number of at least 0, not 2.5");
    expect_error([] { settings("[]"); }, Errc::invalid_argument, "job settings: expected an object, not a list");
}

TEST(CoordinatorSettings, JobsAreCreatedOnce) {
    CoordinatorState state;
    JobSettings s;
    s.max_nodes = 2;
    state.create_job("train-1", s, 1);
    state.create_job("train-1", s, 2);  // a retry
    JobSettings other = s;
    other.max_nodes = 3;
    expect_error([&] { state.create_job("train-1", other, 3); }, Errc::mismatch,
                 "job 'train-1' exists with other settings");
    expect_error([&] { state.create_job("a/b", s, 3); }, Errc::invalid_argument,
                 "job name 'a/b' holds '/'; use printable ASCII without spaces or '/'");
    expect_error([&] { state.create_job("", s, 3); }, Errc::invalid_argument, "job name must not be empty");
    state.delete_job("train-1", 4);
    expect_error([&] { state.delete_job("train-1", 5); }, Errc::not_found, "no job 'train-1' (create it first)");
    EXPECT_EQ(state.take_events().size(), 2u);
}

TEST(CoordinatorSettings, JoinDescriptors) {
    const Node n = descriptor_from_json(parse_json(R"({"id": "w-0", "host": "gpu-a1", "address": "10.0.1.11:29500",
        "role": "chief", "locality": {"zone": "eu-1", "rack": "r1"}, "gpus": 8, "gpu_memory": "80GiB"})"),
                                        "join job 'j'");
    EXPECT_EQ(n.id, "w-0");
    EXPECT_EQ(n.role, Role::chief);
    EXPECT_EQ(n.label(Level::rack), "r1");
    EXPECT_EQ(n.gpu_memory_bytes, 80ull << 30);
    EXPECT_TRUE(same_descriptor(descriptor_from_json(descriptor_to_json(n), "x"), n));

    expect_error([] { descriptor_from_json(parse_json(R"({"id": "w", "address": "10.0.0.1"})"), "join job 'j'"); },
                 Errc::invalid_argument, "join job 'j': node 'w': address '10.0.0.1' is not HOST:PORT");
    expect_error([] { descriptor_from_json(parse_json(R"({"id": "w", "locality": {"rak": "x"}})"), "join job 'j'"); },
                 Errc::invalid_argument, "join job 'j': locality: unknown field 'rak' (did you mean 'rack'?)");
    expect_error([] { descriptor_from_json(parse_json(R"({"id": "w x"})"), "join job 'j'"); }, Errc::invalid_argument,
                 "join job 'j': node id 'w x' holds byte 0x20");
    expect_error([] { descriptor_from_json(parse_json(R"({"host": "h"})"), "join job 'j'"); }, Errc::invalid_argument,
                 "join job 'j': missing field 'id'");
    expect_error([] { descriptor_from_json(parse_json(R"({"id": "w", "role": "boss"})"), "join job 'j'"); },
                 Errc::invalid_argument, "join job 'j': role: unknown role 'boss'");

    CoordinatorState state;
    state.create_job("j", JobSettings{}, 1);
    Node bad;
    bad.id = "w";
    bad.address = "h:99999";
    expect_error([&] { state.join("j", bad, 1); }, Errc::invalid_argument,
                 "join job 'j': node 'w': address 'h:99999' is not HOST:PORT");
}

TEST(CoordinatorSettings, DatasetPlans) {
    const DatasetPlan p = plan_from_json(parse_json(R"({"shards": [{"id": "a", "bytes": 10, "hosts": ["h1"]},
        {"id": "b"}], "epochs": 2, "shuffle": true, "seed": 9, "lease_duration": 30})"));
    EXPECT_EQ(p.shards.size(), 2u);
    EXPECT_EQ(plan_from_json(to_json(p)), p);
    expect_error([] { plan_from_json(parse_json(R"({"shards": []})")); }, Errc::invalid_argument,
                 "dataset plan: no shards; list at least one");
    expect_error([] { plan_from_json(parse_json(R"({"shards": [{"id": "a"}, {"id": "a"}]})")); },
                 Errc::invalid_argument, "dataset plan: shards[1]: id 'a' appears twice");
    expect_error([] { plan_from_json(parse_json(R"({"shards": [{"id": "a"}], "epochs": 0})")); },
                 Errc::invalid_argument, "dataset plan: epochs must be at least 1, not 0");
    expect_error([] { plan_from_json(parse_json(R"({"shards": [{"id": "a"}], "lease_duration": 0})")); },
                 Errc::invalid_argument, "dataset plan: lease_duration must be more than 0 seconds, not 0");
    expect_error([] { plan_from_json(parse_json(R"({"shards": [{"id": "a", "hosts": [1]}]})")); },
                 Errc::invalid_argument, "dataset plan: shards[0]: hosts[0]: must be a string, not a number");
}

TEST(CoordinatorSettings, HeartbeatMetrics) {
    const HeartbeatMetrics m = protocol::read<HeartbeatMetrics>(
        parse_json(R"({"step": 3, "step_time": 0.2, "gpu": [{"util": 90}]})"), "heartbeat", protocol::kRequest);
    EXPECT_EQ(m.step, 3u);
    EXPECT_FALSE(m.samples_per_sec);
    EXPECT_EQ(m.gpu_json, R"([{"util":90}])");
    EXPECT_EQ(protocol::read<HeartbeatMetrics>(protocol::write(m), "x", protocol::kJournal), m);
    expect_error(
        [] {
            protocol::read<HeartbeatMetrics>(parse_json(R"({"step_time": -1})"), "heartbeat from 'a'",
                                             protocol::kRequest);
        },
        Errc::invalid_argument, "heartbeat from 'a': step_time: must not be negative, not -1");
    expect_error(
        [] { protocol::read<HeartbeatMetrics>(parse_json(R"({"step": -1})"), "heartbeat", protocol::kRequest); },
        Errc::invalid_argument, "heartbeat: step: must not be negative, not -1");
    // A journal is read strictly too, with parse errors.
    expect_error([] { protocol::read<HeartbeatMetrics>(parse_json(R"({"stpe": 1})"), "event 3", protocol::kJournal); },
                 Errc::parse, "stpe");
}

TEST(CoordinatorSettings, BytesInJson) {
    EXPECT_EQ(bytes_to_json("plain"), boost::json::value("plain"));
    const std::string binary("\x00\xff\x80", 3);
    EXPECT_EQ(bytes_to_json(binary).at("base64"), "AP+A");
    EXPECT_EQ(bytes_from_json(bytes_to_json(binary), "v", Errc::parse), binary);
    // Only the canonical spelling is read back (core/base64, tested there).
    expect_error([] { bytes_from_json(parse_json(R"({"base64": "QR=="})"), "v", Errc::parse); }, Errc::parse,
                 "v: base64: is not valid base64");
    EXPECT_FALSE(is_utf8("\xc0\xaf"));      // overlong '/'
    EXPECT_FALSE(is_utf8("\xed\xa0\x80"));  // a surrogate
    EXPECT_TRUE(is_utf8("h\xc3\xa9llo \xf0\x9f\x98\x80"));
    expect_error([] { bytes_from_json(boost::json::value(3), "event: value", Errc::parse); }, Errc::parse,
                 "event: value: must be a string or {\"base64\": ...}, not a number");
}

}  // namespace
}  // namespace cohort::coord
