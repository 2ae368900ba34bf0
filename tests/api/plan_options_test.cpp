// PlanOptions: the custom strategy's contract, option validation, names and
// the plan's JSON form.
#include "plan_checks.hpp"

#include <cohort/sharding.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;

TEST(Custom, CalledForEveryReplicaAndHonoured) {
    const ShardSet shards = even_shards(25);
    const Topology t = flat_cluster(7);
    std::vector<std::vector<uint32_t>> expected(25);
    int calls = 0;
    PlanOptions o;
    o.strategy = Strategy::custom;
    o.replication = 3;
    o.custom = [&](uint64_t shard, uint32_t replica, std::span<const uint32_t> taken, uint32_t n) -> uint32_t {
        ++calls;
        EXPECT_EQ(n, 7u);
        EXPECT_LT(shard, 25u);
        EXPECT_EQ(replica, expected[shard].size()) << "replicas are asked for in order";
        EXPECT_EQ(std::vector<uint32_t>(taken.begin(), taken.end()), expected[shard]) << "taken = earlier replicas";
        // Deliberately unbalanced: everything near member 6.
        uint32_t m = 6;
        while (std::find(taken.begin(), taken.end(), m) != taken.end()) --m;
        expected[shard].push_back(m);
        return m;
    };
    const ShardPlan plan = ShardPlan::create(shards, t, o);
    EXPECT_EQ(calls, 75);
    check_plan(plan);
    for (uint64_t s = 0; s < 25; ++s) {
        const auto owners = plan.owners(s);
        EXPECT_EQ(std::vector<uint32_t>(owners.begin(), owners.end()), expected[s]);
    }
    EXPECT_EQ(plan.load(6), 25u);  // no cap overrides the function
    EXPECT_EQ(plan.load(0), 0u);
}

TEST(Custom, ReturningATakenMemberIsACallbackError) {
    PlanOptions o;
    o.strategy = Strategy::custom;
    o.replication = 2;
    o.custom = [](uint64_t, uint32_t, std::span<const uint32_t>, uint32_t) -> uint32_t { return 1; };
    const std::string m =
        error_message(Errc::callback, [&] { ShardPlan::create(even_shards(5), flat_cluster(3), o); });
    EXPECT_EQ(m, "custom strategy returned member 1 for shard 0 replica 1, which already holds a replica of that shard");
}

TEST(Custom, ReturningAnOutOfRangeMemberIsACallbackError) {
    PlanOptions o;
    o.strategy = Strategy::custom;
    o.custom = [](uint64_t shard, uint32_t, std::span<const uint32_t>, uint32_t n) -> uint32_t {
        return shard == 3 ? n : 0;
    };
    EXPECT_EQ(error_message(Errc::callback, [&] { ShardPlan::create(even_shards(5), flat_cluster(4), o); }),
              "custom strategy returned member 4 for shard 3 replica 0, but there are only 4 members");
    o.custom = [](uint64_t, uint32_t, std::span<const uint32_t>, uint32_t) -> uint32_t { return UINT32_MAX; };
    error_message(Errc::callback, [&] { ShardPlan::create(even_shards(5), flat_cluster(4), o); });
}

TEST(Custom, NeedsAFunction) {
    PlanOptions o;
    o.strategy = Strategy::custom;
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { ShardPlan::create(even_shards(5), flat_cluster(2), o); }),
                HasSubstr("assignment function"));
}

TEST(PlanOptions, BadValuesAreInvalidArguments) {
    const ShardSet shards = even_shards(10);
    const Topology t = flat_cluster(4);
    auto fails = [&](PlanOptions o, const char* needle) {
        EXPECT_THAT(error_message(Errc::invalid_argument, [&] { ShardPlan::create(shards, t, o); }), HasSubstr(needle));
    };
    PlanOptions o;
    o.replication = 0;
    fails(o, "replication must be at least 1");
    o = {};
    o.load_slack = -0.1;
    fails(o, "load_slack");
    o.load_slack = std::numeric_limits<double>::infinity();
    fails(o, "load_slack");
    o = {};
    o.load_weight = -1;
    fails(o, "weights");
    o = {};
    o.locality_weight = std::nan("");
    fails(o, "weights");
    o = {};
    o.strategy = static_cast<Strategy>(17);
    fails(o, "strategy");
}

TEST(PlanOptions, NoReadyMemberIsUnsatisfiable) {
    Topology t = flat_cluster(2);
    t.at("node-0").status = NodeStatus::down;
    t.at("node-1").status = NodeStatus::down;
    EXPECT_THAT(error_message(Errc::unsatisfiable, [&] { ShardPlan::create(even_shards(3), t, {}); }),
                HasSubstr("no member to assign shards to"));
    error_message(Errc::unsatisfiable, [&] { ShardPlan::create(even_shards(3), Topology{}, {}); });
}

TEST(PlanOptions, Defaults) {
    const PlanOptions o;
    EXPECT_EQ(o.strategy, Strategy::hash);
    EXPECT_EQ(o.replication, 1u);
    const ShardPlan plan = ShardPlan::create(even_shards(10), flat_cluster(3));
    EXPECT_EQ(plan.options().strategy, Strategy::hash);
    check_plan(plan);
}

TEST(PlanOptions, RolesChooseTheMembers) {
    Topology t = flat_cluster(4);
    t.at("node-0").role = Role::chief;
    t.at("node-1").role = Role::evaluator;
    t.at("node-2").role = Role::parameter_server;
    const ShardPlan training = ShardPlan::create(even_shards(10), t);
    ASSERT_EQ(training.member_count(), 2u);  // worker and chief by default
    EXPECT_EQ(training.members()[0].id, "node-0");
    EXPECT_EQ(training.members()[1].id, "node-3");
    PlanOptions o;
    o.roles = role_bit(Role::parameter_server);
    const ShardPlan ps = ShardPlan::create(even_shards(10), t, o);
    ASSERT_EQ(ps.member_count(), 1u);
    EXPECT_EQ(ps.members()[0].id, "node-2");
    EXPECT_EQ(ps.load(0), 10u);
    o.roles = kAllRoles;
    EXPECT_EQ(ShardPlan::create(even_shards(10), t, o).member_count(), 4u);
    o.roles = role_bit(Role::coordinator);
    error_message(Errc::unsatisfiable, [&] { ShardPlan::create(even_shards(10), t, o); });
    o.roles = 0;
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { ShardPlan::create(even_shards(10), t, o); }),
                HasSubstr("role mask"));
    o.roles = kAllRoles | (1u << 9);
    error_message(Errc::invalid_argument, [&] { ShardPlan::create(even_shards(10), t, o); });
}

TEST(LoadLocality, ReadsTheMap) {
    const auto entries = load_locality(data_path("locality.yaml"));
    ASSERT_EQ(entries.size(), 3u);
    EXPECT_EQ(entries[0].node_id, "n0");
    EXPECT_EQ(entries[0].file_path, "train/part-000.rec");
    EXPECT_DOUBLE_EQ(entries[0].score, 1.0);
    EXPECT_EQ(entries[1].file_path, "train/part-001.rec");
    EXPECT_DOUBLE_EQ(entries[1].score, 0.5);
    EXPECT_EQ(entries[2].node_id, "n1");
    EXPECT_EQ(entries[2].file_path, "val/part-000.rec");
    // And a plan follows it.
    PlanOptions o;
    o.strategy = Strategy::locality;
    o.locality = entries;
    Topology t;
    for (const char* id : {"n0", "n1", "n2"}) t.add(make_node(id));
    const ShardSet shards = ShardSet::split(Dataset::from_file(data_path("dataset.txt")), {.shard_count = 4});
    const ShardPlan plan = ShardPlan::create(shards, t, o);
    EXPECT_EQ(plan.members()[plan.owner(0)].id, "n0");  // train/part-000.rec
    EXPECT_EQ(plan.members()[plan.owner(3)].id, "n1");  // ends in val/part-000.rec
}

TEST(LoadLocality, Errors) {
    const auto score = data_path("bad/locality_score.yaml");
    EXPECT_EQ(error_message(Errc::parse, [&] { load_locality(score); }),
              score.string() + ":2:13: n1.a.rec: score must be in [0, 1], got 1.5");
    const auto type = data_path("bad/locality_type.yaml");
    EXPECT_THAT(error_message(Errc::parse, [&] { load_locality(type); }),
                HasSubstr(type.string() + ":1:5: n0: expected a mapping"));
    error_message(Errc::io, [] { load_locality(data_path("no-such-locality.yaml")); });
    const auto node = data_path("bad/locality_duplicate_node.yaml");
    EXPECT_EQ(error_message(Errc::parse, [&] { load_locality(node); }),
              node.string() + ":2:1: n0: duplicate node 'n0'");
    const auto file = data_path("bad/locality_duplicate_file.yaml");
    EXPECT_EQ(error_message(Errc::parse, [&] { load_locality(file); }),
              file.string() + ":2:18: n1.a.rec: duplicate file 'a.rec'");
}

TEST(Locality, OverTheCapBeforeSharingAHost) {
    // Two hosts, replication 2, more shards than the cap lets the lone node
    // on h0 take: it goes over the cap rather than pairing n1 with n2 on h2.
    Topology t;
    for (auto [id, host] : {std::pair{"n0", "h0"}, {"n1", "h2"}, {"n2", "h2"}}) {
        Node n;
        n.id = id;
        n.host = host;
        t.add(n);
    }
    Dataset d;
    d.add({"f", 1000, std::nullopt});
    PlanOptions o;
    o.strategy = Strategy::locality;
    o.replication = 2;
    const ShardPlan plan = ShardPlan::create(ShardSet::split(d, {0, 7}), t, o);
    for (uint64_t s = 0; s < plan.shard_count(); ++s) {
        const auto owners = plan.owners(s);
        EXPECT_NE(plan.members()[owners[0]].host, plan.members()[owners[1]].host) << "shard " << s;
    }
}

TEST(StrategyNames, RoundTrip) {
    for (Strategy s : {Strategy::round_robin, Strategy::hash, Strategy::locality, Strategy::random, Strategy::custom})
        EXPECT_EQ(parse_strategy(to_string(s)), s);
    EXPECT_EQ(to_string(Strategy::round_robin), "round_robin");
    EXPECT_EQ(parse_strategy("round-robin"), Strategy::round_robin);
    EXPECT_EQ(parse_strategy("Hash"), std::nullopt);
    EXPECT_EQ(parse_strategy(""), std::nullopt);
}

TEST(PlanJson, NamesOwnersByIdAndCarriesTheLayout) {
    Dataset d;
    d.add({"a.rec", 10, 4});
    d.add({"b.rec", 10, {}});
    const ShardSet shards = ShardSet::split(d, {.shard_count = 2});
    PlanOptions o;
    o.strategy = Strategy::round_robin;
    o.replication = 2;
    o.seed = 77;
    const ShardPlan plan = ShardPlan::create(shards, flat_cluster(3), o);
    const std::string json = plan.to_json();
    EXPECT_THAT(json, HasSubstr("\"strategy\":\"round_robin\""));
    EXPECT_THAT(json, HasSubstr("\"replication\":2"));
    EXPECT_THAT(json, HasSubstr("\"seed\":77"));
    EXPECT_THAT(json, HasSubstr("\"moved\":0"));
    EXPECT_THAT(json, HasSubstr("{\"path\":\"a.rec\",\"bytes\":10,\"records\":4}"));
    EXPECT_THAT(json, HasSubstr("\"owners\":[\"node-0\",\"node-1\"]"));
    EXPECT_THAT(json, HasSubstr("\"owners\":[\"node-1\",\"node-2\"]"));
    EXPECT_THAT(json, HasSubstr("\"segments\":[{\"file\":1,\"begin\":0,\"end\":10}]"));
}

}  // namespace
}  // namespace cohort::test
