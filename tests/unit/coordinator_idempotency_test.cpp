// coordinator/server: the table of first answers by Idempotency-Key. A
// retry within the window gets the first answer; the same key on another
// request is told apart; keys are forgotten by age, by count and by size;
// malformed keys are refused with a message that says what a key must be.
#include "coordinator/server/idempotency.hpp"

#include <cohort/error.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace cohort::coord::server {
namespace {

using namespace std::chrono_literals;
using Clock = IdempotencyTable::Clock;
using ::testing::HasSubstr;

Response answer(std::string body, unsigned status = 200) {
    Response r;
    r.status = status;
    r.body = std::move(body);
    return r;
}

TEST(IdempotencyTable, RetryGetsTheFirstAnswer) {
    IdempotencyTable table({10min, 100, 1u << 20});
    const auto t0 = Clock::now();
    const std::string add = request_fingerprint("POST", "/v1/jobs/j/store/1/n/add", R"({"delta":5})");
    EXPECT_EQ(table.find("k1", add, t0).kind, IdempotencyTable::Lookup::miss);
    table.remember("k1", add, answer(R"({"value":5})"), t0);
    const auto again = table.find("k1", add, t0 + 1s);
    ASSERT_EQ(again.kind, IdempotencyTable::Lookup::replay);
    EXPECT_EQ(again.response->body, R"({"value":5})");
    EXPECT_EQ(again.response->status, 200u);
    // Error answers are answers too: a retry hears the same refusal.
    table.remember("k2", add, answer(R"({"error":"conflict"})", 409), t0);
    EXPECT_EQ(table.find("k2", add, t0).response->status, 409u);
    EXPECT_EQ(table.size(), 2u);
}

TEST(IdempotencyTable, SameKeyOnAnotherRequestIsReused) {
    IdempotencyTable table({10min, 100, 1u << 20});
    const auto t0 = Clock::now();
    const std::string first = request_fingerprint("POST", "/v1/jobs/j/store/1/n/add", R"({"delta":5})");
    table.remember("k", first, answer("{}"), t0);
    for (const std::string& other : {request_fingerprint("POST", "/v1/jobs/j/store/1/n/add", R"({"delta":6})"),
                                     request_fingerprint("POST", "/v1/jobs/j/store/1/m/add", R"({"delta":5})"),
                                     request_fingerprint("PUT", "/v1/jobs/j/store/1/n/add", R"({"delta":5})")}) {
        const auto seen = table.find("k", other, t0);
        ASSERT_EQ(seen.kind, IdempotencyTable::Lookup::reused) << other;
        EXPECT_EQ(*seen.fingerprint, first);
    }
    EXPECT_THAT(first, HasSubstr("POST /v1/jobs/j/store/1/n/add (body of 11 bytes"));
}

TEST(IdempotencyTable, KeysExpireAfterTheWindow) {
    IdempotencyTable table({1min, 100, 1u << 20});
    const auto t0 = Clock::now();
    table.remember("old", "f", answer("1"), t0);
    table.remember("new", "f", answer("2"), t0 + 30s);
    EXPECT_EQ(table.find("old", "f", t0 + 59s).kind, IdempotencyTable::Lookup::replay);
    EXPECT_EQ(table.find("old", "f", t0 + 61s).kind, IdempotencyTable::Lookup::miss);
    EXPECT_EQ(table.find("new", "f", t0 + 61s).kind, IdempotencyTable::Lookup::replay);
    EXPECT_EQ(table.size(), 1u);
    EXPECT_EQ(table.find("new", "f", t0 + 91s).kind, IdempotencyTable::Lookup::miss);
    EXPECT_EQ(table.size(), 0u);
    EXPECT_EQ(table.bytes(), 0u);
}

TEST(IdempotencyTable, OldestKeysGoFirstAtTheCaps) {
    const auto t0 = Clock::now();
    IdempotencyTable by_count({10min, 3, 1u << 20});
    for (int i = 0; i < 5; ++i) by_count.remember("k" + std::to_string(i), "f", answer("x"), t0 + i * 1ms);
    EXPECT_EQ(by_count.size(), 3u);
    EXPECT_EQ(by_count.find("k0", "f", t0).kind, IdempotencyTable::Lookup::miss);
    EXPECT_EQ(by_count.find("k1", "f", t0).kind, IdempotencyTable::Lookup::miss);
    EXPECT_EQ(by_count.find("k4", "f", t0).kind, IdempotencyTable::Lookup::replay);

    // Bodies of 1,000 bytes in 4,000 bytes of room: never more than fits.
    IdempotencyTable by_size({10min, 1000, 4000});
    for (int i = 0; i < 20; ++i) by_size.remember("k" + std::to_string(i), "f", answer(std::string(1000, 'v')), t0);
    EXPECT_LE(by_size.bytes(), 4000u);
    EXPECT_GE(by_size.size(), 2u);
    EXPECT_EQ(by_size.find("k19", "f", t0).kind, IdempotencyTable::Lookup::replay);
    EXPECT_EQ(by_size.find("k0", "f", t0).kind, IdempotencyTable::Lookup::miss);
    // An answer larger than all the room is not kept, and evicts nothing.
    const std::size_t before = by_size.size();
    by_size.remember("huge", "f", answer(std::string(5000, 'v')), t0);
    EXPECT_EQ(by_size.find("huge", "f", t0).kind, IdempotencyTable::Lookup::miss);
    EXPECT_EQ(by_size.size(), before);

    IdempotencyTable off({0ms, 100, 1u << 20});
    off.remember("k", "f", answer("x"), t0);
    EXPECT_EQ(off.size(), 0u);
}

TEST(IdempotencyTable, RememberedAgainAndClear) {
    IdempotencyTable table({1min, 2, 1u << 20});
    const auto t0 = Clock::now();
    table.remember("a", "f", answer("1"), t0);
    table.remember("a", "f", answer("2"), t0 + 50s);  // a stale record of the first stays behind
    table.remember("b", "f", answer("3"), t0 + 50s);
    EXPECT_EQ(table.size(), 2u);
    EXPECT_EQ(table.find("a", "f", t0 + 70s).response->body, "2");
    table.clear();
    EXPECT_EQ(table.size(), 0u);
    EXPECT_EQ(table.bytes(), 0u);
    EXPECT_EQ(table.find("a", "f", t0 + 70s).kind, IdempotencyTable::Lookup::miss);
}

TEST(IdempotencyKey, MalformedKeysAreRefused) {
    EXPECT_EQ(checked_idempotency_key("0123456789abcdef0123456789abcdef"), "0123456789abcdef0123456789abcdef");
    for (const std::string& bad : {std::string(), std::string(129, 'a'), std::string("has space"),
                                   std::string("nul\0byte", 8), std::string("\x7f")}) {
        try {
            checked_idempotency_key(bad);
            ADD_FAILURE() << "accepted " << bad.size() << " bytes";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), Errc::invalid_argument);
            EXPECT_THAT(e.what(), HasSubstr("Idempotency-Key header must be 1 to 128 visible ASCII characters"));
        }
    }
}

}  // namespace
}  // namespace cohort::coord::server
