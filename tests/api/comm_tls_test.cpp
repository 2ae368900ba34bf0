// Collectives over TLS: the same results as over TCP, and the refusals of
// a peer that cannot prove it belongs (a certificate of another CA, no TLS
// at all) and of bad certificate files. The certificates are made here,
// with the openssl command, in a temp folder; none is checked in.
#include "comm_support.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <csignal>
#include <sys/wait.h>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace cohort::test {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Runs a shell command (openssl), failing the test with its output when it fails.
void run(const std::string& command) {
    const std::string full = command + " 2>&1";
    FILE* pipe = ::popen(full.c_str(), "r");
    ASSERT_NE(pipe, nullptr) << command;
    std::string output;
    char buffer[512];
    while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
    const int status = ::pclose(pipe);
    ASSERT_EQ(status, 0) << command << "\n" << output;
}

struct Identity {
    std::string ca, cert, key;
};

// Two CAs, and certificates signed by each, in one temp folder for the
// test suite (keygen is the slow part: EC P-256 keeps it short).
class Pki {
public:
    Pki() {
        dir_ = std::make_unique<CommTempDir>();
        std::filesystem::create_directories(dir_->path());
        for (const char* ca : {"ca-a", "ca-b"}) make_ca(ca);
        for (const char* who : {"rank-a", "other-a"}) make_cert(who, "ca-a");
        make_cert("rank-b", "ca-b");
    }
    std::string path(const std::string& name) const { return (dir_->path() / name).string(); }
    // A certificate of `ca` (a or b) checked against `trust` (a or b).
    Identity identity(const std::string& who, const std::string& trust) const {
        return {path("ca-" + trust + ".pem"), path(who + ".pem"), path(who + ".key")};
    }
    static const Pki& get() {
        static const Pki pki;
        return pki;
    }

private:
    void make_ca(const std::string& name) {
        run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=" + name +
            " -keyout " + path(name + ".key") + " -out " + path(name + ".pem"));
    }
    void make_cert(const std::string& name, const std::string& ca) {
        run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=" + name + " -keyout " +
            path(name + ".key") + " -out " + path(name + ".csr"));
        run("openssl x509 -req -days 2 -in " + path(name + ".csr") + " -CA " + path(ca + ".pem") + " -CAkey " +
            path(ca + ".key") + " -CAcreateserial -out " + path(name + ".pem"));
    }
    std::unique_ptr<CommTempDir> dir_;
};

void use(CommOptions& o, const Identity& id) {
    o.tls_ca = id.ca;
    o.tls_cert = id.cert;
    o.tls_key = id.key;
}

// Every byte over the links: no shared memory, no direct copies.
World links_only() {
    World w;
    w.shm_size = 0;
    w.direct_copy = false;
    return w;
}

// The results of a few all-reduces (several sizes, algorithms, types) on
// each rank, as fingerprints.
std::vector<std::vector<uint64_t>> reduce_everything(int size, World world) {
    std::vector<std::vector<uint64_t>> results(static_cast<std::size_t>(size));
    std::vector<std::string> tls(static_cast<std::size_t>(size));
    const auto outcomes = spawn_comms(size, world, [&](Communicator& c) {
        auto& mine = results[static_cast<std::size_t>(c.rank())];
        tls[static_cast<std::size_t>(c.rank())] = c.describe();
        for (Algorithm a : {Algorithm::ring, Algorithm::doubling, Algorithm::star}) {
            for (std::size_t count : {std::size_t(1), std::size_t(1000), std::size_t(300000)}) {
                std::vector<float> f(count);
                std::vector<int64_t> i(count);
                for (std::size_t k = 0; k < count; ++k) {
                    f[k] = static_cast<float>((k * 7 + static_cast<std::size_t>(c.rank()) * 13) % 101) * 0.25f;
                    i[k] = static_cast<int64_t>(k) * (c.rank() + 1) - 5;
                }
                c.allreduce(std::span<float>(f), ReduceOp::sum, {a, {}});
                c.allreduce(std::span<int64_t>(i), ReduceOp::max, {a, {}});
                mine.push_back(fingerprint(f.data(), f.size() * sizeof(float)));
                mine.push_back(fingerprint(i.data(), i.size() * sizeof(int64_t)));
            }
        }
        std::vector<unsigned char> b(1 << 20);
        if (c.rank() == 1)
            for (std::size_t k = 0; k < b.size(); ++k) b[k] = static_cast<unsigned char>(k * 31 + 7);
        c.broadcast(b.data(), b.size(), 1);
        mine.push_back(fingerprint(b.data(), b.size()));
        c.barrier();
    });
    expect_ok(outcomes);
    for (int r = 0; r < size; ++r) {
        const bool want_tls = world.configure != nullptr;
        EXPECT_EQ(contains(tls[r], "\"tls\":\"TLSv1."), want_tls) << "rank " << r << ": " << tls[r];
    }
    return results;
}

TEST(CommTls, AllreduceOverTlsEqualsTcp) {
    const Pki& pki = Pki::get();
    constexpr int n = 4;
    const auto plain = reduce_everything(n, links_only());
    World secure = links_only();
    secure.configure = [&](int, CommOptions& o) { use(o, pki.identity("rank-a", "a")); };
    const auto tls = reduce_everything(n, secure);
    ASSERT_EQ(plain.size(), tls.size());
    for (int r = 0; r < n; ++r) {
        ASSERT_FALSE(plain[r].empty());
        EXPECT_EQ(plain[r], tls[r]) << "rank " << r;
        EXPECT_EQ(plain[r], plain[0]) << "rank " << r << " disagrees with rank 0";
    }
}

TEST(CommTls, DirectCopiesOffSharedMemoryOn) {
    const Pki& pki = Pki::get();
    World w;  // defaults: direct copies and shared memory wanted
    w.configure = [&](int, CommOptions& o) { use(o, pki.identity("rank-a", "a")); };
    std::vector<std::string> described(3);
    const auto outcomes = spawn_comms(3, w, [&](Communicator& c) {
        described[c.rank()] = c.describe();
        std::vector<double> v(5000, c.rank() + 1.0);
        c.allreduce(std::span<double>(v));
        for (double x : v) ASSERT_EQ(x, 6.0);
    });
    expect_ok(outcomes);
    for (const auto& d : described) {
        EXPECT_FALSE(contains(d, "\"direct\"")) << d;
        EXPECT_TRUE(contains(d, "\"tls\":\"TLSv1.")) << d;
    }
    // Without shared memory the reason for no direct copies shows.
    w.shm_size = 0;
    const auto again = spawn_comms(2, w, [&](Communicator& c) {
        described[c.rank()] = c.describe();
        c.barrier();
    });
    expect_ok(again);
    EXPECT_TRUE(contains(described[0], "direct copies are off under TLS")) << described[0];
}

// A rank whose certificate another CA signed is refused by the others, and
// the refused rank learns why at once.
TEST(CommTls, CertificateOfAnotherCaIsRefused) {
    const Pki& pki = Pki::get();
    World w = links_only();
    w.connect_timeout = 4s;
    // Rank 2 trusts CA a (so it accepts the others) but shows a b certificate.
    w.configure = [&](int rank, CommOptions& o) {
        use(o, rank == 2 ? pki.identity("rank-b", "a") : pki.identity("rank-a", "a"));
    };
    const auto start = Clock::now();
    const auto outcomes = spawn_comms(3, w, [](Communicator& c) { c.barrier(); });
    EXPECT_LT(since(start), 20s);
    ASSERT_FALSE(outcomes[2].ok);
    EXPECT_EQ(outcomes[2].code, Errc::permission_denied) << describe(outcomes[2]);
    EXPECT_TRUE(contains(outcomes[2].message, "TLS")) << outcomes[2].message;
    EXPECT_TRUE(contains(outcomes[2].message, "127.0.0.1:")) << outcomes[2].message;
    EXPECT_TRUE(contains(outcomes[2].message, "refused this rank's certificate")) << outcomes[2].message;
    int verdicts = 0;
    for (int r : {0, 1}) {
        ASSERT_FALSE(outcomes[r].ok) << "rank " << r;
        EXPECT_EQ(outcomes[r].code, Errc::timeout) << describe(outcomes[r]);
        // Each names the refused connection's address.
        EXPECT_TRUE(contains(outcomes[r].message, "TLS handshake failed")) << outcomes[r].message;
        EXPECT_TRUE(contains(outcomes[r].message, "from 127.0.0.1:")) << outcomes[r].message;
        // The verdict: rank 2 gives up on its first refusal and closes its
        // other connection, which the other rank may see as a reset before
        // it read the certificate; so at least one of them says why.
        if (contains(outcomes[r].message, "certificate verify failed") &&
            contains(outcomes[r].message, "not signed by this rank's CA"))
            ++verdicts;
    }
    EXPECT_GE(verdicts, 1) << outcomes[0].message << "\n" << outcomes[1].message;
}

// With two ranks the verdict is certain: the accepting rank reads the
// certificate before the other can hear why it was refused.
TEST(CommTls, AcceptorSaysWhyItRefused) {
    const Pki& pki = Pki::get();
    World w = links_only();
    w.connect_timeout = 3s;
    w.configure = [&](int rank, CommOptions& o) {
        use(o, rank == 1 ? pki.identity("rank-b", "a") : pki.identity("rank-a", "a"));
    };
    const auto outcomes = spawn_comms(2, w, [](Communicator& c) { c.barrier(); });
    ASSERT_FALSE(outcomes[0].ok);
    EXPECT_EQ(outcomes[0].code, Errc::timeout) << describe(outcomes[0]);
    EXPECT_TRUE(contains(outcomes[0].message, "refused: from 127.0.0.1:")) << outcomes[0].message;
    EXPECT_TRUE(contains(outcomes[0].message, "TLS handshake failed: certificate verify failed"))
        << outcomes[0].message;
    EXPECT_TRUE(contains(outcomes[0].message, "not signed by this rank's CA")) << outcomes[0].message;
    ASSERT_FALSE(outcomes[1].ok);
    EXPECT_EQ(outcomes[1].code, Errc::permission_denied) << describe(outcomes[1]);
}

// The other way round: rank 1 trusts only CA b, so it refuses rank 0's
// certificate when it dials.
TEST(CommTls, PeerCertificateNotTrustedByDialler) {
    const Pki& pki = Pki::get();
    World w = links_only();
    w.connect_timeout = 4s;
    w.configure = [&](int rank, CommOptions& o) {
        use(o, rank == 1 ? pki.identity("rank-b", "b") : pki.identity("rank-a", "a"));
    };
    const auto outcomes = spawn_comms(2, w, [](Communicator& c) { c.barrier(); });
    ASSERT_FALSE(outcomes[1].ok);
    EXPECT_EQ(outcomes[1].code, Errc::permission_denied) << describe(outcomes[1]);
    EXPECT_TRUE(contains(outcomes[1].message, "rank 0 at 127.0.0.1:")) << outcomes[1].message;
    EXPECT_TRUE(contains(outcomes[1].message, "certificate verify failed")) << outcomes[1].message;
    EXPECT_TRUE(contains(outcomes[1].message, "not signed by this rank's CA")) << outcomes[1].message;
    ASSERT_FALSE(outcomes[0].ok);
    EXPECT_TRUE(contains(outcomes[0].message, "TLS handshake failed")) << outcomes[0].message;
}

// A plain rank meeting a TLS world, and a TLS rank meeting a plain world:
// both refused at once with the reason, not left to time out.
TEST(CommTls, PlainAndTlsRanksRefuseEachOther) {
    const Pki& pki = Pki::get();
    for (const bool plain_dialler : {true, false}) {
        SCOPED_TRACE(plain_dialler ? "plain rank 1 dials TLS rank 0" : "TLS rank 1 dials plain rank 0");
        World w = links_only();
        w.connect_timeout = 4s;
        w.configure = [&](int rank, CommOptions& o) {
            if ((rank == 0) == plain_dialler) use(o, pki.identity("rank-a", "a"));
        };
        const auto outcomes = spawn_comms(2, w, [](Communicator& c) { c.barrier(); });
        ASSERT_FALSE(outcomes[1].ok);
        // The dialler is refused (a final answer), not timed out.
        EXPECT_EQ(outcomes[1].code, Errc::permission_denied) << describe(outcomes[1]);
        EXPECT_TRUE(contains(outcomes[1].message, "rank 0 at 127.0.0.1:")) << outcomes[1].message;
        if (plain_dialler)
            EXPECT_TRUE(
                contains(outcomes[1].message, "refused the connection: this rank uses TLS and the peer does not"))
                << outcomes[1].message;
        else
            EXPECT_TRUE(contains(outcomes[1].message, "the peer does not speak TLS")) << outcomes[1].message;
        ASSERT_FALSE(outcomes[0].ok);
        EXPECT_TRUE(contains(outcomes[0].message, "from 127.0.0.1:")) << outcomes[0].message;
        EXPECT_TRUE(contains(outcomes[0].message, plain_dialler ? "this rank uses TLS and the peer does not"
                                                                : "the peer speaks TLS and this rank does not"))
            << outcomes[0].message;
    }
}

// Failures travel over TLS as over TCP: an abort reaches the peers with
// its reason.
TEST(CommTls, AbortReachesThePeers) {
    const Pki& pki = Pki::get();
    World w = links_only();
    w.configure = [&](int, CommOptions& o) { use(o, pki.identity("rank-a", "a")); };
    std::vector<std::string> messages(2);
    const auto outcomes = spawn_comms(2, w, [&](Communicator& comm) {
        std::vector<float> v(1 << 18, 1.0f);
        comm.allreduce(std::span<float>(v));
        try {
            if (comm.rank() == 0) comm.abort("the world is over");
            comm.barrier({Algorithm::automatic, 20s});  // where rank 0's abort takes effect and rank 1 hears of it
        } catch (const Error& e) {
            messages[comm.rank()] = e.what();
        }
    });
    expect_ok(outcomes);
    EXPECT_TRUE(contains(messages[0], "aborted: the world is over")) << messages[0];
    EXPECT_TRUE(contains(messages[1], "rank 0")) << messages[1];
    EXPECT_TRUE(contains(messages[1], "the world is over")) << messages[1];
}

// A rank process that ends without a goodbye is dead to its peer, one that
// closed is not: over TLS an end of stream (no close_notify is sent) reads
// as it does over TCP.
TEST(CommTls, DeadRanksAsOverTcp) {
    const Pki& pki = Pki::get();
    for (const bool closes : {false, true}) {
        SCOPED_TRACE(closes ? "rank 1 closes" : "rank 1 exits without a goodbye");
        CommTempDir dir;
        auto options = [&](int rank) {
            CommOptions o;
            o.rank = rank;
            o.size = 2;
            o.store_url = "file://" + dir.path().string();
            o.address = "127.0.0.1";
            o.timeout = 10s;
            o.connect_timeout = 20s;
            o.shm_size = 0;
            use(o, pki.identity("rank-a", "a"));
            return o;
        };
        const pid_t pid = ::fork();
        if (pid == 0) {
            int status = 0;
            try {
                Communicator comm(options(1));
                comm.barrier();
                if (closes) comm.close();
                ::_exit(0);  // skips the destructor: no goodbye unless closed
            } catch (...) {
                status = 3;
            }
            ::_exit(status);
        }
        ASSERT_GT(pid, 0);
        Communicator comm(options(0));
        comm.barrier();
        int status = 0;
        for (int i = 0; i < 300 && ::waitpid(pid, &status, WNOHANG) != pid; ++i) std::this_thread::sleep_for(100ms);
        ::kill(pid, SIGKILL);  // harmless once it ended
        ::waitpid(pid, &status, WNOHANG);
        std::vector<float> data(1000, 1.0f);
        std::string message;
        try {
            comm.allreduce(std::span<float>(data));
        } catch (const Error& e) {
            message = e.what();
        }
        EXPECT_TRUE(contains(message, "rank 1")) << message;
        EXPECT_EQ(comm.dead_ranks(), closes ? std::vector<int>{} : std::vector<int>{1}) << message;
    }
}

Errc construct(const CommOptions& o, std::string& message) {
    try {
        Communicator c(o);
    } catch (const Error& e) {
        message = e.what();
        return e.code();
    }
    return Errc::ok;
}

TEST(CommTls, BadFilesAreClearErrors) {
    const Pki& pki = Pki::get();
    CommOptions o;
    o.rank = 0;
    o.size = 1;
    use(o, pki.identity("rank-a", "a"));
    std::string message;
    ASSERT_EQ(construct(o, message), Errc::ok) << message;  // a world of one checks the files too

    CommOptions missing = o;
    missing.tls_key = pki.path("no-such.key");
    EXPECT_EQ(construct(missing, message), Errc::invalid_argument);
    EXPECT_TRUE(contains(message, "cannot read the private key")) << message;
    EXPECT_TRUE(contains(message, "no-such.key")) << message;
    EXPECT_TRUE(contains(message, "No such file or directory")) << message;
    EXPECT_TRUE(contains(message, "COHORT_TLS_KEY")) << message;

    // A directory opens but cannot be read as a key.
    CommOptions unreadable = o;
    unreadable.tls_key = pki.path("");
    EXPECT_EQ(construct(unreadable, message), Errc::invalid_argument);
    EXPECT_TRUE(contains(message, "private key")) << message;

    CommOptions garbage = o;
    garbage.tls_key = pki.path("garbage.key");
    std::ofstream(garbage.tls_key) << "not a key\n";
    EXPECT_EQ(construct(garbage, message), Errc::invalid_argument);
    EXPECT_TRUE(contains(message, "is not an unencrypted PEM private key")) << message;
    EXPECT_TRUE(contains(message, "garbage.key")) << message;

    CommOptions mismatch = o;
    mismatch.tls_key = pki.identity("other-a", "a").key;
    EXPECT_EQ(construct(mismatch, message), Errc::invalid_argument);
    EXPECT_TRUE(contains(message, "does not belong to the certificate")) << message;

    CommOptions no_ca = o;
    no_ca.tls_ca = pki.path("ca-c.pem");
    EXPECT_EQ(construct(no_ca, message), Errc::invalid_argument);
    EXPECT_TRUE(contains(message, "cannot read the CA file")) << message;

    CommOptions bad_cert = o;
    bad_cert.tls_cert = garbage.tls_key;
    EXPECT_EQ(construct(bad_cert, message), Errc::invalid_argument);
    EXPECT_TRUE(contains(message, "the certificate")) << message;

    CommOptions partial = o;
    partial.tls_cert.clear();
    EXPECT_EQ(construct(partial, message), Errc::invalid_argument);
    EXPECT_TRUE(contains(message, "tls_cert is not set")) << message;
}

TEST(CommTls, EnvironmentSetsTheFiles) {
    ::setenv("COHORT_TLS_CA", "/ca.pem", 1);
    ::setenv("COHORT_TLS_CERT", "/cert.pem", 1);
    ::setenv("COHORT_TLS_KEY", "/key.pem", 1);
    CommOptions given;
    given.tls_key = "/mine.key";  // a field set wins over its variable
    const CommOptions o = with_env_defaults(given);
    ::unsetenv("COHORT_TLS_CA");
    ::unsetenv("COHORT_TLS_CERT");
    ::unsetenv("COHORT_TLS_KEY");
    EXPECT_EQ(o.tls_ca, "/ca.pem");
    EXPECT_EQ(o.tls_cert, "/cert.pem");
    EXPECT_EQ(o.tls_key, "/mine.key");
}

}  // namespace
}  // namespace cohort::test
