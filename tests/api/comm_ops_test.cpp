// The other collectives and the ways of calling them: broadcast from every
// root, barrier, allgather, reduce-scatter, named all-reduce with fusion,
// asynchronous operations and their order, the automatic algorithm choice,
// long runs of operations, and the three kinds of store.
#include "comm_support.hpp"

#include <gtest/gtest.h>

#include <latch>
#include <map>
#include <string>
#include <vector>

namespace cohort::test {
namespace {

// Deterministic bytes for (seed, who): every rank can compute any rank's.
std::vector<std::byte> pattern(uint64_t seed, int who, std::size_t bytes) {
    std::mt19937_64 rng(seed * 1000003 + static_cast<uint64_t>(who));
    std::vector<std::byte> out(bytes);
    std::size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        const uint64_t v = rng();
        std::memcpy(out.data() + i, &v, 8);
    }
    for (; i < bytes; ++i) out[i] = static_cast<std::byte>(rng());
    return out;
}

class WorldSize : public ::testing::TestWithParam<int> {};

std::string size_name(const ::testing::TestParamInfo<int>& info) { return "n" + std::to_string(info.param); }

// ---------------------------------------------------------------- broadcast

// Small messages go down a binomial tree, large ones (3 MiB) through a
// pipelined chain of 1 MiB chunks: both from every root.
TEST_P(WorldSize, BroadcastFromEveryRoot) {
    const int n = GetParam();
    const uint64_t seed = test_seed();
    constexpr std::size_t sizes[] = {0, 1, 1000, std::size_t(3) << 20};
    std::vector<std::vector<std::vector<std::byte>>> expected(static_cast<std::size_t>(n));
    for (int root = 0; root < n; ++root)
        for (std::size_t bytes : sizes) expected[root].push_back(pattern(seed, root * 10 + int(bytes % 7), bytes));
    Problems problems;
    const auto outcomes = spawn_comms(n, [&](Communicator& comm) {
        for (int root = 0; root < n; ++root)
            for (std::size_t s = 0; s < std::size(sizes); ++s) {
                const auto& want = expected[root][s];
                std::vector<std::byte> data =
                    comm.rank() == root ? want : std::vector<std::byte>(want.size(), std::byte{0xEE});
                comm.broadcast(data.data(), data.size(), root);
                if (data != want)
                    problems.add(comm.rank(), "broadcast of " + std::to_string(sizes[s]) + " bytes from root " +
                                                  std::to_string(root) + " delivered other bytes");
            }
    });
    expect_ok(outcomes);
    problems.expect_none(seed);
}

// Frames smaller than the messages: each message is cut into many frames.
TEST(Broadcast, SmallFramesCarryLargeMessages) {
    const uint64_t seed = test_seed();
    const auto want = pattern(seed, 0, (std::size_t(3) << 20) + 5);
    World world;
    world.configure = [](int, CommOptions& o) { o.max_frame = 4096; };
    Problems problems;
    const auto outcomes = spawn_comms(4, world, [&](Communicator& comm) {
        std::vector<std::byte> data = comm.rank() == 2 ? want : std::vector<std::byte>(want.size());
        comm.broadcast(data.data(), data.size(), 2);
        if (data != want) problems.add(comm.rank(), "the broadcast delivered other bytes");
        std::vector<int32_t> values(300001, comm.rank() + 1);
        comm.allreduce(values.data(), values.size(), DataType::int32, ReduceOp::sum, {Algorithm::ring, {}});
        if (values.front() != 10 || values.back() != 10) problems.add(comm.rank(), "the ring all-reduce is wrong");
    });
    expect_ok(outcomes);
    problems.expect_none(seed);
}

// ------------------------------------------------------------------ barrier

// Nobody leaves a barrier before everybody has arrived at it, however late.
TEST_P(WorldSize, BarrierWaitsForEveryRank) {
    const int n = GetParam();
    std::atomic<int> arrived{0};
    Problems problems;
    const auto outcomes = spawn_comms(n, [&](Communicator& comm) {
        for (int round = 0; round < 5; ++round) {
            // A different rank is late each round.
            if ((comm.rank() + round) % n == n - 1) std::this_thread::sleep_for(30ms);
            arrived.fetch_add(1);
            comm.barrier();
            const int seen = arrived.load();
            if (seen < n * (round + 1))
                problems.add(comm.rank(), "left barrier " + std::to_string(round) + " when only " +
                                              std::to_string(seen - n * round) + " of " + std::to_string(n) +
                                              " ranks had arrived");
        }
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

// ---------------------------------------------------------------- allgather

TEST_P(WorldSize, AllgatherConcatenatesInRankOrder) {
    const int n = GetParam();
    const uint64_t seed = test_seed();
    constexpr std::size_t sizes[] = {0, 1, std::size_t(1) << 20};
    Problems problems;
    const auto outcomes = spawn_comms(n, [&](Communicator& comm) {
        for (std::size_t bytes : sizes) {
            std::vector<std::byte> want;
            for (int r = 0; r < n; ++r) {
                const auto part = pattern(seed, r + 100 * int(bytes % 3), bytes);
                want.insert(want.end(), part.begin(), part.end());
            }
            const auto mine = pattern(seed, comm.rank() + 100 * int(bytes % 3), bytes);
            std::vector<std::byte> out(want.size(), std::byte{0xEE});
            comm.allgather(mine.data(), out.data(), bytes);
            if (out != want) problems.add(comm.rank(), "allgather of " + std::to_string(bytes) + " bytes is wrong");
            // In place: this rank's block already sits in the output.
            std::vector<std::byte> inplace(want.size(), std::byte{0xEE});
            if (bytes > 0) std::memcpy(inplace.data() + comm.rank() * bytes, mine.data(), bytes);
            comm.allgather(inplace.data() + comm.rank() * bytes, inplace.data(), bytes);
            if (inplace != want)
                problems.add(comm.rank(), "in-place allgather of " + std::to_string(bytes) + " bytes is wrong");
        }
    });
    expect_ok(outcomes);
    problems.expect_none(seed);
}

// ----------------------------------------------------------- reduce-scatter

TEST_P(WorldSize, ReduceScatterGivesEachRankItsBlock) {
    const int n = GetParam();
    if (n > 5) GTEST_SKIP() << "reduce-scatter runs on 1..5 ranks";
    const uint64_t seed = test_seed();
    std::mt19937_64 rng(seed);
    std::vector<ReductionCase> cases;  // count = n blocks of `block` elements
    std::vector<std::size_t> blocks;
    for (DataType dtype : {DataType::int32, DataType::int64, DataType::float32, DataType::float16})
        for (ReduceOp op : kAllOps)
            for (std::size_t block : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(1000)}) {
                cases.push_back(make_case(rng, dtype, op, block * n, n));
                blocks.push_back(block);
            }
    Problems problems;
    const auto outcomes = spawn_comms(n, [&](Communicator& comm) {
        const auto r = static_cast<std::size_t>(comm.rank());
        for (std::size_t i = 0; i < cases.size(); ++i) {
            const ReductionCase& c = cases[i];
            const std::size_t block = blocks[i], es = dtype_size(c.dtype);
            const auto& input = c.inputs[r];
            std::vector<std::byte> out(block * es, std::byte{0xEE});
            comm.reduce_scatter(input.data(), out.data(), block, c.dtype, c.op);
            if (auto why = check_result(c, out.data(), r * block, block); !why.empty())
                problems.add(comm.rank(), "reduce_scatter " + c.name() + ": " + why);
            if (input != c.inputs[r]) problems.add(comm.rank(), "reduce_scatter " + c.name() + " changed its input");
        }
    });
    expect_ok(outcomes);
    problems.expect_none(seed);
}

INSTANTIATE_TEST_SUITE_P(Worlds, WorldSize, ::testing::Range(1, 7), size_name);

// ---------------------------------------------------------- named all-reduce

// Tensors of several types and sizes, a fusion threshold of 4 KiB so that
// runs of same-typed tensors pack into several buffers, one tensor above the
// threshold (reduced on its own) and an empty one.
TEST(AllreduceNamed, FusesTensorsAndReducesEachOne) {
    constexpr int n = 4;
    const uint64_t seed = test_seed();
    std::mt19937_64 rng(seed);
    struct Spec {
        std::string name;
        DataType dtype;
        std::size_t count;
    };
    std::vector<Spec> specs;
    for (int i = 0; i < 12; ++i) specs.push_back({"layer" + std::to_string(10 + i) + ".weight", DataType::float32, 200});
    specs.push_back({"layer15.bias", DataType::float64, 33});
    specs.push_back({"layer16.bias", DataType::float64, 700});  // 5600 bytes: above the threshold
    specs.push_back({"layer17.bias", DataType::float64, 0});
    specs.push_back({"step", DataType::int64, 1});
    specs.push_back({"tokens", DataType::int32, 999});
    specs.push_back({"z.half", DataType::float16, 1500});
    specs.push_back({"z.mask", DataType::uint8, 5000});
    std::vector<ReductionCase> cases;
    for (const auto& s : specs) cases.push_back(make_case(rng, s.dtype, ReduceOp::sum, s.count, n));
    World world;
    world.configure = [](int, CommOptions& o) { o.tuning.fusion_threshold = 4096; };
    Problems problems;
    const auto outcomes = spawn_comms(n, world, [&](Communicator& comm) {
        const auto r = static_cast<std::size_t>(comm.rank());
        std::vector<std::vector<std::byte>> storage;
        for (const auto& c : cases) storage.push_back(c.inputs[r]);
        for (int round = 0; round < 2; ++round) {
            std::map<std::string, Tensor> tensors;
            for (std::size_t i = 0; i < specs.size(); ++i) {
                storage[i] = cases[i].inputs[r];
                tensors[specs[i].name] = Tensor{std::span<std::byte>(storage[i]), specs[i].dtype};
            }
            comm.allreduce_named(tensors, ReduceOp::sum);
            for (std::size_t i = 0; i < specs.size(); ++i)
                if (auto why = check_result(cases[i], storage[i].data()); !why.empty())
                    problems.add(comm.rank(), "tensor " + specs[i].name + ": " + why);
        }
        // The communicator goes on normally afterwards.
        int64_t one = 1;
        comm.allreduce(&one, 1, DataType::int64, ReduceOp::sum);
        if (one != n) problems.add(comm.rank(), "the all-reduce after the named ones gave " + std::to_string(one));
    });
    expect_ok(outcomes);
    problems.expect_none(seed);
}

// ------------------------------------------------------------------- async

TEST(Async, OutstandingOperationsFinishInIssueOrder) {
    constexpr int n = 4, outstanding = 8;
    Problems problems;
    const auto outcomes = spawn_comms(n, [&](Communicator& comm) {
        std::vector<std::vector<int64_t>> data(outstanding);
        std::vector<Work> work;
        for (int k = 0; k < outstanding; ++k) {
            data[k].assign(1000 + 5000 * k, comm.rank() + k);
            work.push_back(comm.allreduce_async(data[k].data(), data[k].data(), data[k].size(), DataType::int64,
                                                ReduceOp::sum, {kAllAlgorithms[k % 5], {}}));
        }
        for (int k = 0; k < outstanding; ++k) {
            work[k].wait();
            const int64_t want = 0 + 1 + 2 + 3 + n * k;
            if (data[k].front() != want || data[k].back() != want)
                problems.add(comm.rank(), "async all-reduce " + std::to_string(k) + " gave " +
                                              std::to_string(data[k].front()) + ", expected " + std::to_string(want));
            if (!work[k].test()) problems.add(comm.rank(), "test() is false after wait()");
        }
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

TEST(Async, TestBecomesTrueWithoutWait) {
    const auto outcomes = spawn_comms(3, [&](Communicator& comm) {
        std::vector<float> v(50000, 1.0f);
        Work w = comm.allreduce_async(v.data(), v.data(), v.size(), DataType::float32, ReduceOp::sum);
        const auto deadline = Clock::now() + 20s;
        while (!w.test() && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
        ASSERT_TRUE(w.test()) << "the operation never finished";
        EXPECT_EQ(v[0], 3.0f);
        EXPECT_EQ(v[49999], 3.0f);
        w.wait();  // finished already: returns at once
        w.wait_for(1ms);
    });
    expect_ok(outcomes);
}

// A blocking call issued after asynchronous ones runs after them.
TEST(Async, BlockingCallAfterAsyncKeepsTheOrder) {
    constexpr int n = 3;
    Problems problems;
    const auto outcomes = spawn_comms(n, [&](Communicator& comm) {
        std::vector<int32_t> a(70000, comm.rank()), b(10, 10 * comm.rank());
        std::vector<std::byte> gathered(n * 3);
        const std::byte mine[3] = {std::byte(comm.rank()), std::byte(1), std::byte(2)};
        std::vector<char> message(100, comm.rank() == 1 ? 'x' : '?');
        std::vector<int32_t> blocks(n * 2, comm.rank()), block(2);
        Work wa = comm.allreduce_async(a.data(), a.data(), a.size(), DataType::int32, ReduceOp::sum);
        Work wb = comm.broadcast_async(message.data(), message.size(), 1);
        Work wc = comm.allgather_async(mine, gathered.data(), 3);
        Work wd = comm.reduce_scatter_async(blocks.data(), block.data(), 2, DataType::int32, ReduceOp::max);
        Work we = comm.barrier_async();
        comm.allreduce(b.data(), b.size(), DataType::int32, ReduceOp::sum);  // after all of the above
        for (const Work* w : {&wa, &wb, &wc, &wd, &we})
            if (!w->test()) problems.add(comm.rank(), "an earlier asynchronous operation is still running");
        for (const Work* w : {&wa, &wb, &wc, &wd, &we}) w->wait();
        if (b[0] != 30) problems.add(comm.rank(), "blocking all-reduce gave " + std::to_string(b[0]));
        if (a[69999] != 3) problems.add(comm.rank(), "async all-reduce gave " + std::to_string(a[69999]));
        if (message != std::vector<char>(100, 'x')) problems.add(comm.rank(), "async broadcast is wrong");
        for (int r = 0; r < n; ++r)
            if (gathered[r * 3] != std::byte(r) || gathered[r * 3 + 2] != std::byte(2))
                problems.add(comm.rank(), "async allgather is wrong");
        if (block[0] != n - 1 || block[1] != n - 1) problems.add(comm.rank(), "async reduce_scatter is wrong");
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

// wait_for gives up on its own schedule while the operation goes on.
TEST(Async, WaitForTimesOutWhileTheOperationGoesOn) {
    std::latch late(1);
    const auto outcomes = spawn_comms(2, [&](Communicator& comm) {
        int32_t v = comm.rank() + 1;
        if (comm.rank() == 1) {
            late.wait();  // rank 0 must see its operation unfinished first
            comm.allreduce(&v, 1, DataType::int32, ReduceOp::sum);
            EXPECT_EQ(v, 3);
            return;
        }
        Work w = comm.allreduce_async(&v, &v, 1, DataType::int32, ReduceOp::sum);
        const std::string message = error_message(Errc::timeout, [&] { w.wait_for(50ms); });
        EXPECT_NE(message.find("allreduce"), std::string::npos) << message;
        EXPECT_NE(message.find("not finished"), std::string::npos) << message;
        EXPECT_FALSE(w.test());
        late.count_down();
        w.wait();
        EXPECT_EQ(v, 3);
    });
    expect_ok(outcomes);
}

TEST(Async, EmptyWorkIsDone) {
    Work w;
    EXPECT_TRUE(w.test());
    w.wait();
    w.wait_for(0ms);
}

// ------------------------------------------------------------------ choice

TEST(Choose, DoublingForSmallRingOrHierarchicalForLarge) {
    constexpr std::size_t small = 1024, large = std::size_t(16) << 20;
    World tcp;
    tcp.shm_size = 0;  // these are the choices without shared memory
    {
        // Two ranks: doubling, then ring (hierarchical gains nothing).
        const auto outcomes = spawn_comms(2, tcp, [&](Communicator& comm) {
            EXPECT_EQ(comm.choose(small), Algorithm::doubling);
            EXPECT_EQ(comm.choose(0), Algorithm::doubling);
            EXPECT_EQ(comm.choose(large), Algorithm::ring);
        });
        expect_ok(outcomes);
    }
    struct Case {
        const char* what;
        std::vector<std::string> hosts;
        std::optional<std::size_t> shm_size;
        Algorithm for_small;
        Algorithm for_large;
    };
    const Case cases[] = {
        {"every rank on its own host", {"a", "b", "c", "d"}, 0, Algorithm::doubling, Algorithm::ring},
        {"every rank on one host", {"a", "a", "a", "a"}, 0, Algorithm::doubling, Algorithm::ring},
        {"two hosts of two ranks", {"a", "a", "b", "b"}, 0, Algorithm::doubling, Algorithm::hierarchical},
        // Shared memory: every size goes through the segment.
        {"every rank on one host, sharing memory", {"a", "a", "a", "a"}, std::nullopt, Algorithm::shared_memory,
         Algorithm::shared_memory},
        {"two hosts of two ranks, sharing memory", {"a", "a", "b", "b"}, std::nullopt, Algorithm::doubling,
         Algorithm::hierarchical}};
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        World world;
        world.shm_size = c.shm_size;
        world.configure = [&](int rank, CommOptions& o) { o.host_label = c.hosts[static_cast<std::size_t>(rank)]; };
        const auto outcomes = spawn_comms(4, world, [&](Communicator& comm) {
            EXPECT_EQ(comm.hosts(), c.hosts);
            EXPECT_EQ(comm.choose(small), c.for_small);
            EXPECT_EQ(comm.choose(large), c.for_large);
        });
        expect_ok(outcomes);
    }
}

TEST(Choose, AlgorithmNamesRoundTrip) {
    for (Algorithm a : kAllAlgorithms) EXPECT_EQ(parse_algorithm(algorithm_name(a)), a);
    EXPECT_EQ(parse_algorithm("shm"), Algorithm::shared_memory);
    EXPECT_EQ(parse_algorithm("automatic"), Algorithm::automatic);
    EXPECT_STREQ(algorithm_name(Algorithm::automatic), "auto");
    EXPECT_STREQ(algorithm_name(static_cast<Algorithm>(42)), "unknown");
    const std::string message = error_message(Errc::invalid_argument, [] { parse_algorithm("rnig"); });
    EXPECT_NE(message.find("did you mean 'ring'"), std::string::npos) << message;
}

// ---------------------------------------------------------- long sequences

// A thousand small operations in a row, of every algorithm and a few kinds:
// sequence numbers stay in step and no message lands in the wrong one.
TEST(Sequence, ThousandSmallOperations) {
    constexpr int n = 4;
    Problems problems;
    const auto outcomes = spawn_comms(n, [&](Communicator& comm) {
        for (int i = 0; i < 1000; ++i) {
            int64_t v[2] = {int64_t(i) * (comm.rank() + 1), comm.rank()};
            comm.allreduce(v, 2, DataType::int64, ReduceOp::sum, {kAllAlgorithms[i % 5], {}});
            if (v[0] != int64_t(i) * 10 || v[1] != 6) {
                problems.add(comm.rank(), "operation " + std::to_string(i) + " gave " + std::to_string(v[0]));
                return;
            }
            if (i % 100 == 99) {
                int32_t token = comm.rank() == i % n ? i : -1;
                comm.broadcast(&token, sizeof token, i % n);
                if (token != i) problems.add(comm.rank(), "broadcast after operation " + std::to_string(i));
                comm.barrier();
            }
        }
        EXPECT_FALSE(comm.broken());
        EXPECT_EQ(comm.broken_reason(), "");
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

// ------------------------------------------------------------------ stores

void sum_of_ranks_on(const World& world, int n) {
    const auto outcomes = spawn_comms(n, world, [&](Communicator& comm) {
        EXPECT_EQ(comm.size(), n);
        int64_t v = comm.rank();
        comm.allreduce(&v, 1, DataType::int64, ReduceOp::sum);
        EXPECT_EQ(v, int64_t(n) * (n - 1) / 2);
    });
    expect_ok(outcomes);
}

TEST(Stores, FileStore) {
    World world;
    world.store = StoreKind::file;
    sum_of_ranks_on(world, 4);
}

TEST(Stores, TcpStoreHostedByRankZero) {
    World world;
    world.store = StoreKind::rank0;
    sum_of_ranks_on(world, 4);
}

// A second communicator on the same store (same job and generation) meets
// the same ranks under fresh keys, while the first is alive and after.
TEST(Stores, SeveralCommunicatorsOnOneStore) {
    StoreServer server("127.0.0.1", 0);
    const auto outcomes = spawn(3, [&](int rank, int size) {
        CommOptions o;
        o.rank = rank;
        o.size = size;
        o.store = open_store(server.url());  // a client: a tcp:// URL would make rank 0 host
        o.address = "127.0.0.1";
        o.timeout = 10s;
        o.connect_timeout = 20s;
        Communicator first(o);
        Communicator second(o);
        int32_t a = rank, b = 10 * rank;
        first.allreduce(&a, 1, DataType::int32, ReduceOp::sum);
        second.allreduce(&b, 1, DataType::int32, ReduceOp::max);
        EXPECT_EQ(a, 3);
        EXPECT_EQ(b, 20);
        first.close();
        Communicator third(o);
        int32_t c = 1;
        third.allreduce(&c, 1, DataType::int32, ReduceOp::sum);
        EXPECT_EQ(c, 3);
    });
    expect_ok(outcomes);
}

// A world of one needs no store: every operation is a copy.
TEST(Stores, SingleRankNeedsNoStore) {
    CommOptions o;
    o.rank = 0;
    o.size = 1;
    Communicator comm(o);
    EXPECT_EQ(comm.size(), 1);
    EXPECT_EQ(comm.hosts().size(), 1u);
    float in[3] = {1, 2, 3}, out[3] = {};
    comm.allreduce(in, out, 3, DataType::float32, ReduceOp::avg);
    EXPECT_EQ(out[2], 3.0f);
    comm.barrier();
    comm.broadcast(out, sizeof out, 0);
    float gathered[3] = {};
    comm.allgather(in, gathered, sizeof in);
    EXPECT_EQ(gathered[1], 2.0f);
    comm.reduce_scatter(in, out, 3, DataType::float32, ReduceOp::max);
    EXPECT_EQ(out[0], 1.0f);
    comm.allreduce_async(in, out, 3, DataType::float32, ReduceOp::sum).wait();
    EXPECT_EQ(out[1], 2.0f);
}

}  // namespace
}  // namespace cohort::test
