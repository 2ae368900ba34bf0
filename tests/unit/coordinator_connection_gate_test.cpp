// coordinator/server: the connection gate's accounting with small caps:
// the cap, the cap per client, idle connections shed while crowded and the
// longest idle one displaced at the cap.
#include "coordinator/server/connection_gate.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace cohort::coord::server {
namespace {

using namespace std::chrono_literals;
using Clock = ConnectionGate::Clock;

ConnectionLimits limits(std::size_t max, std::size_t per_client) {
    return {max, per_client, std::chrono::milliseconds(2000)};
}

TEST(ConnectionGate, RefusesPastTheCapAndPastTheCapPerClient) {
    ConnectionGate gate(limits(5, 2));
    EXPECT_FALSE(gate.admit("10.0.0.1"));
    EXPECT_FALSE(gate.admit("10.0.0.1"));
    EXPECT_EQ(gate.admit("10.0.0.1"), Refusal::per_client);
    EXPECT_FALSE(gate.admit("10.0.0.2"));
    EXPECT_FALSE(gate.admit("10.0.0.2"));
    EXPECT_FALSE(gate.admit("10.0.0.3"));
    EXPECT_EQ(gate.open(), 5u);
    EXPECT_EQ(gate.admit("10.0.0.4"), Refusal::max_connections);
    // Per client is checked first: the answer names what the client can change.
    EXPECT_EQ(gate.admit("10.0.0.1"), Refusal::per_client);
    gate.release("10.0.0.1");
    EXPECT_EQ(gate.open(), 4u);
    EXPECT_FALSE(gate.admit("10.0.0.4"));
    EXPECT_EQ(gate.admit("10.0.0.1"), Refusal::max_connections);
    // Releasing an address never admitted changes nothing.
    gate.release("10.9.9.9");
    EXPECT_EQ(gate.open(), 5u);
}

TEST(ConnectionGate, CountsRefusalsByReason) {
    ConnectionGate gate(limits(4, 4));
    gate.refused(Refusal::per_client);
    gate.refused(Refusal::per_client);
    gate.refused(Refusal::descriptors);
    EXPECT_EQ(gate.refusals(Refusal::per_client), 2u);
    EXPECT_EQ(gate.refusals(Refusal::descriptors), 1u);
    EXPECT_EQ(gate.refusals(Refusal::max_connections), 0u);
    EXPECT_EQ(to_string(Refusal::max_connections), "max_connections");
    EXPECT_EQ(to_string(Refusal::per_client), "per_client");
    EXPECT_EQ(to_string(Refusal::descriptors), "descriptors");
}

TEST(ConnectionGate, ShedsOnlyWhileCrowdedAndOnlyWhatWaitedTooLong) {
    ConnectionGate gate(limits(10, 10));  // crowded above 8
    EXPECT_EQ(gate.limits().crowded_at(), 8u);
    const Clock::time_point t0{};
    std::vector<ConnectionGate::Ticket> tickets;
    for (uint64_t id = 1; id <= 8; ++id) {
        ASSERT_FALSE(gate.admit("a"));
        tickets.push_back(gate.start_waiting(id, t0 + std::chrono::milliseconds(100 * id)));
    }
    EXPECT_FALSE(gate.crowded());
    EXPECT_TRUE(gate.shed(t0 + 1h).empty());  // 8 of 10 open: not crowded, however long they wait
    ASSERT_FALSE(gate.admit("a"));
    EXPECT_TRUE(gate.crowded());
    EXPECT_EQ(gate.next_shed(), t0 + 100ms + 2000ms);
    EXPECT_TRUE(gate.shed(t0 + 2099ms).empty());
    // At 2.3 s the connections that started waiting at 0.1, 0.2 and 0.3 s have waited 2 s or more.
    EXPECT_EQ(gate.shed(t0 + 2300ms), (std::vector<uint64_t>{1, 2, 3}));
    EXPECT_EQ(gate.shed_total(), 3u);
    // The caller closes them, which ends their wait.
    for (int i = 0; i < 3; ++i) {
        gate.stop_waiting(tickets[i]);
        gate.release("a");
    }
    EXPECT_EQ(gate.idle(), 5u);
    EXPECT_FALSE(gate.crowded());
    EXPECT_TRUE(gate.shed(t0 + 1h).empty());
}

TEST(ConnectionGate, AtTheCapTheLongestIdleGivesWay) {
    ConnectionGate gate(limits(3, 3));
    const Clock::time_point t0{};
    ASSERT_FALSE(gate.admit("a"));
    ASSERT_FALSE(gate.admit("a"));
    EXPECT_FALSE(gate.displace());  // below the cap: nobody gives way
    ASSERT_FALSE(gate.admit("b"));
    EXPECT_FALSE(gate.displace());  // at the cap, but nobody idle: a refusal
    const auto second = gate.start_waiting(2, t0 + 1s);
    const auto third = gate.start_waiting(3, t0 + 2s);
    EXPECT_EQ(gate.displace(), 2u);
    EXPECT_EQ(gate.displaced_total(), 1u);
    gate.stop_waiting(second);
    gate.release("a");
    EXPECT_FALSE(gate.admit("c"));
    EXPECT_EQ(gate.displace(), 3u);
    gate.stop_waiting(third);
    EXPECT_FALSE(gate.displace());
}

}  // namespace
}  // namespace cohort::coord::server
