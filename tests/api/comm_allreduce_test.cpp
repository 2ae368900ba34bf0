// All-reduce against a reference computed here: every world size 1..8,
// every dtype, operator and algorithm, sizes 0, 1, 7, 997 and (for a subset)
// 2^20 + 3 elements, in place and out of place. Every rank must hold the
// reference result (exactly for integers and min/max, within the rounding
// the dtype allows otherwise) and the same bytes as every other rank.
#include "comm_support.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

namespace cohort::test {
namespace {

constexpr std::size_t kSmallSizes[] = {0, 1, 7, 997};  // 997 is prime: no part divides it evenly
constexpr std::size_t kLargeSize = (std::size_t(1) << 20) + 3;

bool runs_large(int n) {
    return n == 2 || n == 3 || n == 5 || n == 8;
}

// Runs every case on a world of `n` ranks with `algorithm`, in place and out
// of place, and checks each rank's result against the reference and against
// the other ranks' bytes.
void run_cases(int n, Algorithm algorithm, const std::vector<ReductionCase>& cases, const World& world, uint64_t seed) {
    // [case][rank]: fingerprints of the out-of-place and in-place results.
    std::vector<std::vector<uint64_t>> out_of_place(cases.size(), std::vector<uint64_t>(n)),
        in_place(cases.size(), std::vector<uint64_t>(n));
    Problems problems;
    const auto outcomes = spawn_comms(n, world, [&](Communicator& comm) {
        const int rank = comm.rank();
        const CallOptions call{algorithm, {}};
        for (std::size_t i = 0; i < cases.size(); ++i) {
            const ReductionCase& c = cases[i];
            const auto& input = c.inputs[static_cast<std::size_t>(rank)];
            {
                std::vector<std::byte> out(c.bytes(), std::byte{0xA5});
                comm.allreduce(input.data(), out.data(), c.count, c.dtype, c.op, call);
                if (auto why = check_result(c, out.data()); !why.empty())
                    problems.add(rank, c.name() + " out of place: " + why);
                out_of_place[i][static_cast<std::size_t>(rank)] = fingerprint(out.data(), out.size());
            }
            {
                std::vector<std::byte> data = input;
                comm.allreduce(data.data(), c.count, c.dtype, c.op, call);
                if (auto why = check_result(c, data.data()); !why.empty())
                    problems.add(rank, c.name() + " in place: " + why);
                in_place[i][static_cast<std::size_t>(rank)] = fingerprint(data.data(), data.size());
            }
        }
    });
    expect_ok(outcomes);
    problems.expect_none(seed);
    for (std::size_t i = 0; i < cases.size(); ++i)
        for (int r = 1; r < n; ++r) {
            EXPECT_EQ(out_of_place[i][r], out_of_place[i][0]) << cases[i].name() << " out of place: rank " << r
                                                              << " holds other bytes than rank 0 (seed " << seed << ")";
            EXPECT_EQ(in_place[i][r], in_place[i][0])
                << cases[i].name() << " in place: rank " << r << " holds other bytes than rank 0 (seed " << seed << ")";
        }
}

// Host labels a a b b c ..., so that hierarchical has hosts of two ranks and
// one of one, and automatic may pick it for large messages.
World paired_hosts() {
    World world;
    world.configure = [](int rank, CommOptions& o) { o.host_label = paired_host(rank); };
    return world;
}

// paired_hosts() with direct copies on or off and `options` applied to every
// rank's options after the host label.
World paired_hosts_with(bool direct_copy, std::function<void(CommOptions&)> options) {
    World world = paired_hosts();
    world.direct_copy = direct_copy;
    world.configure = [user = world.configure, options](int rank, CommOptions& o) {
        user(rank, o);
        options(o);
    };
    return world;
}

class AllreduceMatrix : public ::testing::TestWithParam<std::tuple<int, Algorithm>> {};

TEST_P(AllreduceMatrix, EveryTypeOpAndSizeMatchesTheReferenceOnEveryRank) {
    const auto [n, algorithm] = GetParam();
    const uint64_t seed = test_seed();
    std::mt19937_64 rng(seed);
    std::vector<ReductionCase> cases;
    for (DataType dtype : kAllTypes)
        for (ReduceOp op : kAllOps)
            for (std::size_t count : kSmallSizes) cases.push_back(make_case(rng, dtype, op, count, n));
    if (runs_large(n)) {
        cases.push_back(make_case(rng, DataType::float32, ReduceOp::sum, kLargeSize, n));
        cases.push_back(make_case(rng, DataType::int64, ReduceOp::max, kLargeSize, n));
    }
    run_cases(n, algorithm, cases, paired_hosts(), seed);
}

std::string matrix_name(const ::testing::TestParamInfo<std::tuple<int, Algorithm>>& info) {
    return "n" + std::to_string(std::get<0>(info.param)) + "_" + algorithm_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Worlds, AllreduceMatrix,
                         ::testing::Combine(::testing::Range(1, 9), ::testing::ValuesIn(kAllAlgorithms)), matrix_name);

// Large messages with direct copies off: every byte through TCP frames, cut
// at max_frame, for every algorithm.
class AllreduceOverTcp : public ::testing::TestWithParam<std::tuple<int, Algorithm>> {};

TEST_P(AllreduceOverTcp, LargeMessagesMatchTheReference) {
    const auto [n, algorithm] = GetParam();
    const uint64_t seed = test_seed();
    std::mt19937_64 rng(seed);
    std::vector<ReductionCase> cases;
    cases.push_back(make_case(rng, DataType::float32, ReduceOp::avg, kLargeSize, n));
    cases.push_back(make_case(rng, DataType::bfloat16, ReduceOp::max, kLargeSize, n));
    World world = paired_hosts();
    world.direct_copy = false;
    run_cases(n, algorithm, cases, world, seed);
}

INSTANTIATE_TEST_SUITE_P(Worlds, AllreduceOverTcp,
                         ::testing::Combine(::testing::Values(2, 3, 4), ::testing::ValuesIn(kAllAlgorithms)),
                         matrix_name);

// A receive that reduces is read in pieces (128 KiB) inside each frame:
// with frames that are no multiple of a piece (200 KiB + 8) the last piece
// of every frame is short, and pieces and frames must still line up with
// the elements of every size, for the ring and the hierarchical steps.
class AllreduceInPieces : public ::testing::TestWithParam<std::tuple<int, Algorithm>> {};

TEST_P(AllreduceInPieces, FramesThatAreNoMultipleOfAPieceMatchTheReference) {
    const auto [n, algorithm] = GetParam();
    const uint64_t seed = test_seed();
    std::mt19937_64 rng(seed);
    std::vector<ReductionCase> cases;
    cases.push_back(make_case(rng, DataType::float64, ReduceOp::sum, kLargeSize, n));
    cases.push_back(make_case(rng, DataType::float32, ReduceOp::avg, kLargeSize, n));
    cases.push_back(make_case(rng, DataType::bfloat16, ReduceOp::sum, kLargeSize, n));
    const World world =
        paired_hosts_with(false, [](CommOptions& o) { o.max_frame = (std::size_t(200) << 10) + 8; });
    run_cases(n, algorithm, cases, world, seed);
}

INSTANTIATE_TEST_SUITE_P(Worlds, AllreduceInPieces,
                         ::testing::Combine(::testing::Values(2, 3),
                                            ::testing::Values(Algorithm::ring, Algorithm::doubling,
                                                              Algorithm::hierarchical)),
                         matrix_name);

// A receive that reduces lands a piece at a time in a staging buffer of one
// piece (Engine::stage_bytes), over TCP and through direct copies alike: a
// piece (24 KiB + 8) that divides neither the frames nor the message must
// still give each piece to the reduction whole and in order.
std::string staged_name(const ::testing::TestParamInfo<std::tuple<int, Algorithm, bool>>& param) {
    const auto [n, algorithm, direct] = param.param;
    return matrix_name(::testing::TestParamInfo<std::tuple<int, Algorithm>>({n, algorithm}, param.index)) +
           (direct ? "_direct" : "_tcp");
}

class AllreduceStaged : public ::testing::TestWithParam<std::tuple<int, Algorithm, bool>> {};

TEST_P(AllreduceStaged, PiecesThroughTheStageMatchTheReference) {
    const auto [n, algorithm, direct] = GetParam();
    const uint64_t seed = test_seed();
    std::mt19937_64 rng(seed);
    std::vector<ReductionCase> cases;
    cases.push_back(make_case(rng, DataType::float64, ReduceOp::sum, kLargeSize, n));
    cases.push_back(make_case(rng, DataType::float16, ReduceOp::max, kLargeSize, n));
    const World world = paired_hosts_with(direct, [](CommOptions& o) {
        o.shm_size = 0;
        o.tuning.pipeline_chunk = (std::size_t(24) << 10) + 8;
        o.max_frame = (std::size_t(1) << 20) + 16;
    });
    run_cases(n, algorithm, cases, world, seed);
}

INSTANTIATE_TEST_SUITE_P(Worlds, AllreduceStaged,
                         ::testing::Combine(::testing::Values(2, 3),
                                            ::testing::Values(Algorithm::ring, Algorithm::star,
                                                              Algorithm::hierarchical),
                                            ::testing::Bool()),
                         staged_name);

// Every rank on one host, through the host's shared memory: explicitly and
// as auto's pick, every dtype, op and small size, and large messages that go
// through many chunks, with a segment small enough (2 MiB) that even 8 ranks
// get slots below the large messages' size.
class AllreduceOverShm : public ::testing::TestWithParam<std::tuple<int, Algorithm>> {};

TEST_P(AllreduceOverShm, EveryTypeOpAndSizeMatchesTheReferenceOnEveryRank) {
    const auto [n, algorithm] = GetParam();
    const uint64_t seed = test_seed();
    std::mt19937_64 rng(seed);
    std::vector<ReductionCase> cases;
    for (DataType dtype : kAllTypes)
        for (ReduceOp op : kAllOps)
            for (std::size_t count : {std::size_t(0), std::size_t(1), std::size_t(997), std::size_t(20011)})
                cases.push_back(make_case(rng, dtype, op, count, n));
    cases.push_back(make_case(rng, DataType::float32, ReduceOp::sum, kLargeSize, n));
    cases.push_back(make_case(rng, DataType::bfloat16, ReduceOp::avg, kLargeSize, n));
    World world;
    world.shm_size = std::size_t(2) << 20;
    world.configure = [](int, CommOptions& o) { o.host_label = "one-host"; };
    run_cases(n, algorithm, cases, world, seed);
}

INSTANTIATE_TEST_SUITE_P(Worlds, AllreduceOverShm,
                         ::testing::Combine(::testing::Values(2, 3, 4, 8),
                                            ::testing::Values(Algorithm::shared_memory, Algorithm::automatic)),
                         matrix_name);

// Hierarchical all-reduce with other layouts of ranks on hosts: every rank on
// one host, every rank alone, hosts whose ranks are not neighbours, and a
// host of one rank first.
struct Layout {
    const char* name;
    int n;
    std::vector<std::string> hosts;
};

void PrintTo(const Layout& layout, std::ostream* os) {
    *os << layout.name;
}

class HierarchicalLayouts : public ::testing::TestWithParam<Layout> {};

TEST_P(HierarchicalLayouts, MatchesTheReference) {
    const Layout& layout = GetParam();
    const uint64_t seed = test_seed();
    std::mt19937_64 rng(seed);
    std::vector<ReductionCase> cases;
    for (DataType dtype : {DataType::float32, DataType::bfloat16, DataType::int32})
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::avg})
            for (std::size_t count : {std::size_t(1), std::size_t(997), std::size_t(100003)})
                cases.push_back(make_case(rng, dtype, op, count, layout.n));
    World world;
    world.configure = [&](int rank, CommOptions& o) { o.host_label = layout.hosts[static_cast<std::size_t>(rank)]; };
    run_cases(layout.n, Algorithm::hierarchical, cases, world, seed);
}

INSTANTIATE_TEST_SUITE_P(Hosts, HierarchicalLayouts,
                         ::testing::Values(Layout{"one_host", 4, {"x", "x", "x", "x"}},
                                           Layout{"all_apart", 4, {"a", "b", "c", "d"}},
                                           Layout{"interleaved", 6, {"a", "b", "c", "a", "b", "c"}},
                                           Layout{"lonely_first", 5, {"z", "a", "a", "a", "b"}}),
                         [](const ::testing::TestParamInfo<Layout>& p) { return std::string(p.param.name); });

// Hierarchical's host steps, from 1 MiB, with the same number of ranks on
// every host: a ring among the host's ranks over direct copies (shared
// memory on, every rank copying directly) or over TCP (shared memory and
// direct copies off), one ring per local rank across the hosts, and the
// host's allgather; and the leaders' ring for unequal hosts. Hosts of 2 and
// 3 ranks, neighbours or interleaved.
class HierarchicalHostSteps : public ::testing::TestWithParam<std::tuple<Layout, bool>> {};

TEST_P(HierarchicalHostSteps, MatchesTheReference) {
    const auto& [layout, direct] = GetParam();
    const uint64_t seed = test_seed();
    std::mt19937_64 rng(seed);
    const std::size_t large = (std::size_t(1) << 18) + 3;  // 1 MiB and 12 bytes of float32
    std::vector<ReductionCase> cases;
    cases.push_back(make_case(rng, DataType::float32, ReduceOp::sum, large, layout.n));
    cases.push_back(make_case(rng, DataType::float32, ReduceOp::avg, large, layout.n));
    cases.push_back(make_case(rng, DataType::bfloat16, ReduceOp::sum, 2 * large, layout.n));
    cases.push_back(make_case(rng, DataType::int64, ReduceOp::max, large, layout.n));
    cases.push_back(make_case(rng, DataType::float32, ReduceOp::sum, 997, layout.n));
    World world;
    world.direct_copy = direct;
    if (!direct) world.shm_size = 0;
    const std::vector<std::string> hosts = layout.hosts;
    world.configure = [hosts](int rank, CommOptions& o) { o.host_label = hosts[static_cast<std::size_t>(rank)]; };
    run_cases(layout.n, Algorithm::hierarchical, cases, world, seed);
}

INSTANTIATE_TEST_SUITE_P(Hosts, HierarchicalHostSteps,
                         ::testing::Combine(::testing::Values(Layout{"pairs", 4, {"a", "a", "b", "b"}},
                                                              Layout{"pairs_interleaved", 6, {"a", "b", "c", "a", "b", "c"}},
                                                              Layout{"triples", 6, {"a", "a", "a", "b", "b", "b"}},
                                                              Layout{"unequal", 5, {"a", "a", "b", "b", "b"}}),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<Layout, bool>>& p) {
                             return std::string(std::get<0>(p.param).name) +
                                    (std::get<1>(p.param) ? "_direct" : "_tcp");
                         });

// The typed convenience overload reduces a span in place.
TEST(Allreduce, SpanOverloadReducesInPlace) {
    const auto outcomes = spawn_comms(3, [](Communicator& comm) {
        std::vector<int64_t> values = {comm.rank(), 10 * comm.rank(), -comm.rank()};
        comm.allreduce(std::span<int64_t>(values));
        EXPECT_EQ(values, (std::vector<int64_t>{3, 30, -3}));
        std::vector<double> d = {1.5 * (comm.rank() + 1)};
        comm.allreduce(std::span<double>(d), ReduceOp::max);
        EXPECT_EQ(d[0], 4.5);
    });
    expect_ok(outcomes);
}

// Out of place leaves the input alone, for every algorithm.
TEST(Allreduce, OutOfPlaceLeavesTheInputUnchanged) {
    for (Algorithm algorithm : kAllAlgorithms) {
        SCOPED_TRACE(algorithm_name(algorithm));
        const auto outcomes = spawn_comms(5, paired_hosts(), [&](Communicator& comm) {
            std::vector<float> in(100003);
            for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i % 97) + comm.rank());
            const std::vector<float> before = in;
            std::vector<float> out(in.size());
            comm.allreduce(in.data(), out.data(), in.size(), DataType::float32, ReduceOp::sum, {algorithm, {}});
            EXPECT_EQ(in, before);
            EXPECT_EQ(out[1], 5.0f * 1 + 10.0f);
        });
        expect_ok(outcomes);
    }
}

// Buffers at odd addresses (C and Python hand those over) reduce the same.
TEST(Allreduce, UnalignedBuffers) {
    const auto outcomes = spawn_comms(3, [](Communicator& comm) {
        std::vector<std::byte> storage(8 * 1001 + 1);
        std::byte* data = storage.data() + 1;
        for (std::size_t i = 0; i < 1001; ++i) {
            const double v = static_cast<double>(i) + comm.rank();
            std::memcpy(data + 8 * i, &v, 8);
        }
        for (Algorithm algorithm : kAllAlgorithms) {
            std::vector<std::byte> out(8 * 1001 + 3);
            comm.allreduce(data, out.data() + 3, 1001, DataType::float64, ReduceOp::sum, {algorithm, {}});
            double v;
            std::memcpy(&v, out.data() + 3 + 8 * 1000, 8);
            EXPECT_EQ(v, 3 * 1000.0 + 3) << algorithm_name(algorithm);
        }
    });
    expect_ok(outcomes);
}

}  // namespace
}  // namespace cohort::test
