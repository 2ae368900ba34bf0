// Topology: loading cluster files, and the errors a user sees for bad ones.
#include "support.hpp"

#include <cohort/error.hpp>
#include <cohort/node.hpp>
#include <cohort/topology.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;

void expect_same_nodes(const Topology& a, const Topology& b) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        SCOPED_TRACE("node " + a[i].id);
        EXPECT_EQ(a[i].id, b[i].id);
        EXPECT_EQ(a[i].host, b[i].host);
        EXPECT_EQ(a[i].address, b[i].address);
        EXPECT_EQ(a[i].role, b[i].role);
        EXPECT_EQ(a[i].status, b[i].status);
        EXPECT_EQ(a[i].labels, b[i].labels);
        EXPECT_EQ(a[i].gpu_count, b[i].gpu_count);
        EXPECT_EQ(a[i].gpu_memory_bytes, b[i].gpu_memory_bytes);
    }
}

TEST(Topology, LoadsYaml) {
    const Topology t = Topology::from_file(data_path("cluster.yaml"));
    ASSERT_EQ(t.size(), 10u);
    EXPECT_EQ(t[0].id, "n5");  // file order is kept
    const Node& n0 = t[*t.find("n0")];
    EXPECT_EQ(n0.host, "h1");
    EXPECT_EQ(n0.address, "10.0.1.1:29500");
    EXPECT_EQ(n0.role, Role::worker);
    EXPECT_EQ(n0.status, NodeStatus::ready);
    EXPECT_EQ(n0.label(Level::region), "eu");
    EXPECT_EQ(n0.label(Level::zone), "eu-1");
    EXPECT_EQ(n0.label(Level::rack), "r1");
    EXPECT_EQ(n0.label(Level::network_switch), "s1");
    EXPECT_EQ(n0.gpu_count, 8u);
    EXPECT_EQ(n0.gpu_memory_bytes, uint64_t{80} << 30);
    EXPECT_EQ(t[*t.find("chief")].role, Role::chief);
    EXPECT_EQ(t[*t.find("eval")].role, Role::evaluator);
    EXPECT_EQ(t[*t.find("dead")].status, NodeStatus::down);
    const Node& ps = t[*t.find("ps0")];
    EXPECT_EQ(ps.role, Role::parameter_server);  // "ps" is accepted
    EXPECT_EQ(ps.host, "");
    EXPECT_EQ(ps.host_name(), "ps0");
    EXPECT_EQ(ps.label(Level::rack), "");
    EXPECT_FALSE(t.find("nobody").has_value());
}

TEST(Topology, YamlAndJsonGiveTheSameCluster) {
    const Topology yaml = Topology::from_file(data_path("cluster.yaml"));
    const Topology json = Topology::from_file(data_path("cluster.json"));
    expect_same_nodes(yaml, json);
}

TEST(Topology, FromStringSniffsJson) {
    const Topology t = Topology::from_string(R"({"nodes": [{"id": "a", "gpus": 2}, {"id": "b"}]})");
    ASSERT_EQ(t.size(), 2u);
    EXPECT_EQ(t[0].gpu_count, 2u);
    EXPECT_EQ(Topology::from_string("nodes:\n  - id: a\n", Format::yaml).size(), 1u);
}

TEST(Topology, ToJsonRoundTrips) {
    const Topology original = Topology::from_file(data_path("cluster.yaml"));
    const std::string json = original.to_json();
    const Topology again = Topology::from_string(json, Format::json);
    expect_same_nodes(original, again);
    EXPECT_EQ(again.to_json(), json);
    // And through automatic detection.
    expect_same_nodes(original, Topology::from_string(json));
}

TEST(Topology, NameIsReadAndWritten) {
    const Topology t = Topology::from_string("name: demo\nnodes: [{id: a}]\n");
    EXPECT_EQ(t.name(), "demo");
    EXPECT_EQ(Topology::from_string(t.to_json()).name(), "demo");
}

TEST(Topology, ToJsonRoundTripsNodesBuiltInCode) {
    Topology t;
    Node n = make_node("weird id: with colon", "host #1", Place{"us", "us-east-1a", "r 7", "sw/3"}, Role::coordinator,
                       NodeStatus::draining);
    n.address = "[::1]:80";
    n.gpu_count = 65536;
    n.gpu_memory_bytes = (uint64_t{1} << 63) - 1;
    t.add(n);
    t.add(make_node("plain"));
    expect_same_nodes(t, Topology::from_string(t.to_json()));
}

struct BadFile {
    const char* file;
    const char* message;  // after "<path>:"
};

void PrintTo(const BadFile& f, std::ostream* os) { *os << f.file; }

class BadClusterFile : public ::testing::TestWithParam<BadFile> {};

TEST_P(BadClusterFile, ParseErrorNamesFileLineColumnAndField) {
    const auto path = data_path(std::string("bad/") + GetParam().file);
    const std::string m = error_message(Errc::parse, [&] { Topology::from_file(path); });
    EXPECT_EQ(m, path.string() + ":" + GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Errors, BadClusterFile,
    ::testing::Values(
        BadFile{"unknown_field.yaml", "5:5: nodes[1].hots: unknown field 'hots' (did you mean 'host'?)"},
        BadFile{"unknown_locality.yaml", "3:28: nodes[0].locality.zoen: unknown field 'zoen' (did you mean 'zone'?)"},
        BadFile{"wrong_type.yaml", "4:11: nodes[1].gpus: expected a non-negative integer, got a list"},
        BadFile{"duplicate_id.yaml", "4:9: nodes[2].id: duplicate node id 'a' (first used by nodes[0])"},
        BadFile{"empty.yaml", "3:8: nodes: empty cluster: 'nodes' must list at least one node"},
        BadFile{"negative_memory.yaml", "4:17: nodes[0].gpu_memory: must not be negative, got -5"},
        BadFile{"unknown_role.yaml", "5:11: nodes[1].role: unknown role 'wizard' (expected worker, chief, evaluator, "
                                     "parameter_server or coordinator)"}),
    [](const auto& param_info) {
        std::string name = param_info.param.file;
        for (char& c : name)
            if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
        return name;
    });

TEST(Topology, MalformedYamlFile) {
    const auto path = data_path("bad/syntax.yaml");
    const std::string m = error_message(Errc::parse, [&] { Topology::from_file(path); });
    EXPECT_THAT(m, HasSubstr(path.string() + ":"));
    EXPECT_THAT(m, HasSubstr("malformed YAML"));
    EXPECT_THAT(m, ::testing::ContainsRegex("syntax\\.yaml:[56]:[0-9]+: "));
}

TEST(Topology, MalformedJsonFile) {
    const auto path = data_path("bad/syntax.json");
    const std::string m = error_message(Errc::parse, [&] { Topology::from_file(path); });
    EXPECT_THAT(m, HasSubstr("malformed JSON"));
    // {"id": "b" "host": "h2"}: the error is at the second string, column 16.
    EXPECT_THAT(m, ::testing::ContainsRegex("syntax\\.json:4:1[56]: "));
}

TEST(Topology, MissingFileIsAnIoError) {
    const auto path = data_path("no-such-cluster.yaml");
    const std::string m = error_message(Errc::io, [&] { Topology::from_file(path); });
    EXPECT_THAT(m, HasSubstr("no-such-cluster.yaml"));
}

TEST(Topology, OtherBadDocuments) {
    struct Case {
        const char* text;
        const char* message;
    } cases[] = {
        {"", "c.yaml: empty document: expected a mapping with a 'nodes' list"},
        {"name: x\n", "c.yaml:1:1: missing required field 'nodes'"},
        {"- id: a\n", "c.yaml:1:1: expected a mapping, got a list"},
        {"nodes: {id: a}\n", "c.yaml:1:8: nodes: expected a list, got a mapping"},
        {"nodes:\n  - host: h\n", "c.yaml:2:5: nodes[0]: missing required field 'id'"},
        {"nodes:\n  - id: \"\"\n", "c.yaml:2:9: nodes[0].id: must not be empty"},
        {"nodes:\n  - id: a\n    gpus: 70000\n", "c.yaml:3:11: nodes[0].gpus: 70000 is too large (at most 65536)"},
        {"nodes:\n  - id: a\n    gpus: 1.5\n", "c.yaml:3:11: nodes[0].gpus: expected a non-negative integer, got '1.5'"},
        {"nodes:\n  - id: a\n    status: sleeping\n",
         "c.yaml:3:13: nodes[0].status: unknown status 'sleeping' (expected ready, joining, draining or down)"},
        {"nodes:\n  - id: a\n    locality: eu\n", "c.yaml:3:15: nodes[0].locality: expected a mapping, got 'eu'"},
        {"nodes:\n  - id: a\n    gpu_memory: lots\n",
         "c.yaml:3:17: nodes[0].gpu_memory: expected a size in bytes such as 1024 or 80GiB, got 'lots'"},
        {"nodes:\n  - id: a\n    id: b\n", "c.yaml:3:5: nodes[0].id: duplicate field 'id'"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.text);
        EXPECT_EQ(error_message(Errc::parse, [&] { Topology::from_string(c.text, Format::yaml, "c.yaml"); }), c.message);
    }
}

TEST(Topology, JsonErrorsUseJsonPositions) {
    const std::string text = "{\"nodes\": [\n  {\"id\": \"a\"},\n  {\"id\": \"b\", \"gpus\": [1]}\n]}";
    EXPECT_EQ(error_message(Errc::parse, [&] { Topology::from_string(text, Format::automatic, "c.json"); }),
              "c.json:3:23: nodes[1].gpus: expected a non-negative integer, got a list");
}

TEST(Topology, ListingFormatIsRejected) {
    const std::string m = error_message(Errc::invalid_argument, [] { Topology::from_string("a 1\n", Format::listing); });
    EXPECT_THAT(m, HasSubstr("listing"));
}

TEST(Topology, AddFindAndAt) {
    Topology t;
    t.add(make_node("a"));
    t.add(make_node("b", "h"));
    EXPECT_EQ(t.size(), 2u);
    EXPECT_EQ(t.find("b"), 1u);
    t.at("b").gpu_count = 4;
    EXPECT_EQ(t[1].gpu_count, 4u);
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { t.add(make_node("a")); }), HasSubstr("'a'"));
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { t.add(make_node("")); }), HasSubstr("empty"));
    EXPECT_THAT(error_message(Errc::not_found, [&] { t.at("zz"); }), HasSubstr("'zz'"));
    EXPECT_EQ(t.size(), 2u);
}

TEST(Names, RoundTrip) {
    for (Role r : {Role::worker, Role::chief, Role::evaluator, Role::parameter_server, Role::coordinator})
        EXPECT_EQ(parse_role(to_string(r)), r);
    for (NodeStatus s : {NodeStatus::ready, NodeStatus::joining, NodeStatus::draining, NodeStatus::down})
        EXPECT_EQ(parse_status(to_string(s)), s);
    for (Level l : {Level::host, Level::network_switch, Level::rack, Level::zone, Level::region})
        EXPECT_EQ(parse_level(to_string(l)), l);
    EXPECT_EQ(to_string(Level::network_switch), "switch");
    EXPECT_EQ(parse_role("ps"), Role::parameter_server);
    EXPECT_EQ(parse_role("Worker"), std::nullopt);
    EXPECT_EQ(parse_status(""), std::nullopt);
    EXPECT_EQ(parse_level("datacenter"), std::nullopt);
    EXPECT_STREQ(errc_name(Errc::parse), "parse error");
    EXPECT_STREQ(errc_name(Errc::unsatisfiable), "unsatisfiable");
}

}  // namespace
}  // namespace cohort::test
