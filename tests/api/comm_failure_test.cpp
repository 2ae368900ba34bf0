// How collectives fail: ranks that disagree, a rank that never calls or
// closes, refused handshakes, ranks that never show up, bad arguments, and
// the address options (IPv6, interface names). Every failure is an Error
// with a code and a message naming the operation and the rank at fault,
// within the operation's timeout; timings are asserted loosely, since the
// machine may be loaded.
#include "comm_support.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <cstdio>
#include <latch>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace cohort::test {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ----------------------------------------------------------------- mismatch

// One way for rank `odd` to call something other than the rest. Each entry
// runs the same allreduce / broadcast / barrier family on two or more ranks.
struct Disagreement {
    const char* name;
    int n;
    int odd;  // the rank that differs
    // Runs this rank's side; `odd_one` says whether it is the odd rank.
    std::function<void(Communicator&, bool odd_one)> call;
    std::vector<std::string> words;  // every message contains these
};

void reduce(Communicator& c, std::size_t count, DataType dtype, ReduceOp op, Algorithm algorithm) {
    std::vector<std::byte> data(count * dtype_size(dtype));
    c.allreduce(data.data(), count, dtype, op, {algorithm, {}});
}

std::vector<Disagreement> disagreements() {
    using A = Algorithm;
    std::vector<Disagreement> list;
    for (Algorithm a : {A::star, A::ring, A::doubling, A::hierarchical}) {
        list.push_back({"count", 2, 1,
                        [a](Communicator& c, bool odd) {
                            reduce(c, odd ? 11 : 10, DataType::float32, ReduceOp::sum, a);
                        },
                        {"allreduce #1", "10 float32", "11 float32"}});
        list.push_back({"count", 4, 3,
                        [a](Communicator& c, bool odd) {
                            reduce(c, odd ? 11 : 10, DataType::float32, ReduceOp::sum, a);
                        },
                        {"allreduce #1", "rank 3"}});
    }
    list.push_back({"dtype", 2, 0,
                    [](Communicator& c, bool odd) {
                        reduce(c, 4, odd ? DataType::int32 : DataType::float32, ReduceOp::sum, A::doubling);
                    },
                    {"allreduce #1", "int32", "float32"}});
    list.push_back({"op", 3, 1,
                    [](Communicator& c, bool odd) {
                        reduce(c, 4, DataType::int64, odd ? ReduceOp::max : ReduceOp::min, A::ring);
                    },
                    {"allreduce #1", "max", "min"}});
    list.push_back({"algorithm", 2, 1,
                    [](Communicator& c, bool odd) {
                        reduce(c, 4, DataType::int64, ReduceOp::sum, odd ? A::ring : A::star);
                    },
                    {"allreduce #1", "ring", "star"}});
    list.push_back({"kind", 2, 1,
                    [](Communicator& c, bool odd) {
                        if (odd) {
                            char text[16] = {};
                            c.broadcast(text, sizeof text, 0);
                        } else {
                            reduce(c, 4, DataType::float32, ReduceOp::sum, A::doubling);
                        }
                    },
                    {"allreduce #1", "broadcast #1"}});
    list.push_back({"kind", 3, 2,
                    [](Communicator& c, bool odd) {
                        if (odd) {
                            c.barrier();
                        } else {
                            reduce(c, 4, DataType::float32, ReduceOp::sum, A::ring);
                        }
                    },
                    {"#1", "rank 2"}});
    list.push_back({"tensor names", 2, 1,
                    [](Communicator& c, bool odd) {
                        std::vector<float> a(8), b(8);
                        std::map<std::string, Tensor> t;
                        t[odd ? "weights" : "weight"] = {std::as_writable_bytes(std::span(a)), DataType::float32};
                        t["bias"] = {std::as_writable_bytes(std::span(b)), DataType::float32};
                        c.allreduce_named(t, ReduceOp::sum);
                    },
                    {"allreduce #1", "other tensor names"}});
    return list;
}

void PrintTo(const Disagreement& d, std::ostream* os) { *os << d.name << " on " << d.n << " ranks"; }

class Mismatch : public ::testing::TestWithParam<Disagreement> {};

// Every rank fails with Errc::mismatch naming the operation and the ranks;
// the communicator is broken for good afterwards, and says why.
//
// With two ranks both see the other's frame, so both report the mismatch.
// In larger worlds a rank that did not receive a disagreeing frame learns
// of it from a neighbour's abort frame; two bugs in src/comm sometimes lose
// that abort (tests/unit/comm_frame_test.cpp reproduces both, disabled:
// FakePeer.DISABLED_AbortIsSentWhenTheMismatchIsSeenBeforeTheFirstSendCompletes
// and FakePeer.DISABLED_AbortWinsOverTheResetThatFollowsIt), and such a
// rank then fails with peer_failed naming its neighbour ("closed the
// connection without saying goodbye", "sending to it failed: Broken pipe"),
// in about one run in ten with three or four ranks. Until they are fixed
// bystanders may report peer_failed; at least one rank must report the
// mismatch with the full story, and with two ranks both must.
TEST_P(Mismatch, EveryRankFailsAndTheCommunicatorIsBroken) {
    const Disagreement& d = GetParam();
    Problems problems;
    std::atomic<int> told{0};  // ranks that reported the mismatch with every word
    World world;
    world.configure = [](int rank, CommOptions& o) { o.host_label = paired_host(rank); };
    const auto outcomes = spawn_comms(d.n, world, [&](Communicator& comm) {
        const int rank = comm.rank();
        try {
            d.call(comm, rank == d.odd);
            problems.add(rank, "the disagreeing operation succeeded");
            return;
        } catch (const Error& e) {
            const std::string m = e.what();
            const bool bystander_lost_abort = d.n > 2 && e.code() == Errc::peer_failed;
            if (e.code() != Errc::mismatch && !bystander_lost_abort)
                problems.add(rank, std::string("code ") + errc_name(e.code()) + ", expected mismatch: " + m);
            if (e.code() == Errc::mismatch) {
                bool all = true;
                for (const auto& word : d.words)
                    if (!contains(m, word)) {
                        problems.add(rank, "the message lacks '" + word + "': " + m);
                        all = false;
                    }
                // The other rank of a pair is named; in larger worlds the odd one.
                const int other = d.n == 2 ? 1 - rank : d.odd;
                if ((rank != d.odd || d.n == 2) && !contains(m, "rank " + std::to_string(other))) {
                    problems.add(rank, "the message does not name rank " + std::to_string(other) + ": " + m);
                    all = false;
                }
                if (all) ++told;
            } else if (!contains(m, "#1")) {
                problems.add(rank, "the message does not name the call: " + m);
            }
        }
        // (4) Broken: the next operations fail at once with Errc::closed.
        if (!comm.broken()) problems.add(rank, "broken() is false after the failure");
        const std::string reason = comm.broken_reason();
        if (reason.empty()) problems.add(rank, "broken_reason() is empty after the failure");
        const auto start = Clock::now();
        int32_t v = 1;
        const std::string next = error_message(Errc::closed, [&] { comm.allreduce(&v, 1, DataType::int32, ReduceOp::sum); });
        if (!contains(next, "broken") || !contains(next, reason))
            problems.add(rank, "the closed error does not give the reason: " + next);
        if (!contains(next, "allreduce #2")) problems.add(rank, "the closed error does not name the call: " + next);
        error_message(Errc::closed, [&] { comm.barrier(); });
        error_message(Errc::closed, [&] { comm.broadcast(&v, sizeof v, 0); });
        Work w = comm.allreduce_async(&v, &v, 1, DataType::int32, ReduceOp::sum);
        error_message(Errc::closed, [&] { w.wait(); });
        if (since(start) > 5s) problems.add(rank, "operations on a broken communicator took " +
                                                      std::to_string(since(start).count()) + " ms to fail");
    });
    expect_ok(outcomes);
    problems.expect_none(0);
    EXPECT_GE(told.load(), 1) << "no rank reported the mismatch";
    if (d.n == 2) {
        EXPECT_EQ(told.load(), 2);
    }
}

INSTANTIATE_TEST_SUITE_P(Calls, Mismatch, ::testing::ValuesIn(disagreements()),
                         [](const ::testing::TestParamInfo<Disagreement>& p) {
                             std::string name = std::string(p.param.name) + "_n" + std::to_string(p.param.n) +
                                                "_" + std::to_string(p.index);
                             for (auto& ch : name)
                                 if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                             return name;
                         });

// Ranks that disagree on a broadcast's root, over TCP: each one that
// believes it is the root only sends, so with two ranks nobody receives and
// the broadcast itself cannot notice. The disagreement surfaces, on every
// rank, as a mismatch in the next operation that names the broadcast and
// its root (documented in docs/collectives.md). Over shared memory every
// rank meets in the broadcast itself, which then fails (comm_shm_test.cpp).
TEST(BroadcastRoots, DisagreeingRootsFailTheNextOperation) {
    Problems problems;
    World tcp;
    tcp.shm_size = 0;
    const auto outcomes = spawn_comms(2, tcp, [&](Communicator& comm) {
        char text[16] = {};
        std::snprintf(text, sizeof text, "from rank %d", comm.rank());
        comm.broadcast(text, sizeof text, comm.rank());  // each believes it is the root
        try {
            comm.barrier();
            problems.add(comm.rank(), "the barrier after the disagreeing broadcast succeeded");
        } catch (const Error& e) {
            if (e.code() != Errc::mismatch) problems.add(comm.rank(), std::string("code ") + errc_name(e.code()));
            if (!contains(e.what(), "broadcast #1") || !contains(e.what(), "root"))
                problems.add(comm.rank(), std::string("the message names neither the call nor the root: ") + e.what());
        }
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

// ------------------------------------------------------------ silent ranks

// (3) A rank that never calls: the caller times out after the call's
// timeout, naming the rank it waited for.
TEST(SilentRank, CallerTimesOutNamingIt) {
    std::latch done(1);
    Problems problems;
    const auto outcomes = spawn_comms(2, [&](Communicator& comm) {
        if (comm.rank() == 1) {
            done.wait();  // stays alive and connected, but never calls
            return;
        }
        const auto start = Clock::now();
        int32_t v = 0;
        const std::string m = error_message(Errc::timeout, [&] {
            comm.allreduce(&v, 1, DataType::int32, ReduceOp::sum, {Algorithm::automatic, 500ms});
        });
        const auto took = since(start);
        done.count_down();
        if (!contains(m, "allreduce #1") || !contains(m, "rank 1") || !contains(m, "0.5 s"))
            problems.add(0, "the timeout message does not name the call, the rank or the timeout: " + m);
        if (took < 450ms || took > 5s)
            problems.add(0, "timed out after " + std::to_string(took.count()) + " ms, for a timeout of 500 ms");
        if (!comm.broken()) problems.add(0, "not broken after the timeout");
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

// With three ranks, the rank that waits for the silent one times out first
// and tells the other, which fails with the same code and names the silent
// rank too, well before its own (longer) timeout.
TEST(SilentRank, TheTimeoutReachesEveryCaller) {
    std::latch done(2);
    Problems problems;
    const auto outcomes = spawn_comms(3, [&](Communicator& comm) {
        const int rank = comm.rank();
        if (rank == 2) {
            done.wait();
            return;
        }
        const auto timeout = rank == 0 ? 500ms : 8000ms;
        const auto start = Clock::now();
        std::vector<float> v(10);
        try {
            // Star: rank 0 gathers, so it waits for rank 2's data; rank 1
            // waits for rank 0's result.
            comm.allreduce(v.data(), v.size(), DataType::float32, ReduceOp::sum, {Algorithm::star, timeout});
            problems.add(rank, "the allreduce succeeded without rank 2");
        } catch (const Error& e) {
            const std::string m = e.what();
            if (e.code() != Errc::timeout) problems.add(rank, std::string("code ") + errc_name(e.code()) + ": " + m);
            if (!contains(m, "rank 2")) problems.add(rank, "the message does not name rank 2: " + m);
            if (since(start) > 6s) problems.add(rank, "failed after " + std::to_string(since(start).count()) + " ms");
        }
        done.count_down();
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

// ------------------------------------------------------------- abort()

// Another thread aborts a rank that waits for a silent peer: its call fails
// at once with the reason (not at its 30 s timeout), and the silent rank's
// calls fail naming the aborted rank instead of waiting for it.
TEST(Abort, FromAnotherThreadEndsTheWaitAndReachesThePeers) {
    std::latch aborted(1);
    Problems problems;
    const auto outcomes = spawn_comms(2, [&](Communicator& comm) {
        int32_t v = 1;
        const CallOptions slow{Algorithm::automatic, 30s};
        if (comm.rank() == 1) {
            aborted.wait();
            const auto start = Clock::now();
            // Rank 0 sent its data before it was aborted, so this call may
            // still complete; the next cannot.
            std::string m;
            for (int call = 0; call < 2 && m.empty(); ++call) {
                try {
                    comm.allreduce(&v, 1, DataType::int32, ReduceOp::sum, slow);
                } catch (const Error& e) {
                    m = e.what();
                    if (e.code() != Errc::closed) problems.add(1, std::string("code ") + errc_name(e.code()) + ": " + m);
                }
            }
            if (!contains(m, "rank 0") || !contains(m, "the world is over"))
                problems.add(1, "the peer's error does not name rank 0 and its reason: " + m);
            if (since(start) > 5s) problems.add(1, "the peer waited " + std::to_string(since(start).count()) + " ms");
            return;
        }
        const Communicator::AbortHandle handle = comm.abort_handle();
        std::thread watchdog([handle] {
            std::this_thread::sleep_for(200ms);
            handle.abort("the world is over");
        });
        const auto start = Clock::now();
        const std::string m = error_message(Errc::closed, [&] {
            comm.allreduce(&v, 1, DataType::int32, ReduceOp::sum, slow);
        });
        watchdog.join();
        const auto took = since(start);
        aborted.count_down();
        if (!contains(m, "allreduce #1") || !contains(m, "aborted: the world is over"))
            problems.add(0, "the message does not name the call and the reason: " + m);
        if (took < 150ms || took > 5s) problems.add(0, "aborted after " + std::to_string(took.count()) + " ms");
        if (!comm.broken()) problems.add(0, "not broken after abort()");
        comm.abort("again");  // once broken, nothing more happens
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

// Aborted between operations: the next one fails at once; a handle that
// outlives its communicator does nothing.
TEST(Abort, BeforeTheNextOperationAndAfterTheCommunicatorIsGone) {
    Communicator::AbortHandle kept;
    Problems problems;
    const auto outcomes = spawn_comms(2, [&](Communicator& comm) {
        int32_t v = 1;
        comm.allreduce(&v, 1, DataType::int32, ReduceOp::sum);
        if (comm.rank() == 0) {
            kept = comm.abort_handle();
            comm.abort("stop here");
            const std::string m = error_message(Errc::closed, [&] { comm.barrier(); });
            if (!contains(m, "barrier") || !contains(m, "aborted: stop here")) problems.add(0, "barrier: " + m);
            return;
        }
        const std::string m = error_message(Errc::closed, [&] { comm.barrier({Algorithm::automatic, 30s}); });
        if (!contains(m, "rank 0")) problems.add(1, "the peer's error does not name rank 0: " + m);
    });
    expect_ok(outcomes);
    problems.expect_none(0);
    EXPECT_TRUE(static_cast<bool>(kept));
    kept.abort("too late");  // the communicator is gone: a no-op, not a crash
    EXPECT_FALSE(static_cast<bool>(Communicator::AbortHandle{}));
    Communicator::AbortHandle{}.abort("nothing to abort");
}

// ----------------------------------------------------------- closing ranks

class ClosingRank : public ::testing::TestWithParam<Algorithm> {};

// (5) A rank closes its communicator while the others call: they fail
// quickly (a goodbye, not a timeout) naming it.
TEST_P(ClosingRank, OthersFailNamingIt) {
    const Algorithm algorithm = GetParam();
    Problems problems;
    World world;
    world.timeout = 30s;
    world.configure = [](int rank, CommOptions& o) { o.host_label = paired_host(rank); };
    const auto outcomes = spawn_comms(3, world, [&](Communicator& comm) {
        const int rank = comm.rank();
        if (rank == 2) {
            comm.close();
            comm.close();  // twice is harmless
            if (!comm.broken()) problems.add(rank, "broken() is false after close()");
            int32_t v = 1;
            const std::string m =
                error_message(Errc::closed, [&] { comm.allreduce(&v, 1, DataType::int32, ReduceOp::sum); });
            if (!contains(m, "closed")) problems.add(rank, "after close(): " + m);
            Work w = comm.barrier_async();
            error_message(Errc::closed, [&] { w.wait(); });
            return;
        }
        const auto start = Clock::now();
        std::vector<int64_t> v(1000, 1);
        try {
            comm.allreduce(v.data(), v.size(), DataType::int64, ReduceOp::sum, {algorithm, {}});
            problems.add(rank, "the allreduce succeeded without rank 2");
        } catch (const Error& e) {
            const std::string m = e.what();
            if (e.code() != Errc::closed && e.code() != Errc::peer_failed)
                problems.add(rank, std::string("code ") + errc_name(e.code()) + ": " + m);
            if (!contains(m, "rank 2")) problems.add(rank, "the message does not name rank 2: " + m);
            if (since(start) > 15s)
                problems.add(rank, "failed after " + std::to_string(since(start).count()) + " ms: a timeout, not the goodbye");
        }
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ClosingRank,
                         ::testing::Values(Algorithm::star, Algorithm::ring, Algorithm::doubling,
                                           Algorithm::hierarchical),
                         [](const ::testing::TestParamInfo<Algorithm>& p) {
                             return std::string(algorithm_name(p.param));
                         });

// A communicator that finished its work and closes disturbs nobody.
TEST(Closing, AfterTheLastOperationIsClean) {
    const auto outcomes = spawn_comms(4, [&](Communicator& comm) {
        int32_t v = 1;
        comm.allreduce(&v, 1, DataType::int32, ReduceOp::sum);
        EXPECT_EQ(v, 4);
        comm.close();
    });
    expect_ok(outcomes);
}

// ---------------------------------------------------------------- handshake

// A store view that drops the "cohort/JOB/GENERATION/" scope from keys, so
// ranks of different jobs or generations meet in it: what a confused
// launcher or a shared store with stale keys would do. Their handshake must
// then refuse the connection.
class Unscoped final : public Store {
public:
    explicit Unscoped(std::shared_ptr<Store> base) : base_(std::move(base)) {}
    void set(std::string_view key, std::string_view value) override { base_->set(strip(key), value); }
    std::string get(std::string_view key, std::chrono::milliseconds timeout) override {
        return base_->get(strip(key), timeout);
    }
    std::optional<std::string> try_get(std::string_view key) override { return base_->try_get(strip(key)); }
    int64_t add(std::string_view key, int64_t delta) override { return base_->add(strip(key), delta); }
    std::string compare_and_set(std::string_view key, const std::optional<std::string>& expected,
                                std::string_view desired) override {
        return base_->compare_and_set(strip(key), expected, desired);
    }
    void wait(std::span<const std::string> keys, std::chrono::milliseconds timeout) override {
        std::vector<std::string> stripped;
        for (const auto& k : keys) stripped.push_back(strip(k));
        base_->wait(stripped, timeout);
    }
    bool remove(std::string_view key) override { return base_->remove(strip(key)); }
    std::string address() const override { return base_->address(); }

private:
    static std::string strip(std::string_view key) {
        if (!key.starts_with("cohort/")) return std::string(key);
        std::size_t at = key.find('/', 7);  // end of the job id
        if (at != std::string_view::npos) at = key.find('/', at + 1);  // end of the generation
        return at == std::string_view::npos ? std::string(key) : std::string(key.substr(at + 1));
    }
    std::shared_ptr<Store> base_;
};

struct Refusal {
    const char* name;
    std::function<void(int rank, CommOptions&)> configure;
    std::string words;  // what the messages say differed
    bool unscoped;      // the ranks only meet through Unscoped
};

void PrintTo(const Refusal& r, std::ostream* os) { *os << r.name; }

class Handshake : public ::testing::TestWithParam<Refusal> {};

// (6) The dialling rank (rank 1) fails on the refusal (unavailable or
// permission_denied, not its timeout) saying what differed; the accepting
// rank refused and fails when its connect timeout runs out, giving the same
// reason.
TEST_P(Handshake, RefusedWithTheReason) {
    const Refusal& refusal = GetParam();
    StoreServer server("127.0.0.1", 0);
    const auto outcomes = spawn(2, [&](int rank, int size) {
        CommOptions o;
        o.rank = rank;
        o.size = size;
        o.address = "127.0.0.1";
        o.connect_timeout = 2s;
        if (refusal.unscoped)
            o.store = std::make_shared<Unscoped>(open_store(server.url()));
        else
            o.store = open_store(server.url());  // a client: a tcp:// URL would make rank 0 host
        refusal.configure(rank, o);
        Communicator comm(o);
    });
    ASSERT_FALSE(outcomes[1].ok) << "the connection was not refused";
    EXPECT_TRUE(outcomes[1].code == Errc::unavailable || outcomes[1].code == Errc::permission_denied)
        << describe(outcomes[1]);
    EXPECT_TRUE(contains(outcomes[1].message, refusal.words)) << outcomes[1].message;
    EXPECT_TRUE(contains(outcomes[1].message, "rank 0")) << outcomes[1].message;
    ASSERT_FALSE(outcomes[0].ok);
    EXPECT_TRUE(outcomes[0].cohort_error) << describe(outcomes[0]);
    EXPECT_TRUE(contains(outcomes[0].message, refusal.words)) << outcomes[0].message;
}

INSTANTIATE_TEST_SUITE_P(
    Differences, Handshake,
    ::testing::Values(
        Refusal{"job_id", [](int rank, CommOptions& o) { o.job_id = rank == 0 ? "training" : "eval"; }, "job id",
                true},
        Refusal{"generation", [](int rank, CommOptions& o) { o.generation = rank == 0 ? 3 : 4; }, "generation", true},
        Refusal{"secret_on_rank0_only", [](int rank, CommOptions& o) { o.secret = rank == 0 ? "s3cret" : ""; },
                "secret", false},
        Refusal{"secret_on_rank1_only", [](int rank, CommOptions& o) { o.secret = rank == 1 ? "s3cret" : ""; },
                "secret", false},
        Refusal{"different_secrets", [](int rank, CommOptions& o) { o.secret = rank == 0 ? "alpha" : "beta"; },
                "secret", false}),
    [](const ::testing::TestParamInfo<Refusal>& p) { return std::string(p.param.name); });

// The same secret on every rank, from the options or from $COHORT_SECRET.
TEST(Secret, SharedSecretConnects) {
    World world;
    world.configure = [](int, CommOptions& o) { o.secret = "correct horse battery staple"; };
    const auto outcomes = spawn_comms(3, world, [](Communicator& comm) {
        int32_t v = 1;
        comm.allreduce(&v, 1, DataType::int32, ReduceOp::sum);
        EXPECT_EQ(v, 3);
    });
    expect_ok(outcomes);
}

// Sets an environment variable for one test, and puts the old value back.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        if (value)
            ::setenv(name, value, 1);
        else
            ::unsetenv(name);
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;
    ~ScopedEnv() {
        if (old_)
            ::setenv(name_, old_->c_str(), 1);
        else
            ::unsetenv(name_);
    }

private:
    const char* name_;
    std::optional<std::string> old_;
};

TEST(Secret, FromTheEnvironment) {
    ScopedEnv secret("COHORT_SECRET", "from-the-environment");
    const auto outcomes = spawn_comms(2, [](Communicator& comm) {
        int32_t v = 2;
        comm.allreduce(&v, 1, DataType::int32, ReduceOp::prod);
        EXPECT_EQ(v, 4);
    });
    expect_ok(outcomes);
    // A rank with another secret in its options is refused.
    World world;
    world.connect_timeout = 2s;
    world.configure = [](int rank, CommOptions& o) {
        if (rank == 1) o.secret = "other";
    };
    const auto refused = spawn_comms(2, world, [](Communicator&) {});
    ASSERT_FALSE(refused[1].ok);
    EXPECT_EQ(refused[1].code, Errc::permission_denied) << refused[1].message;
    EXPECT_TRUE(contains(refused[1].message, "secret")) << refused[1].message;
}

// ------------------------------------------------------------ missing ranks

// (7) Ranks that never register: the others time out naming them.
TEST(MissingRanks, TimeoutNamesThem) {
    StoreServer server("127.0.0.1", 0);
    std::vector<std::chrono::milliseconds> took(4);
    const auto results = spawn(4, [&](int rank, int size) {
        if (rank == 1 || rank == 3) return;  // never start
        CommOptions o;
        o.rank = rank;
        o.size = size;
        o.store = open_store(server.url());  // a client: a tcp:// URL would make rank 0 host
        o.address = "127.0.0.1";
        o.connect_timeout = 1s;
        const auto start = Clock::now();
        try {
            Communicator comm(o);
        } catch (...) {
            took[static_cast<std::size_t>(rank)] = since(start);
            throw;
        }
    });
    for (int rank : {0, 2}) {
        const auto& r = results[static_cast<std::size_t>(rank)];
        ASSERT_FALSE(r.ok) << "rank " << rank << " connected without ranks 1 and 3";
        EXPECT_EQ(r.code, Errc::timeout) << r.message;
        EXPECT_TRUE(contains(r.message, "rank(s) 1, 3 of 4 never registered")) << r.message;
        EXPECT_TRUE(contains(r.message, server.url())) << r.message;
        EXPECT_GE(took[static_cast<std::size_t>(rank)], 900ms);
        EXPECT_LT(took[static_cast<std::size_t>(rank)], 10s);
    }
}

// ------------------------------------------------------- invalid arguments

// Environment variables are the documented defaults of CommOptions fields,
// read by with_env_defaults; what the caller set wins.
TEST(CommOptionsEnvironment, FillsWhatTheOptionsLeaveUnset) {
    {
        ScopedEnv spin("COHORT_SPIN_US", nullptr), direct("COHORT_DIRECT_COPY", nullptr),
            secret("COHORT_SECRET", nullptr), addr("COHORT_SOCKET_ADDR", nullptr),
            ifname("COHORT_SOCKET_IFNAME", nullptr);
        const CommOptions o = with_env_defaults({});
        ASSERT_TRUE(o.spin.has_value());
        EXPECT_EQ(*o.spin, std::chrono::microseconds(50));
        EXPECT_TRUE(o.direct_copy);
        EXPECT_TRUE(o.secret.empty());
        EXPECT_TRUE(o.address.empty());
        EXPECT_TRUE(o.ifname.empty());
    }
    ScopedEnv spin("COHORT_SPIN_US", "7"), direct("COHORT_DIRECT_COPY", "0"), secret("COHORT_SECRET", "s3"),
        addr("COHORT_SOCKET_ADDR", "127.0.0.1"), ifname("COHORT_SOCKET_IFNAME", "lo");
    const CommOptions from_env = with_env_defaults({});
    EXPECT_EQ(*from_env.spin, std::chrono::microseconds(7));
    EXPECT_FALSE(from_env.direct_copy);
    EXPECT_EQ(from_env.secret, "s3");
    EXPECT_EQ(from_env.address, "127.0.0.1");
    EXPECT_EQ(from_env.ifname, "lo");
    CommOptions mine;
    mine.spin = std::chrono::microseconds(0);
    mine.secret = "mine";
    mine.address = "127.0.0.2";
    mine.ifname = "eth9";
    const CommOptions kept = with_env_defaults(mine);
    EXPECT_EQ(*kept.spin, std::chrono::microseconds(0));
    EXPECT_EQ(kept.secret, "mine");
    EXPECT_EQ(kept.address, "127.0.0.2");
    EXPECT_EQ(kept.ifname, "eth9");
    ScopedEnv on("COHORT_DIRECT_COPY", "1");
    EXPECT_TRUE(with_env_defaults({}).direct_copy);
}

// A value the library cannot use is an error naming the variable, the value
// and what is accepted, from with_env_defaults and from a Communicator.
TEST(CommOptionsEnvironment, BadValuesAreRefusedByName) {
    for (const char* bad : {"abc", "-5", "12us", "1000001", "99999999999999999999"}) {
        SCOPED_TRACE(bad);
        ScopedEnv spin("COHORT_SPIN_US", bad);
        const std::string m = error_message(Errc::invalid_argument, [] { with_env_defaults({}); });
        EXPECT_TRUE(contains(m, std::string("COHORT_SPIN_US='") + bad + "'")) << m;
        EXPECT_TRUE(contains(m, "whole number of microseconds from 0 to 1000000")) << m;
    }
    {
        ScopedEnv spin("COHORT_SPIN_US", "abc");
        CommOptions o;
        o.rank = 0;
        o.size = 1;
        const std::string m = error_message(Errc::invalid_argument, [&] { Communicator c(o); });
        EXPECT_TRUE(contains(m, "COHORT_SPIN_US='abc'")) << m;
        o.spin = std::chrono::microseconds(10);  // the option wins: the variable is not read
        Communicator c(o);
        EXPECT_EQ(c.size(), 1);
    }
    ScopedEnv direct("COHORT_DIRECT_COPY", "yes");
    const std::string m = error_message(Errc::invalid_argument, [] { with_env_defaults({}); });
    EXPECT_TRUE(contains(m, "COHORT_DIRECT_COPY='yes': expected 0")) << m;
}

// COHORT_SHM_SIZE: bytes with an optional unit, 0 for off; what the caller
// set wins; anything else, or more than 64 GiB, is refused by name.
TEST(CommOptionsEnvironment, ShmSize) {
    constexpr std::size_t MiB = std::size_t(1) << 20;
    {
        ScopedEnv shm("COHORT_SHM_SIZE", nullptr);
        EXPECT_EQ(with_env_defaults({}).shm_size, 8 * MiB);
    }
    for (const auto& [text, bytes] : {std::pair<const char*, std::size_t>{"32M", 32 * MiB}, {"0", 0},
                                      {"4096", 4096}, {"1GiB", 1024 * MiB}}) {
        ScopedEnv shm("COHORT_SHM_SIZE", text);
        EXPECT_EQ(with_env_defaults({}).shm_size, bytes) << text;
        CommOptions mine;
        mine.shm_size = MiB;
        EXPECT_EQ(with_env_defaults(mine).shm_size, MiB) << text;
    }
    for (const char* bad : {"abc", "-1", "65G", "8 MiB please"}) {
        SCOPED_TRACE(bad);
        ScopedEnv shm("COHORT_SHM_SIZE", bad);
        const std::string m = error_message(Errc::invalid_argument, [] { with_env_defaults({}); });
        EXPECT_TRUE(contains(m, std::string("COHORT_SHM_SIZE='") + bad + "'")) << m;
        EXPECT_TRUE(contains(m, "0 turns shared")) << m;
    }
    CommOptions huge;
    huge.shm_size = std::size_t(65) << 30;
    const std::string m = error_message(Errc::invalid_argument, [&] { check_options(huge, false); });
    EXPECT_TRUE(contains(m, "shm_size 69793218560 is above 64 GiB")) << m;
}

TEST(InvalidArguments, Options) {
    auto refused = [](CommOptions o) { return error_message(Errc::invalid_argument, [&] { Communicator c(o); }); };
    CommOptions o;
    o.size = 2;
    o.rank = 2;
    o.store_url = "file:///tmp/unused";
    EXPECT_TRUE(contains(refused(o), "rank 2 is outside 0..1"));
    o.rank = -1;
    EXPECT_TRUE(contains(refused(o), "rank -1 is outside 0..1"));
    o.rank = 0;
    o.size = 0;
    EXPECT_TRUE(contains(refused(o), "size must be at least 1, not 0"));
    o.size = 2;
    o.store_url.clear();
    EXPECT_TRUE(contains(refused(o), "no store"));
    o.store_url = "file:///tmp/unused";
    o.job_id.clear();
    EXPECT_TRUE(contains(refused(o), "job id"));
    o.job_id = "cohort";
    o.timeout = 0ms;
    EXPECT_TRUE(contains(refused(o), "operation timeout must be positive"));
    o.timeout = 1s;
    o.connect_timeout = -1ms;
    EXPECT_TRUE(contains(refused(o), "connect timeout must be positive"));
    o.connect_timeout = 1s;
    o.max_frame = 100;
    EXPECT_TRUE(contains(refused(o), "max_frame 100"));
    o.max_frame = std::size_t(4) << 20;
    o.timeout = std::chrono::hours(24 * 366);
    EXPECT_TRUE(contains(refused(o), "operation timeout must be positive and at most a year")) << refused(o);
    o.timeout = 1s;
    o.spin = std::chrono::microseconds(-1);
    EXPECT_TRUE(contains(refused(o), "spin -1 us is outside 0..1000000 us")) << refused(o);
    o.spin.reset();
    o.socket_buffer = std::size_t(2) << 30;
    EXPECT_TRUE(contains(refused(o), "socket_buffer 2147483648 is above 1 GiB")) << refused(o);
    o.socket_buffer = 0;
    // Addresses are checked once the store is open.
    CommTempDir dir;
    o.store_url = "file://" + dir.path().string();
    o.address = "[::1";
    std::string m = refused(o);
    EXPECT_TRUE(contains(m, "'[::1' is not HOST, HOST:PORT or [IPV6]:PORT")) << m;
    o.address = "127.0.0.1:99999";
    m = refused(o);
    EXPECT_TRUE(contains(m, "port '99999'")) << m;
}

// Bad call arguments throw before anything is sent: the communicator stays
// healthy and in step with the ranks that made no mistake.
TEST(InvalidArguments, CallsFailLocallyAndLeaveTheCommunicatorWorking) {
    Problems problems;
    const auto outcomes = spawn_comms(2, [&](Communicator& comm) {
        if (comm.rank() == 0) {
            float a[4] = {}, b[4] = {};
            auto check = [&](const char* what, const std::string& words, auto&& call) {
                const std::string m = error_message(Errc::invalid_argument, call);
                if (!contains(m, words)) problems.add(0, std::string(what) + ": '" + words + "' not in: " + m);
            };
            check("null input", "allreduce: in must not be null when the call covers 16 bytes",
                  [&] { comm.allreduce(nullptr, b, 4, DataType::float32, ReduceOp::sum); });
            check("null output", "allreduce: out must not be null",
                  [&] { comm.allreduce(a, nullptr, 4, DataType::float32, ReduceOp::sum); });
            check("overlap", "overlap",
                  [&] { comm.allreduce(a, reinterpret_cast<std::byte*>(a) + 4, 3, DataType::float32, ReduceOp::sum); });
            check("dtype", "allreduce: dtype 42 is not a data type (0 float32 .. 6 uint8)",
                  [&] { comm.allreduce(a, 4, static_cast<DataType>(42), ReduceOp::sum); });
            check("op", "allreduce: op 9 is not a reduce op (0 sum .. 4 avg)",
                  [&] { comm.allreduce(a, 4, DataType::float32, static_cast<ReduceOp>(9)); });
            check("algorithm", "allreduce: algorithm 7 is not an algorithm (0 auto .. 5 shm)", [&] {
                comm.allreduce(a, 4, DataType::float32, ReduceOp::sum, {static_cast<Algorithm>(7), {}});
            });
            check("overflow", "overflow",
                  [&] { comm.allreduce(a, b, SIZE_MAX / 2, DataType::float32, ReduceOp::sum); });
            check("async", "dtype -1 is not a data type",
                  [&] { comm.allreduce_async(a, b, 4, static_cast<DataType>(-1), ReduceOp::sum); });
            check("root", "broadcast: root 2 is outside 0..1", [&] { comm.broadcast(a, sizeof a, 2); });
            check("negative root", "root -1", [&] { comm.broadcast(a, sizeof a, -1); });
            check("null broadcast", "broadcast: data must not be null", [&] { comm.broadcast(nullptr, 8, 0); });
            check("async root", "root 5", [&] { comm.broadcast_async(a, sizeof a, 5); });
            check("allgather", "allgather: out must not be null", [&] { comm.allgather(a, nullptr, 8); });
            check("allgather input", "allgather: in must not be null", [&] { comm.allgather(nullptr, b, 8); });
            check("reduce_scatter dtype", "reduce_scatter: dtype 7 is not a data type",
                  [&] { comm.reduce_scatter(a, b, 2, static_cast<DataType>(7), ReduceOp::sum); });
            check("reduce_scatter null", "reduce_scatter: in must not be null",
                  [&] { comm.reduce_scatter(nullptr, b, 2, DataType::float32, ReduceOp::sum); });
            std::vector<std::byte> odd(7);
            std::map<std::string, Tensor> tensors{{"odd", Tensor{std::span(odd), DataType::float32}}};
            check("named size", "tensor 'odd' has 7 bytes",
                  [&] { comm.allreduce_named(tensors, ReduceOp::sum); });
            tensors = {{"strange", Tensor{std::span(odd), static_cast<DataType>(12)}}};
            check("named dtype", "allreduce_named: tensor 'strange': dtype 12 is not a data type",
                  [&] { comm.allreduce_named(tensors, ReduceOp::sum); });
            if (comm.broken()) problems.add(0, "broken after invalid arguments: " + comm.broken_reason());
        }
        // Both ranks go on with operation #1.
        int64_t v = comm.rank() + 1;
        comm.allreduce(&v, 1, DataType::int64, ReduceOp::sum);
        if (v != 3) problems.add(comm.rank(), "the allreduce after the mistakes gave " + std::to_string(v));
    });
    expect_ok(outcomes);
    problems.expect_none(0);
}

// ---------------------------------------------------------------- addresses

bool have_ipv6_loopback() {
    const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0) return false;
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
}

// (9) Every rank on ::1, with the store there too.
TEST(Addresses, Ipv6Loopback) {
    if (!have_ipv6_loopback()) GTEST_SKIP() << "this machine cannot bind ::1";
    World world;
    world.address = "::1";
    world.store_host = "::1";
    const auto outcomes = spawn_comms(3, world, [](Communicator& comm) {
        std::vector<int32_t> v(100000, comm.rank());
        comm.allreduce(v.data(), v.size(), DataType::int32, ReduceOp::sum, {Algorithm::ring, {}});
        EXPECT_EQ(v[99999], 3);
        char text[6] = "?????";
        if (comm.rank() == 2) std::memcpy(text, "hello", 6);
        comm.broadcast(text, sizeof text, 2);
        EXPECT_STREQ(text, "hello");
    });
    expect_ok(outcomes);
}

// (10) COHORT_SOCKET_IFNAME picks the interface when no address is given.
TEST(Addresses, InterfaceFromTheEnvironment) {
    ScopedEnv addr("COHORT_SOCKET_ADDR", nullptr);
    ScopedEnv ifname("COHORT_SOCKET_IFNAME", "lo");
    World world;
    world.address.clear();
    const auto outcomes = spawn_comms(3, world, [](Communicator& comm) {
        int32_t v = comm.rank();
        comm.allreduce(&v, 1, DataType::int32, ReduceOp::max);
        EXPECT_EQ(v, 2);
    });
    expect_ok(outcomes);
}

// An interface that does not exist: the error lists the ones there are.
TEST(Addresses, UnknownInterfaceListsTheInterfaces) {
    ScopedEnv addr("COHORT_SOCKET_ADDR", nullptr);
    CommTempDir dir;
    CommOptions o;
    o.rank = 0;
    o.size = 2;
    o.store_url = "file://" + dir.path().string();
    o.connect_timeout = 2s;
    o.ifname = "nosuchif0";
    std::string m = error_message(Errc::invalid_argument, [&] { Communicator c(o); });
    EXPECT_TRUE(contains(m, "no interface 'nosuchif0'")) << m;
    EXPECT_TRUE(contains(m, "interfaces: ")) << m;
    EXPECT_TRUE(contains(m, "lo")) << m;
    o.ifname.clear();
    ScopedEnv ifname("COHORT_SOCKET_IFNAME", "nosuchif1");
    m = error_message(Errc::invalid_argument, [&] { Communicator c(o); });
    EXPECT_TRUE(contains(m, "COHORT_SOCKET_IFNAME=nosuchif1")) << m;
    EXPECT_TRUE(contains(m, "lo")) << m;
}

// A malformed address in the option or COHORT_SOCKET_ADDR: the error names
// where it came from and what is wrong, before anything is connected.
TEST(Addresses, MalformedSocketAddressSaysWhereAndWhat) {
    CommTempDir dir;
    CommOptions o;
    o.rank = 0;
    o.size = 2;
    o.store_url = "file://" + dir.path().string();
    o.connect_timeout = 2s;
    {
        ScopedEnv addr("COHORT_SOCKET_ADDR", "127.0.0.1:99999");
        const std::string m = error_message(Errc::invalid_argument, [&] { Communicator c(o); });
        EXPECT_TRUE(contains(m, "COHORT_SOCKET_ADDR: port '99999' in '127.0.0.1:99999' is not a number from 0 to 65535"))
            << m;
    }
    {
        ScopedEnv addr("COHORT_SOCKET_ADDR", "[::1");
        const std::string m = error_message(Errc::invalid_argument, [&] { Communicator c(o); });
        EXPECT_TRUE(contains(m, "COHORT_SOCKET_ADDR: '[::1' is not HOST, HOST:PORT or [IPV6]:PORT")) << m;
    }
    ScopedEnv addr("COHORT_SOCKET_ADDR", nullptr);
    o.address = "127.0.0.1:port";
    const std::string m = error_message(Errc::invalid_argument, [&] { Communicator c(o); });
    EXPECT_TRUE(contains(m, "the address option: port 'port' in '127.0.0.1:port'")) << m;
}

// What another rank left in the store is checked: a malformed entry is a
// parse error naming the rank, never a crash.
TEST(Addresses, MalformedAddressInTheStoreNamesTheRank) {
    ScopedEnv addr("COHORT_SOCKET_ADDR", nullptr);
    for (const char* entry : {"not-an-ip\n5000\nh", "127.0.0.1\nport\nh", "127.0.0.1\n\nh"}) {
        CommTempDir fresh;
        const std::string store_url = "file://" + fresh.path().string();
        // Rank 1's first communicator of job "cohort", generation 0.
        open_store(store_url)->set("cohort/cohort/0/1/rank/1", entry);
        CommOptions o;
        o.rank = 0;
        o.size = 2;
        o.store_url = store_url;
        o.address = "127.0.0.1";
        o.connect_timeout = 2s;
        const std::string m = error_message(Errc::parse, [&] { Communicator c(o); });
        EXPECT_TRUE(contains(m, "rank 0: the store holds a malformed address for rank 1")) << m;
    }
}

// A rank that advertises a loopback address cannot be reached from another
// machine: a rank listening on a routable address refuses to go on.
TEST(Addresses, LoopbackAdvertisedToARoutableRankIsRefused) {
    ScopedEnv addr("COHORT_SOCKET_ADDR", nullptr);
    std::string routable;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) == 0) {
        for (ifaddrs* i = list; i != nullptr && routable.empty(); i = i->ifa_next) {
            if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
            char text[INET_ADDRSTRLEN] = {};
            inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
            if (std::string(text).rfind("127.", 0) != 0) routable = text;
        }
        freeifaddrs(list);
    }
    if (routable.empty()) GTEST_SKIP() << "this machine has no IPv4 address but loopback";
    CommTempDir dir;
    const std::string store_url = "file://" + dir.path().string();
    open_store(store_url)->set("cohort/cohort/0/1/rank/1", "127.0.0.1\n5000\nother-host");
    CommOptions o;
    o.rank = 0;
    o.size = 2;
    o.store_url = store_url;
    o.address = routable;
    o.connect_timeout = 2s;
    const std::string m = error_message(Errc::invalid_argument, [&] { Communicator c(o); });
    EXPECT_TRUE(contains(m, "rank 1 advertises a loopback address (127.0.0.1) but this rank listens on " + routable))
        << m;
    EXPECT_TRUE(contains(m, "COHORT_SOCKET_IFNAME")) << m;
}

}  // namespace
}  // namespace cohort::test
