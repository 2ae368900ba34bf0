// The shared-memory transport seen through the C++ API, with ranks as
// threads of this process (they share a host, so they share memory): which
// transport the set-up picks and why, the data-moving collectives across
// chunk boundaries, and failures inside a shared-memory collective. The
// process-level cases (SIGKILL, /dev/shm left clean, PID namespaces) are in
// tests/integration/comm_shm.py.
#include "comm_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include <latch>
#include <string>
#include <vector>

namespace cohort::test {
namespace {

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

World one_host(std::optional<std::size_t> shm_size = std::nullopt) {
    World world;
    world.shm_size = shm_size;
    world.configure = [](int, CommOptions& o) { o.host_label = "one-host"; };
    return world;
}

std::vector<std::string> names(const std::vector<Transport>& transports) {
    std::vector<std::string> out;
    for (auto t : transports) out.emplace_back(transport_name(t));
    return out;
}

// ----------------------------------------------------------- the choice

TEST(ShmChoice, OneHostSharesMemoryAndAutoPicksIt) {
    Problems problems;
    const auto outcomes = spawn_comms(3, one_host(), [&](Communicator& comm) {
        std::vector<std::string> expected(3, "shm");
        expected[static_cast<std::size_t>(comm.rank())] = "self";
        if (names(comm.transports()) != expected) problems.add(comm.rank(), "transports are not self and shm");
        if (comm.choose(1 << 20) != Algorithm::shared_memory || comm.choose(16) != Algorithm::shared_memory)
            problems.add(comm.rank(), "auto does not pick shm");
        const std::string d = comm.describe();
        if (!contains(d, "\"rank\":" + std::to_string(comm.rank()) + ",") || !contains(d, "\"size\":3,"))
            problems.add(comm.rank(), "describe names another rank or size: " + d);
        if (!contains(d, "\"shm\":{\"bytes\":8388608,") || !contains(d, "\"ranks\":[0,1,2]") ||
            !contains(d, "\"shm_unavailable\":null"))
            problems.add(comm.rank(), "describe does not show the 8 MiB segment of 3 ranks: " + d);
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

TEST(ShmChoice, OffFallsBackToDirectCopiesThenTcp) {
    for (const bool direct : {true, false}) {
        Problems problems;
        World world = one_host(0);
        world.direct_copy = direct;
        const auto outcomes = spawn_comms(2, world, [&](Communicator& comm) {
            const auto peer = comm.transports()[static_cast<std::size_t>(1 - comm.rank())];
            if (peer != (direct ? Transport::direct_copy : Transport::tcp))
                problems.add(comm.rank(), std::string("peer reached over ") + transport_name(peer));
            if (comm.choose(1 << 20) == Algorithm::shared_memory) problems.add(comm.rank(), "auto picks shm");
            if (!contains(comm.describe(), "\"shm\":null") || !contains(comm.describe(), "shared memory is off"))
                problems.add(comm.rank(), "describe does not say shared memory is off: " + comm.describe());
            // Over TCP, describe() says why not direct; with direct copies, nothing.
            const std::string no_direct = direct ? "\"direct_unavailable\":null"
                                                 : "\"direct_unavailable\":{\"" + std::to_string(1 - comm.rank()) +
                                                       "\":\"direct copies are off on this rank";
            if (!contains(comm.describe(), no_direct))
                problems.add(comm.rank(), "describe does not say " + no_direct + ": " + comm.describe());
            try {
                int32_t x = 1;
                comm.allreduce(&x, 1, DataType::int32, ReduceOp::sum, {Algorithm::shared_memory, {}});
                problems.add(comm.rank(), "algorithm shm ran without shared memory");
            } catch (const Error& e) {
                if (e.code() != Errc::invalid_argument || !contains(e.what(), "algorithm shm"))
                    problems.add(comm.rank(), std::string("wrong error for algorithm shm: ") + e.what());
            }
            int32_t x = comm.rank() + 1;
            comm.allreduce(&x, 1, DataType::int32, ReduceOp::sum);  // still works, without shared memory
            if (x != 3) problems.add(comm.rank(), "the all-reduce without shared memory gave " + std::to_string(x));
        });
        expect_ok(outcomes);
        problems.expect_none(0);
    }
}

// A segment too small for the host's ranks is no error: the ranks fall back
// and describe() says what to raise.
TEST(ShmChoice, TooSmallSegmentFallsBackSayingWhy) {
    Problems problems;
    const auto outcomes = spawn_comms(4, one_host(std::size_t(64) << 10), [&](Communicator& comm) {
        for (std::size_t r = 0; r < 4; ++r)
            if (r != std::size_t(comm.rank()) && comm.transports()[r] == Transport::shared_memory)
                problems.add(comm.rank(), "shares memory in a 64 KiB segment");
        if (!contains(comm.describe(), "raise shm_size"))
            problems.add(comm.rank(), "describe does not say to raise shm_size: " + comm.describe());
        int64_t x = comm.rank();
        comm.allreduce(&x, 1, DataType::int64, ReduceOp::sum);
        if (x != 6) problems.add(comm.rank(), "sum is " + std::to_string(x));
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

// Ranks of one host that disagree: one with shared memory off, or segments
// of different sizes. Every rank learns it during set-up (none waits for a
// rank that stayed out) and all fall back alike.
TEST(ShmChoice, RanksThatDisagreeFallBackAlike) {
    for (const bool one_off : {true, false}) {
        SCOPED_TRACE(one_off ? "rank 2 has shm_size 0" : "rank 2 asks for 4 MiB, the others 8 MiB");
        Problems problems;
        World world = one_host();
        world.connect_timeout = 20s;
        world.configure = [&](int rank, CommOptions& o) {
            o.host_label = "one-host";
            if (rank == 2) o.shm_size = one_off ? 0 : std::size_t(4) << 20;
        };
        const auto start = Clock::now();
        const auto outcomes = spawn_comms(3, world, [&](Communicator& comm) {
            for (std::size_t r = 0; r < 3; ++r)
                if (r != std::size_t(comm.rank()) && comm.transports()[r] == Transport::shared_memory)
                    problems.add(comm.rank(), "shares memory although rank 2 disagrees");
            if (!contains(comm.describe(), one_off ? "rank 2: shared memory is off" : "must use the same shm_size"))
                problems.add(comm.rank(), "describe does not say why: " + comm.describe());
            int64_t x = 1;
            comm.allreduce(&x, 1, DataType::int64, ReduceOp::sum);
            if (x != 3) problems.add(comm.rank(), "sum is " + std::to_string(x));
        });
        expect_ok(outcomes);
        problems.expect_none(0);
        EXPECT_LT(since(start), 10s) << "a rank waited for one that stayed out of shared memory";
    }
}

// Hosts of two ranks: each pair shares memory, and reaches the others
// directly; hierarchical runs its inner stage in shared memory.
TEST(ShmChoice, PairedHostsShareMemoryWithinEachHost) {
    Problems problems;
    World world;
    world.configure = [](int rank, CommOptions& o) { o.host_label = paired_host(rank); };
    const auto outcomes = spawn_comms(4, world, [&](Communicator& comm) {
        const int r = comm.rank();
        for (int p = 0; p < 4; ++p) {
            const Transport want = p == r           ? Transport::self
                                   : p / 2 == r / 2 ? Transport::shared_memory
                                                    : Transport::direct_copy;
            if (comm.transports()[static_cast<std::size_t>(p)] != want)
                problems.add(r, "rank " + std::to_string(p) + " is reached over " +
                                    transport_name(comm.transports()[static_cast<std::size_t>(p)]));
        }
        if (comm.choose(1 << 20) != Algorithm::hierarchical) problems.add(r, "auto does not pick hierarchical");
        std::vector<float> data(300000, float(r + 1));
        comm.allreduce(data.data(), data.size(), DataType::float32, ReduceOp::avg, {Algorithm::hierarchical, {}});
        for (float v : data)
            if (v != 2.5f) {
                problems.add(r, "hierarchical avg gave " + std::to_string(v));
                break;
            }
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

// Host a's rank 1 copies nothing directly, so host a takes hierarchical's
// host steps through its segment while host b, whose ranks copy directly
// from each other, takes them through direct copies from 1 MiB. Each
// host's ranks agree, and the two hosts still agree on what crosses
// between them: sums are exact and every rank holds the same bytes, above
// the 1 MiB switch and below it.
TEST(ShmChoice, HostsThatTakeTheirStepsDifferentlyStillAgree) {
    Problems problems;
    World world;
    world.configure = [](int rank, CommOptions& o) {
        o.host_label = paired_host(rank);
        if (rank == 1) o.direct_copy = false;
    };
    const auto outcomes = spawn_comms(4, world, [&](Communicator& comm) {
        const int r = comm.rank();
        const std::string want = r < 2 ? "\"direct_everywhere\":false" : "\"direct_everywhere\":true";
        if (!contains(comm.describe(), want)) problems.add(r, "describe() lacks " + want + ": " + comm.describe());
        for (const std::size_t count : {std::size_t(100003), std::size_t(300007), std::size_t(1) << 20}) {
            std::vector<float> data(count);
            for (std::size_t i = 0; i < count; ++i) data[i] = float((i % 1000) * (r + 1));
            comm.allreduce(data.data(), count, DataType::float32, ReduceOp::sum, {Algorithm::hierarchical, {}});
            for (std::size_t i = 0; i < count; ++i)
                if (data[i] != float((i % 1000) * 10)) {
                    problems.add(r, std::to_string(count) + " floats: element " + std::to_string(i) + " is " +
                                        std::to_string(data[i]));
                    break;
                }
            std::vector<float> avg(count, float(r + 1));
            comm.allreduce(avg.data(), count, DataType::float32, ReduceOp::avg, {Algorithm::hierarchical, {}});
            if (std::count(avg.begin(), avg.end(), 2.5f) != std::ptrdiff_t(count))
                problems.add(r, std::to_string(count) + " floats: avg is not 2.5 everywhere");
        }
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

// -------------------------------------------------------- data movement

// Sizes around the slot (2 MiB segment: slots of about 340 KiB for two
// ranks, 84 KiB for eight), so broadcast, allgather and reduce-scatter go
// through one chunk and several.
class ShmMovement : public ::testing::TestWithParam<int> {};

TEST_P(ShmMovement, BroadcastAllgatherReduceScatterAndBarrier) {
    const int n = GetParam();
    Problems problems;
    const auto outcomes = spawn_comms(n, one_host(std::size_t(2) << 20), [&](Communicator& comm) {
        const int r = comm.rank();
        for (const std::size_t bytes : {std::size_t(0), std::size_t(1), std::size_t(4099), std::size_t(1) << 20,
                                        (std::size_t(3) << 20) / 2 + 5}) {
            const std::string what = " of " + std::to_string(bytes) + " bytes";
            for (int root : {0, n - 1}) {
                std::vector<unsigned char> data(bytes);
                for (std::size_t i = 0; i < bytes; ++i)
                    data[i] = r == root ? static_cast<unsigned char>(i * 31 + 7) : 0;
                comm.broadcast(data.data(), bytes, root);
                for (std::size_t i = 0; i < bytes; ++i)
                    if (data[i] != static_cast<unsigned char>(i * 31 + 7)) {
                        problems.add(
                            r, "broadcast from " + std::to_string(root) + what + " differs at " + std::to_string(i));
                        break;
                    }
            }
            std::vector<unsigned char> mine(bytes), all(bytes * std::size_t(n), 0xEE);
            for (std::size_t i = 0; i < bytes; ++i) mine[i] = static_cast<unsigned char>(r * 13 + i);
            comm.allgather(mine.data(), all.data(), bytes);
            for (std::size_t j = 0; j < std::size_t(n) * bytes; ++j)
                if (all[j] != static_cast<unsigned char>(int(j / bytes) * 13 + j % bytes)) {
                    problems.add(r, "allgather" + what + " differs at " + std::to_string(j));
                    break;
                }
            const std::size_t count = bytes / 8;
            std::vector<int64_t> in(count * std::size_t(n)), out(count, -1);
            for (std::size_t i = 0; i < in.size(); ++i) in[i] = int64_t(i) * (r + 1);
            comm.reduce_scatter(in.data(), out.data(), count, DataType::int64, ReduceOp::sum);
            const int64_t factor = int64_t(n) * (n + 1) / 2;
            for (std::size_t i = 0; i < count; ++i)
                if (out[i] != int64_t(std::size_t(r) * count + i) * factor) {
                    problems.add(
                        r, "reduce_scatter of " + std::to_string(count) + " int64 differs at " + std::to_string(i));
                    break;
                }
            comm.barrier();
        }
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

INSTANTIATE_TEST_SUITE_P(Worlds, ShmMovement, ::testing::Values(2, 3, 4, 8));

// --------------------------------------------------------------- failures

// Over shared memory every rank meets inside the broadcast, so disagreeing
// roots fail it at once, on every rank, naming the roots.
TEST(ShmFailures, DisagreeingRootsFailTheBroadcastItself) {
    Problems problems;
    const auto outcomes = spawn_comms(2, one_host(), [&](Communicator& comm) {
        char text[16] = {};
        try {
            comm.broadcast(text, sizeof text, comm.rank());
            problems.add(comm.rank(), "the disagreeing broadcast succeeded");
        } catch (const Error& e) {
            if (e.code() != Errc::mismatch || !contains(e.what(), "root 0") || !contains(e.what(), "root 1"))
                problems.add(comm.rank(), std::string("wrong error: ") + e.what());
        }
        if (!comm.broken()) problems.add(comm.rank(), "not broken after a mismatch");
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

// A rank that never calls: the others time out after the call's timeout,
// naming it; the rank that stayed away then finds the communicator broken.
TEST(ShmFailures, SilentRankTimesOutNamingIt) {
    std::latch done(1);
    Problems problems;
    const auto outcomes = spawn_comms(3, one_host(), [&](Communicator& comm) {
        if (comm.rank() == 2) {
            done.wait();
            return;
        }
        const auto start = Clock::now();
        try {
            std::vector<float> data(100000, 1.0f);
            comm.allreduce(data.data(), data.size(), DataType::float32, ReduceOp::sum, {Algorithm::automatic, 500ms});
            problems.add(comm.rank(), "the all-reduce without rank 2 succeeded");
        } catch (const Error& e) {
            if (e.code() != Errc::timeout || !contains(e.what(), "rank 2"))
                problems.add(comm.rank(), std::string("wrong error: ") + e.what());
        }
        if (since(start) > 5s)
            problems.add(comm.rank(), "the 0.5 s timeout took " + std::to_string(since(start).count()) + " ms");
        if (comm.rank() == 0) done.count_down();
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

// A watchdog aborts one rank while every rank waits in shared memory for a
// rank that never comes: all of them fail at once, naming the abort.
TEST(ShmFailures, AbortReachesRanksWaitingInSharedMemory) {
    std::latch started(3), done(1);
    Problems problems;
    const auto outcomes = spawn_comms(4, one_host(), [&](Communicator& comm) {
        if (comm.rank() == 3) {
            started.wait();
            done.wait();
            return;
        }
        std::thread watchdog;
        if (comm.rank() == 0)
            watchdog = std::thread([&, handle = comm.abort_handle()] {
                started.wait();
                std::this_thread::sleep_for(200ms);
                handle.abort("the watchdog gave up");
            });
        started.count_down();
        const auto start = Clock::now();
        try {
            comm.barrier({Algorithm::automatic, 30s});
            problems.add(comm.rank(), "the barrier without rank 3 succeeded");
        } catch (const Error& e) {
            if (!contains(e.what(), "the watchdog gave up"))
                problems.add(comm.rank(), std::string("the error does not carry the abort: ") + e.what());
        }
        if (since(start) > 10s)
            problems.add(comm.rank(), "the abort took " + std::to_string(since(start).count()) + " ms");
        if (watchdog.joinable()) watchdog.join();
        if (comm.rank() == 0) done.count_down();
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

// A rank that closes its communicator while the others wait for it inside a
// shared-memory all-reduce: they fail promptly, naming it, well before the
// operation's timeout.
TEST(ShmFailures, PeerThatLeavesMidOperationIsNamed) {
    Problems problems;
    const auto outcomes = spawn_comms(3, one_host(), [&](Communicator& comm) {
        if (comm.rank() == 1) {
            std::this_thread::sleep_for(200ms);
            comm.close();
            return;
        }
        const auto start = Clock::now();
        try {
            std::vector<double> data(50000, 1.0);
            comm.allreduce(data.data(), data.size(), DataType::float64, ReduceOp::sum, {Algorithm::automatic, 30s});
            problems.add(comm.rank(), "the all-reduce without rank 1 succeeded");
        } catch (const Error& e) {
            if (!contains(e.what(), "rank 1"))
                problems.add(comm.rank(), std::string("rank 1 is not named: ") + e.what());
        }
        if (since(start) > 10s)
            problems.add(comm.rank(), "noticing took " + std::to_string(since(start).count()) + " ms");
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

}  // namespace
}  // namespace cohort::test
