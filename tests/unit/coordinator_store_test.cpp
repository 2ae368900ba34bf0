// coordinator/state: the key-value store of a job's generation, with the
// semantics of cohort::Store (store.hpp), scoped per job and generation.
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

Node node(std::string id) {
    Node n;
    n.id = std::move(id);
    return n;
}



class CoordinatorStore : public ::testing::Test {
protected:
    void SetUp() override {
        JobSettings s;
        s.min_nodes = 1;
        s.max_nodes = 2;
        state.create_job("j", s, t);
        state.create_job("k", s, t);
        state.join("k", node("x"), t);
        state.tick(t + 3);
    }
    void TearDown() override { expect_replays(state); }
    void form_generation_one() {
        state.join("j", node("a"), t);
        state.join("j", node("b"), t);
        ASSERT_EQ(state.job("j").generation(), 1u);
    }

    CoordinatorState state;
    double t = 10.0;
};

TEST_F(CoordinatorStore, OpensWithTheFirstWorld) {
    expect_error([&] { state.store_set("j", 0, "k", "v", t); }, Errc::mismatch,
                 "store of job 'j': no world has formed yet; the store opens with generation 1");
    expect_error([&] { state.store_get("nope", 1, "k"); }, Errc::not_found, "no job 'nope'");
}

TEST_F(CoordinatorStore, SetGetAddRemove) {
    form_generation_one();
    EXPECT_EQ(state.store_get("j", 1, "addr/0"), std::nullopt);
    state.store_set("j", 1, "addr/0", "10.0.0.1:4000", t);
    EXPECT_EQ(state.store_get("j", 1, "addr/0"), "10.0.0.1:4000");
    state.store_set("j", 1, "addr/0", "10.0.0.2:4000", t);  // overwrite
    EXPECT_EQ(state.store_get("j", 1, "addr/0"), "10.0.0.2:4000");

    EXPECT_EQ(state.store_add("j", 1, "count", 5, t), 5);  // absent counts as 0
    EXPECT_EQ(state.store_add("j", 1, "count", -7, t), -2);
    EXPECT_EQ(state.store_get("j", 1, "count"), "-2");
    expect_error([&] { state.store_add("j", 1, "addr/0", 1, t); }, Errc::invalid_argument,
                 "store coordinator job 'j' generation 1: add: the value of key 'addr/0' is not an integer: "
                 "'10.0.0.2:4000'");
    state.store_set("j", 1, "big", std::to_string(INT64_MAX), t);
    expect_error([&] { state.store_add("j", 1, "big", 1, t); }, Errc::invalid_argument, "overflows key 'big'");

    EXPECT_TRUE(state.store_remove("j", 1, "count", t));
    EXPECT_FALSE(state.store_remove("j", 1, "count", t));
    EXPECT_EQ(state.store_get("j", 1, "count"), std::nullopt);
}

TEST_F(CoordinatorStore, CompareAndSetReturnsTheValueAfterTheCall) {
    form_generation_one();
    // Expected absent, absent: stores.
    EXPECT_EQ(state.store_compare_and_set("j", 1, "leader", std::nullopt, "a", t), "a");
    // Expected absent, present: the current value says who won.
    EXPECT_EQ(state.store_compare_and_set("j", 1, "leader", std::nullopt, "b", t), "a");
    EXPECT_EQ(state.store_compare_and_set("j", 1, "leader", std::string("x"), "b", t), "a");
    EXPECT_EQ(state.store_compare_and_set("j", 1, "leader", std::string("a"), "b", t), "b");
    // Expected a value, absent: nothing stored, nothing there.
    EXPECT_EQ(state.store_compare_and_set("j", 1, "other", std::string("a"), "b", t), std::nullopt);
    EXPECT_EQ(state.store_get("j", 1, "other"), std::nullopt);
}

TEST_F(CoordinatorStore, MissingKeysAndVersionsForWaiters) {
    form_generation_one();
    const std::vector<std::string> keys = {"r0", "r1", "r2"};
    EXPECT_EQ(state.store_missing("j", 1, keys), keys);
    const uint64_t v0 = state.store_version("j", 1);
    state.store_set("j", 1, "r1", "x", t);
    EXPECT_GT(state.store_version("j", 1), v0);
    EXPECT_EQ(state.store_missing("j", 1, keys), (std::vector<std::string>{"r0", "r2"}));
    EXPECT_EQ(state.job("j").store().find("r1")->version, state.store_version("j", 1));
    // A failed compare_and_set or get changes nothing.
    const uint64_t v1 = state.store_version("j", 1);
    state.store_compare_and_set("j", 1, "r1", std::string("y"), "z", t);
    state.store_get("j", 1, "r1");
    EXPECT_EQ(state.store_version("j", 1), v1);
    state.store_remove("j", 1, "r1", t);
    EXPECT_EQ(state.store_version("j", 1), v1 + 1);
}

TEST_F(CoordinatorStore, ScopedByJobAndGeneration) {
    form_generation_one();
    state.store_set("j", 1, "key", "gen1", t);
    state.store_set("k", 1, "key", "other job", t);
    EXPECT_EQ(state.store_get("k", 1, "key"), "other job");

    state.request_round("j", "a", t);
    state.store_set("j", 1, "during", "the round", t);  // generation 1 still runs while the round is open
    state.join("j", node("a"), t);
    state.join("j", node("b"), t);
    ASSERT_EQ(state.job("j").generation(), 2u);
    EXPECT_EQ(state.store_get("j", 2, "key"), std::nullopt);
    EXPECT_EQ(state.store_version("j", 2), 0u);
    expect_error([&] { state.store_get("j", 1, "key"); }, Errc::mismatch,
                 "store of job 'j': generation 1 is over; the job is at generation 2");
    expect_error([&] { state.store_set("j", 3, "key", "v", t); }, Errc::mismatch,
                 "store of job 'j': generation 3 has not formed; the job is at generation 2");
    EXPECT_EQ(state.store_get("k", 1, "key"), "other job");
}

TEST_F(CoordinatorStore, KeysAndValuesAreCheckedLikeEveryStore) {
    form_generation_one();
    expect_error([&] { state.store_set("j", 1, "", "v", t); }, Errc::invalid_argument,
                 "store coordinator job 'j' generation 1: empty key");
    expect_error([&] { state.store_get("j", 1, std::string(1025, 'k')); }, Errc::invalid_argument,
                 "keys are at most 1024 bytes");
    expect_error([&] { state.store_set("j", 1, "v", std::string((16u << 20) + 1, 'v'), t); }, Errc::invalid_argument,
                 "values are at most 16 MiB");
}

TEST_F(CoordinatorStore, BinaryKeysAndValuesSurviveTheJournal) {
    form_generation_one();
    const std::string key("bin\xff\x00key", 8);
    const std::string value("\x00\x01\xfe\xff\xc3\x28", 6);
    state.store_set("j", 1, key, value, t);
    state.store_set("j", 1, "text", "héllo \"quoted\"\n", t);
    EXPECT_EQ(state.store_get("j", 1, key), value);
    // TearDown replays the events through JSON text and compares.
}

TEST_F(CoordinatorStore, OperationsAreCounted) {
    form_generation_one();
    state.store_set("j", 1, "a", "1", t);
    state.store_get("j", 1, "a");
    state.store_add("j", 1, "n", 1, t);
    const std::vector<std::string> keys = {"a"};
    state.store_missing("j", 1, keys);
    const auto metrics = state.metrics();
    const JobMetrics& j = metrics[0];
    ASSERT_EQ(j.job, "j");
    EXPECT_EQ(j.store_ops[static_cast<std::size_t>(StoreOp::set)], 1u);
    EXPECT_EQ(j.store_ops[static_cast<std::size_t>(StoreOp::get)], 1u);
    EXPECT_EQ(j.store_ops[static_cast<std::size_t>(StoreOp::add)], 1u);
    EXPECT_EQ(j.store_ops[static_cast<std::size_t>(StoreOp::wait)], 1u);
    EXPECT_EQ(j.store_keys, 2u);
}

}  // namespace
}  // namespace cohort::coord
