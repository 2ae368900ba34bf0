// The table of first answers by Idempotency-Key (coordinator/state) and the
// key's check (coordinator/server). A retry within the window gets the
// first answer; the same key on another request is told apart; keys are
// forgotten by age, by count and by size, and survive a snapshot; malformed
// keys are refused with a message that says what a key must be.
#include "coordinator/server/idempotency.hpp"
#include "coordinator/state/answers.hpp"

#include <cohort/error.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include <boost/json/parse.hpp>

namespace cohort::coord {
namespace {

using server::checked_idempotency_key;
using server::request_fingerprint;
using ::testing::HasSubstr;
using Lookup = AnswerTable::Lookup;

KeptAnswer answer(std::string body, unsigned status = 200) {
    return {status, std::move(body), "application/json", ""};
}

AnswerLimits limits(double window, std::size_t entries, std::size_t bytes) {
    return {window, entries, bytes};
}

constexpr double t0 = 1.7e9;  // Unix time, as the server passes

TEST(AnswerTable, RetryGetsTheFirstAnswer) {
    AnswerTable table(limits(600, 100, 1u << 20));
    const std::string add = request_fingerprint("POST", "/v1/jobs/j/store/1/n/add", R"({"delta":5})");
    EXPECT_EQ(table.find("k1", add, t0).kind, Lookup::miss);
    table.remember("k1", add, answer(R"({"value":5})"), t0);
    const auto again = table.find("k1", add, t0 + 1);
    ASSERT_EQ(again.kind, Lookup::replay);
    EXPECT_EQ(again.answer->body, R"({"value":5})");
    EXPECT_EQ(again.answer->status, 200u);
    // Error answers are answers too: a retry hears the same refusal.
    table.remember("k2", add, answer(R"({"error":"conflict"})", 409), t0);
    EXPECT_EQ(table.find("k2", add, t0).answer->status, 409u);
    EXPECT_EQ(table.size(), 2u);
}

TEST(AnswerTable, SameKeyOnAnotherRequestIsReused) {
    AnswerTable table(limits(600, 100, 1u << 20));
    const std::string first = request_fingerprint("POST", "/v1/jobs/j/store/1/n/add", R"({"delta":5})");
    table.remember("k", first, answer("{}"), t0);
    for (const std::string& other : {request_fingerprint("POST", "/v1/jobs/j/store/1/n/add", R"({"delta":6})"),
                                     request_fingerprint("POST", "/v1/jobs/j/store/1/m/add", R"({"delta":5})"),
                                     request_fingerprint("PUT", "/v1/jobs/j/store/1/n/add", R"({"delta":5})")}) {
        const auto seen = table.find("k", other, t0);
        ASSERT_EQ(seen.kind, Lookup::reused) << other;
        EXPECT_EQ(*seen.fingerprint, first);
    }
    EXPECT_THAT(first, HasSubstr("POST /v1/jobs/j/store/1/n/add (body of 11 bytes"));
}

TEST(AnswerTable, KeysExpireAfterTheWindow) {
    AnswerTable table(limits(60, 100, 1u << 20));
    table.remember("old", "f", answer("1"), t0);
    table.remember("new", "f", answer("2"), t0 + 30);
    EXPECT_EQ(table.find("old", "f", t0 + 59).kind, Lookup::replay);
    EXPECT_EQ(table.find("old", "f", t0 + 61).kind, Lookup::miss);
    EXPECT_EQ(table.find("new", "f", t0 + 61).kind, Lookup::replay);
    // Looking changes nothing; the next remember() lets expired keys go.
    EXPECT_EQ(table.size(), 2u);
    table.remember("newest", "f", answer("3"), t0 + 61);
    EXPECT_EQ(table.size(), 2u);
    EXPECT_EQ(table.find("new", "f", t0 + 91).kind, Lookup::miss);
    table.remember("last", "f", answer("4"), t0 + 200);
    EXPECT_EQ(table.size(), 1u);
}

TEST(AnswerTable, ASnapshotKeepsOrderAndTimes) {
    AnswerTable table(limits(60, 100, 1u << 20));
    table.remember("a", "fa", answer("1"), t0);
    table.remember("b", "fb", {405, std::string("\xff\x00" "bin", 5), "text/plain", "GET, PUT"}, t0 + 10);
    table.remember("a", "fa", answer("2"), t0 + 20);  // again: now the newest
    AnswerTable copy(limits(60, 100, 1u << 20));
    copy.from_json(table.to_json(), "answers");
    EXPECT_EQ(copy.size(), 2u);
    EXPECT_EQ(copy.bytes(), table.bytes());
    EXPECT_EQ(*copy.find("b", "fb", t0 + 10).answer, (KeptAnswer{405, std::string("\xff\x00" "bin", 5), "text/plain", "GET, PUT"}));
    EXPECT_EQ(copy.find("a", "fa", t0 + 75).answer->body, "2");  // kept at t0 + 20
    EXPECT_EQ(copy.find("b", "fb", t0 + 75).kind, Lookup::miss);   // kept at t0 + 10
    // Under a lower cap the oldest goes first.
    AnswerTable small(limits(60, 1, 1u << 20));
    small.from_json(table.to_json(), "answers");
    EXPECT_EQ(small.size(), 1u);
    EXPECT_EQ(small.find("a", "fa", t0 + 20).kind, Lookup::replay);

    for (const char* bad : {R"({})", R"([{"key":"k"}])", R"([{"key":"k","fingerprint":"f","status":99,"body":"",)"
                                                       R"("content_type":"x","kept_at":1}])"}) {
        try {
            AnswerTable t;
            t.from_json(boost::json::parse(bad), "coordinator snapshot: answers");
            ADD_FAILURE() << "accepted " << bad;
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), Errc::parse);
            EXPECT_THAT(e.what(), HasSubstr("coordinator snapshot: answers"));
        }
    }
}

TEST(AnswerTable, LowerLimitsTrimAtOnce) {
    AnswerTable table(limits(60, 10, 1u << 20));
    for (int i = 0; i < 5; ++i) table.remember("k" + std::to_string(i), "f", answer("x"), t0 + i);
    table.set_limits(limits(60, 2, 1u << 20));
    EXPECT_EQ(table.size(), 2u);
    EXPECT_EQ(table.find("k4", "f", t0 + 5).kind, Lookup::replay);
    EXPECT_EQ(table.find("k2", "f", t0 + 5).kind, Lookup::miss);
    table.set_limits(limits(0, 2, 1u << 20));
    EXPECT_EQ(table.size(), 0u);
}

TEST(AnswerTable, OldestKeysGoFirstAtTheCaps) {
    AnswerTable by_count(limits(600, 3, 1u << 20));
    for (int i = 0; i < 5; ++i) by_count.remember("k" + std::to_string(i), "f", answer("x"), t0 + i * 0.001);
    EXPECT_EQ(by_count.size(), 3u);
    EXPECT_EQ(by_count.find("k0", "f", t0).kind, Lookup::miss);
    EXPECT_EQ(by_count.find("k1", "f", t0).kind, Lookup::miss);
    EXPECT_EQ(by_count.find("k4", "f", t0).kind, Lookup::replay);

    // Bodies of 1,000 bytes in 4,000 bytes of room: never more than fits.
    AnswerTable by_size(limits(600, 1000, 4000));
    for (int i = 0; i < 20; ++i) by_size.remember("k" + std::to_string(i), "f", answer(std::string(1000, 'v')), t0);
    EXPECT_LE(by_size.bytes(), 4000u);
    EXPECT_GE(by_size.size(), 2u);
    EXPECT_EQ(by_size.find("k19", "f", t0).kind, Lookup::replay);
    EXPECT_EQ(by_size.find("k0", "f", t0).kind, Lookup::miss);
    // An answer larger than all the room is not kept, and evicts nothing.
    const std::size_t before = by_size.size();
    by_size.remember("huge", "f", answer(std::string(5000, 'v')), t0);
    EXPECT_EQ(by_size.find("huge", "f", t0).kind, Lookup::miss);
    EXPECT_EQ(by_size.size(), before);

    AnswerTable off(limits(0, 100, 1u << 20));
    off.remember("k", "f", answer("x"), t0);
    EXPECT_EQ(off.size(), 0u);
}

TEST(AnswerTable, RememberedAgainAndClear) {
    AnswerTable table(limits(60, 2, 1u << 20));
    table.remember("a", "f", answer("1"), t0);
    table.remember("a", "f", answer("2"), t0 + 50);  // a stale record of the first stays behind
    table.remember("b", "f", answer("3"), t0 + 50);
    EXPECT_EQ(table.size(), 2u);
    EXPECT_EQ(table.find("a", "f", t0 + 70).answer->body, "2");
    table.clear();
    EXPECT_EQ(table.size(), 0u);
    EXPECT_EQ(table.bytes(), 0u);
    EXPECT_EQ(table.find("a", "f", t0 + 70).kind, Lookup::miss);
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
}  // namespace cohort::coord
