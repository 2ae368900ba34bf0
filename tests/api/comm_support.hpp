// Helpers for the collective tests: ranks run as threads of this process
// (Gloo's BaseTest::spawn), each with its own Communicator over a store that
// is fresh for every spawn; and reference reductions computed here, apart
// from cohort's kernels (double accumulation, float16 / bfloat16 decoded bit
// by bit), so the tests do not check the library against itself.
#pragma once

#include "support.hpp"

#include <cohort/communicator.hpp>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace cohort::test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

inline constexpr DataType kAllTypes[] = {DataType::float32, DataType::float64, DataType::float16, DataType::bfloat16,
                                         DataType::int32,   DataType::int64,   DataType::uint8};
inline constexpr ReduceOp kAllOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg};
inline constexpr Algorithm kAllAlgorithms[] = {Algorithm::star, Algorithm::ring, Algorithm::doubling,
                                               Algorithm::hierarchical, Algorithm::automatic};

inline bool is_float(DataType t) {
    return t == DataType::float32 || t == DataType::float64 || t == DataType::float16 || t == DataType::bfloat16;
}

inline std::chrono::milliseconds since(Clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

// ------------------------------------------------------------------ spawn

// How one rank's function ended.
struct RankOutcome {
    bool ok = true;             // returned normally
    bool cohort_error = false;  // threw cohort::Error (`code` is its code)
    Errc code = Errc::ok;
    std::string message;  // what() of whatever it threw
};

inline std::string describe(const RankOutcome& o) {
    if (o.ok) return "ok";
    if (o.cohort_error) return std::string("Error(") + errc_name(o.code) + "): " + o.message;
    return "exception: " + o.message;
}

// Runs fn(rank, size) on `size` threads at once and returns how each ended;
// an exception stays with its rank.
template <typename F>
std::vector<RankOutcome> spawn(int size, F&& fn) {
    std::vector<RankOutcome> outcomes(static_cast<std::size_t>(size));
    std::vector<std::thread> threads;
    threads.reserve(outcomes.size());
    for (int rank = 0; rank < size; ++rank) {
        threads.emplace_back([&fn, &outcomes, rank, size] {
            RankOutcome& out = outcomes[static_cast<std::size_t>(rank)];
            try {
                fn(rank, size);
            } catch (const Error& e) {
                out = {false, true, e.code(), e.what()};
            } catch (const std::exception& e) {
                out = {false, false, Errc::ok, e.what()};
            } catch (...) {
                out = {false, false, Errc::ok, "an exception that is not a std::exception"};
            }
        });
    }
    for (auto& t : threads) t.join();
    return outcomes;
}

// Every rank returned normally.
inline void expect_ok(const std::vector<RankOutcome>& outcomes) {
    for (std::size_t r = 0; r < outcomes.size(); ++r)
        EXPECT_TRUE(outcomes[r].ok) << "rank " << r << ": " << describe(outcomes[r]);
}

// A fresh folder under the temp directory, removed afterwards.
class CommTempDir {
public:
    CommTempDir() {
        static std::atomic<int> counter{0};
        path_ = std::filesystem::temp_directory_path() /
                ("cohort-comm-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
        std::filesystem::remove_all(path_);
    }
    CommTempDir(const CommTempDir&) = delete;
    CommTempDir& operator=(const CommTempDir&) = delete;
    ~CommTempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

// A TCP port nobody listens on right now (bind port 0, read it, close).
// Another process could take it before we do; the tests that use it accept
// that small chance.
inline uint16_t free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t length = sizeof a;
    uint16_t port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length) == 0)
        port = ntohs(a.sin_port);
    ::close(fd);
    return port;
}

enum class StoreKind {
    server,  // a StoreServer this process hosts, every rank a client of it
    rank0,   // tcp://127.0.0.1:<free port>, hosted by rank 0 (as launchers do)
    file,    // file:///<a fresh temp folder>
};

// How spawn_comms builds each rank's Communicator. The timeouts are short so
// that a hang fails fast, yet far above what a healthy operation takes on a
// loaded two-core machine.
struct World {
    StoreKind store = StoreKind::server;
    std::chrono::milliseconds timeout = 10s;
    std::chrono::milliseconds connect_timeout = 20s;
    std::string address = "127.0.0.1";
    std::string store_host = "127.0.0.1";  // where StoreKind::server listens
    // Threads of one process may copy each other's buffers directly; false
    // sends every byte through TCP.
    bool direct_copy = true;
    // The host's shared-memory segment; 0 keeps every byte off shared
    // memory (the ranks are threads of one host, so they would share one).
    std::optional<std::size_t> shm_size;
    // Last word on each rank's options (host labels, secrets, ...).
    std::function<void(int rank, CommOptions&)> configure;
};

// Host labels that group neighbouring ranks two by two: a a b b c ...
inline std::string paired_host(int rank) { return std::string("host-") + static_cast<char>('a' + rank / 2); }

// Runs fn(comm) on `size` threads, each rank with its own Communicator on a
// store made for this call alone. Construction errors are the rank's outcome.
template <typename F>
std::vector<RankOutcome> spawn_comms(int size, const World& world, F&& fn) {
    std::optional<StoreServer> server;
    std::optional<CommTempDir> dir;
    std::string url;
    switch (world.store) {
        case StoreKind::server:
            server.emplace(world.store_host, 0);
            url = server->url();
            break;
        case StoreKind::rank0: url = "tcp://127.0.0.1:" + std::to_string(free_port()); break;
        case StoreKind::file:
            dir.emplace();
            url = "file://" + dir->path().string();
            break;
    }
    return spawn(size, [&](int rank, int n) {
        CommOptions o;
        o.rank = rank;
        o.size = n;
        // A tcp:// URL would make rank 0 host the store; with our own
        // server every rank is a client.
        if (server)
            o.store = open_store(url, StoreOptions{world.connect_timeout, false});
        else
            o.store_url = url;
        o.timeout = world.timeout;
        o.connect_timeout = world.connect_timeout;
        o.address = world.address;
        o.direct_copy = world.direct_copy;
        o.shm_size = world.shm_size;
        if (world.configure) world.configure(rank, o);
        Communicator comm(o);
        fn(comm);
    });
}

template <typename F>
std::vector<RankOutcome> spawn_comms(int size, F&& fn) {
    return spawn_comms(size, World{}, std::forward<F>(fn));
}

// FNV-1a of a buffer: ranks compare their results through it.
inline uint64_t fingerprint(const void* data, std::size_t bytes) {
    uint64_t h = 1469598103934665603ull;
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

// ------------------------------------------- float16 / bfloat16, bit by bit

// binary16: 1 sign bit, 5 exponent bits (bias 15), 10 fraction bits.
inline double half_to_double(uint16_t h) {
    const double sign = (h & 0x8000u) ? -1.0 : 1.0;
    const int exponent = (h >> 10) & 0x1f;
    const int fraction = h & 0x3ff;
    if (exponent == 0x1f) return fraction ? std::numeric_limits<double>::quiet_NaN() : sign * HUGE_VAL;
    if (exponent == 0) return sign * std::ldexp(fraction, -24);
    return sign * std::ldexp(1024 + fraction, exponent - 25);
}

// bfloat16: the upper 16 bits of a float32.
inline double bfloat16_to_double(uint16_t b) {
    const double sign = (b & 0x8000u) ? -1.0 : 1.0;
    const int exponent = (b >> 7) & 0xff;
    const int fraction = b & 0x7f;
    if (exponent == 0xff) return fraction ? std::numeric_limits<double>::quiet_NaN() : sign * HUGE_VAL;
    if (exponent == 0) return sign * std::ldexp(fraction, -133);
    return sign * std::ldexp(128 + fraction, exponent - 134);
}

// Round to nearest, ties to even, for values in the normal range of the
// format (the tests only build such values).
inline uint16_t double_to_half(double v) {
    const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    v = std::fabs(v);
    if (v == 0) return sign;
    int e = 0;
    const double m = std::frexp(v, &e);  // v = m * 2^e, m in [0.5, 1)
    double fraction = std::nearbyint((m * 2 - 1) * 1024);  // default rounding: to even
    int exponent = e - 1 + 15;
    if (fraction == 1024) {
        fraction = 0;
        ++exponent;
    }
    return static_cast<uint16_t>(sign | (exponent << 10) | static_cast<int>(fraction));
}

inline uint16_t double_to_bfloat16(double v) {
    const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    v = std::fabs(v);
    if (v == 0) return sign;
    int e = 0;
    const double m = std::frexp(v, &e);
    double fraction = std::nearbyint((m * 2 - 1) * 128);
    int exponent = e - 1 + 127;
    if (fraction == 128) {
        fraction = 0;
        ++exponent;
    }
    return static_cast<uint16_t>(sign | (exponent << 7) | static_cast<int>(fraction));
}

// Element i of a buffer of `type`, as a double (floats) or an integer.
inline double load_float(DataType type, const std::byte* data, std::size_t i) {
    switch (type) {
        case DataType::float32: {
            float v;
            std::memcpy(&v, data + 4 * i, 4);
            return v;
        }
        case DataType::float64: {
            double v;
            std::memcpy(&v, data + 8 * i, 8);
            return v;
        }
        case DataType::float16:
        case DataType::bfloat16: {
            uint16_t v;
            std::memcpy(&v, data + 2 * i, 2);
            return type == DataType::float16 ? half_to_double(v) : bfloat16_to_double(v);
        }
        default: return std::numeric_limits<double>::quiet_NaN();
    }
}

inline int64_t load_int(DataType type, const std::byte* data, std::size_t i) {
    switch (type) {
        case DataType::int32: {
            int32_t v;
            std::memcpy(&v, data + 4 * i, 4);
            return v;
        }
        case DataType::int64: {
            int64_t v;
            std::memcpy(&v, data + 8 * i, 8);
            return v;
        }
        case DataType::uint8: return static_cast<int64_t>(std::to_integer<uint8_t>(data[i]));
        default: return 0;
    }
}

// Stores `v`, which must be exactly representable in `type`.
inline void store_float(DataType type, std::byte* data, std::size_t i, double v) {
    switch (type) {
        case DataType::float32: {
            const auto f = static_cast<float>(v);
            std::memcpy(data + 4 * i, &f, 4);
            break;
        }
        case DataType::float64: std::memcpy(data + 8 * i, &v, 8); break;
        case DataType::float16:
        case DataType::bfloat16: {
            const uint16_t b = type == DataType::float16 ? double_to_half(v) : double_to_bfloat16(v);
            std::memcpy(data + 2 * i, &b, 2);
            break;
        }
        default: break;
    }
}

inline void store_int(DataType type, std::byte* data, std::size_t i, int64_t v) {
    switch (type) {
        case DataType::int32: {
            const auto x = static_cast<int32_t>(v);
            std::memcpy(data + 4 * i, &x, 4);
            break;
        }
        case DataType::int64: std::memcpy(data + 8 * i, &v, 8); break;
        case DataType::uint8: data[i] = static_cast<std::byte>(static_cast<uint8_t>(v)); break;
        default: break;
    }
}

// Fraction bits and machine epsilon of each float type.
inline int fraction_bits(DataType type) {
    switch (type) {
        case DataType::float32: return 23;
        case DataType::float64: return 52;
        case DataType::float16: return 10;
        case DataType::bfloat16: return 7;
        default: return 0;
    }
}
inline double epsilon(DataType type) { return std::ldexp(1.0, -fraction_bits(type)); }

// ------------------------------------------------------------- references

// One all-reduce's inputs (per rank) and the expected result, element by
// element: an exact integer, or a double with the error allowed.
struct ReductionCase {
    DataType dtype = DataType::float32;
    ReduceOp op = ReduceOp::sum;
    std::size_t count = 0;
    int ranks = 1;
    std::vector<std::vector<std::byte>> inputs;  // [rank], count elements each
    std::vector<double> expected;                // floats
    std::vector<double> tolerance;               // floats
    std::vector<int64_t> expected_int;           // integers

    std::string name() const {
        return std::string(dtype_name(dtype)) + " " + reduce_op_name(op) + " x" + std::to_string(count);
    }
    std::size_t bytes() const { return count * dtype_size(dtype); }
};

// A value for rank `rank` that keeps the reduction in range: no overflow
// for integer sums and products, no blow-up for float products. Floats are
// built exactly representable: +-(1 + f / 2^p) * 2^e.
inline double random_float(std::mt19937_64& rng, DataType type, ReduceOp op) {
    const int p = fraction_bits(type);
    int lo = -8, hi = 0;  // sums: magnitudes in [2^-8, 2)
    if (op == ReduceOp::prod) lo = -1, hi = 0;  // [0.5, 2): a product of 8 stays within [2^-8, 2^8)
    if (op == ReduceOp::min || op == ReduceOp::max) lo = -10, hi = 10;
    const int e = lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1));
    const int shown = std::min(p, 52);
    const uint64_t fraction = shown == 0 ? 0 : rng() >> (64 - shown);
    const double magnitude = std::ldexp(1.0 + std::ldexp(static_cast<double>(fraction), -shown), e);
    return (rng() & 1) ? -magnitude : magnitude;
}

inline int64_t random_int(std::mt19937_64& rng, DataType type, ReduceOp op, int rank, int ranks) {
    auto in = [&](int64_t lo, int64_t hi) {
        return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
    };
    switch (op) {
        case ReduceOp::sum:
        case ReduceOp::avg:
            if (type == DataType::uint8) return in(0, 255 / ranks);
            if (type == DataType::int32) return in(-1000000, 1000000);
            return in(-1000000000000000, 1000000000000000);
        case ReduceOp::prod: {
            // Products of up to 8 factors of magnitude <= 2 fit every type;
            // uint8 keeps one rank at 1 so that 2^8 cannot happen.
            if (type == DataType::uint8) return rank >= 7 ? 1 : in(1, 2);
            static constexpr int64_t factors[] = {1, 2, -1};
            return factors[rng() % 3];
        }
        case ReduceOp::min:
        case ReduceOp::max:
            if (type == DataType::uint8) return in(0, 255);
            if (type == DataType::int32) return in(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
            return static_cast<int64_t>(rng());
    }
    return 0;
}

// Random inputs for `ranks` ranks and their reduction, computed in double
// (floats) or int64 (integers, no overflow by the choice of values).
inline ReductionCase make_case(std::mt19937_64& rng, DataType dtype, ReduceOp op, std::size_t count, int ranks) {
    ReductionCase c;
    c.dtype = dtype;
    c.op = op;
    c.count = count;
    c.ranks = ranks;
    const std::size_t es = dtype_size(dtype);
    c.inputs.assign(static_cast<std::size_t>(ranks), std::vector<std::byte>(count * es));
    if (is_float(dtype)) {
        std::vector<double> acc(count), magnitude(count, 0.0);
        for (int r = 0; r < ranks; ++r) {
            auto& in = c.inputs[static_cast<std::size_t>(r)];
            for (std::size_t i = 0; i < count; ++i) {
                const double v = random_float(rng, dtype, op);
                store_float(dtype, in.data(), i, v);
                magnitude[i] += std::fabs(v);
                if (r == 0) {
                    acc[i] = v;
                    continue;
                }
                switch (op) {
                    case ReduceOp::sum:
                    case ReduceOp::avg: acc[i] += v; break;
                    case ReduceOp::prod: acc[i] *= v; break;
                    case ReduceOp::min: acc[i] = std::min(acc[i], v); break;
                    case ReduceOp::max: acc[i] = std::max(acc[i], v); break;
                }
            }
        }
        // Each of the n - 1 combining steps (and the final division) rounds
        // once in the element type: a relative error of eps each, on at most
        // the sum of magnitudes; min and max only pick a value, exactly.
        const double eps = epsilon(dtype), steps = ranks + 1;
        c.expected.resize(count);
        c.tolerance.resize(count);
        for (std::size_t i = 0; i < count; ++i) {
            switch (op) {
                case ReduceOp::sum:
                    c.expected[i] = acc[i];
                    c.tolerance[i] = steps * eps * magnitude[i];
                    break;
                case ReduceOp::avg:
                    c.expected[i] = acc[i] / ranks;
                    c.tolerance[i] = steps * eps * magnitude[i] / ranks + eps * std::fabs(c.expected[i]);
                    break;
                case ReduceOp::prod:
                    c.expected[i] = acc[i];
                    c.tolerance[i] = steps * eps * std::fabs(acc[i]);
                    break;
                case ReduceOp::min:
                case ReduceOp::max:
                    c.expected[i] = acc[i];
                    c.tolerance[i] = 0;
                    break;
            }
        }
    } else {
        c.expected_int.resize(count);
        for (int r = 0; r < ranks; ++r) {
            auto& in = c.inputs[static_cast<std::size_t>(r)];
            for (std::size_t i = 0; i < count; ++i) {
                const int64_t v = random_int(rng, dtype, op, r, ranks);
                store_int(dtype, in.data(), i, v);
                int64_t& acc = c.expected_int[i];
                if (r == 0) {
                    acc = v;
                    continue;
                }
                switch (op) {
                    case ReduceOp::sum:
                    case ReduceOp::avg: acc += v; break;
                    case ReduceOp::prod: acc *= v; break;
                    case ReduceOp::min: acc = std::min(acc, v); break;
                    case ReduceOp::max: acc = std::max(acc, v); break;
                }
            }
        }
        if (op == ReduceOp::avg)
            for (auto& v : c.expected_int) v /= ranks;  // truncation toward zero, as documented
    }
    return c;
}

// "" when `out` holds elements [first, first + n) of the expected result;
// else the first wrong element, its value and the expected one.
inline std::string check_result(const ReductionCase& c, const std::byte* out, std::size_t first, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t at = first + i;
        if (is_float(c.dtype)) {
            const double got = load_float(c.dtype, out, i);
            if (!(std::fabs(got - c.expected[at]) <= c.tolerance[at]))
                return "element " + std::to_string(at) + " is " + std::to_string(got) + ", expected " +
                       std::to_string(c.expected[at]) + " +- " + std::to_string(c.tolerance[at]);
        } else {
            const int64_t got = load_int(c.dtype, out, i);
            if (got != c.expected_int[at])
                return "element " + std::to_string(at) + " is " + std::to_string(got) + ", expected " +
                       std::to_string(c.expected_int[at]);
        }
    }
    return {};
}

inline std::string check_result(const ReductionCase& c, const std::byte* out) {
    return check_result(c, out, 0, c.count);
}

// Failures found on the rank threads, reported from the test's thread.
class Problems {
public:
    void add(int rank, std::string what) {
        std::lock_guard lock(mutex_);
        list_.push_back("rank " + std::to_string(rank) + ": " + std::move(what));
    }
    // One failure listing the first few, with the seed to replay them.
    void expect_none(uint64_t seed) const {
        std::lock_guard lock(mutex_);
        if (list_.empty()) return;
        std::string text;
        for (std::size_t i = 0; i < list_.size() && i < 20; ++i) text += "\n  " + list_[i];
        if (list_.size() > 20) text += "\n  ... and " + std::to_string(list_.size() - 20) + " more";
        ADD_FAILURE() << list_.size() << " problem(s) (replay with COHORT_TEST_SEED=" << seed << "):" << text;
    }

private:
    mutable std::mutex mutex_;
    std::vector<std::string> list_;
};

}  // namespace cohort::test
