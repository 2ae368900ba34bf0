// Store: the same semantics from the tcp:// store (an in-process server and
// a hosted one) and the file:// store; then URLs, reconnection, a server
// that goes away and a client that sends garbage.
#include "support.hpp"

#include <cohort/store.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <optional>
#include <set>
#include <thread>

namespace cohort::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

StoreOptions with_timeout(std::chrono::milliseconds timeout, bool host = false) {
    StoreOptions options;
    options.timeout = timeout;
    options.host = host;
    return options;
}

// A fresh folder under the system's temp directory, removed afterwards.
class TempDir {
public:
    TempDir() {
        static std::atomic<int> counter{0};
        path_ = std::filesystem::temp_directory_path() /
                ("cohort-store-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
        std::filesystem::remove_all(path_);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

enum class Kind { tcp, tcp_hosted, file };

class StoreSemantics : public ::testing::TestWithParam<Kind> {
protected:
    void SetUp() override {
        switch (GetParam()) {
            case Kind::tcp:
                server_.emplace("127.0.0.1", 0);
                store_ = open_store(server_->url(), with_timeout(2s));
                break;
            case Kind::tcp_hosted:
                store_ = open_store("tcp://127.0.0.1:0", with_timeout(2s, true));
                break;
            case Kind::file:
                store_ = open_store("file://" + dir_.path().string(), with_timeout(2s));
                break;
        }
    }
    // Another client of the same store, as another rank would have.
    std::shared_ptr<Store> another() { return open_store(store_->address(), with_timeout(2s)); }

    TempDir dir_;
    std::optional<StoreServer> server_;
    std::shared_ptr<Store> store_;
};

TEST_P(StoreSemantics, SetGetTryGetRemove) {
    Store& s = *store_;
    EXPECT_EQ(s.try_get("a"), std::nullopt);
    s.set("a", "1");
    EXPECT_EQ(s.get("a", 1s), "1");
    EXPECT_EQ(s.get("a", std::chrono::milliseconds::max()), "1");  // "forever" must not overflow a deadline
    EXPECT_EQ(s.try_get("a"), "1");
    s.set("a", "");
    EXPECT_EQ(s.try_get("a"), "");
    const std::string binary("\0\xff\n%/..", 7);
    s.set("bin", binary);
    EXPECT_EQ(another()->get("bin", 1s), binary);
    EXPECT_TRUE(s.remove("a"));
    EXPECT_FALSE(s.remove("a"));
    EXPECT_EQ(s.try_get("a"), std::nullopt);
}

TEST_P(StoreSemantics, KeysThatLookLikePathsStayKeys) {
    const std::vector<std::string> keys = {"../escape", "a/b/c", ".", "..", ".lock", "x y%20", std::string(1024, 'k')};
    for (const auto& key : keys) {
        store_->set(key, key + "!");
        EXPECT_EQ(store_->try_get(key), key + "!") << key;
    }
    EXPECT_EQ(store_->try_get(std::string(1023, 'k')), std::nullopt);
    EXPECT_FALSE(std::filesystem::exists(dir_.path().parent_path() / "escape"));
}

TEST_P(StoreSemantics, KeyAndValueBounds) {
    auto message = error_message(Errc::invalid_argument, [&] { store_->set("", "x"); });
    EXPECT_THAT(message, HasSubstr("empty key"));
    message = error_message(Errc::invalid_argument, [&] { store_->set(std::string(1025, 'k'), "x"); });
    EXPECT_THAT(message, HasSubstr("1025 bytes; keys are at most 1024"));
    message = error_message(Errc::invalid_argument, [&] { store_->set("big", std::string((16u << 20) + 1, 'v')); });
    EXPECT_THAT(message, HasSubstr("'big'"));
    EXPECT_THAT(message, HasSubstr("at most 16 MiB"));
    const std::string large(1u << 20, 'v');
    store_->set("large", large);
    EXPECT_EQ(another()->get("large", 1s), large);
}

TEST_P(StoreSemantics, Add) {
    EXPECT_EQ(store_->add("n", 5), 5);
    EXPECT_EQ(store_->add("n", -7), -2);
    EXPECT_EQ(store_->try_get("n"), "-2");
    store_->set("text", "seven");
    const auto message = error_message(Errc::invalid_argument, [&] { store_->add("text", 1); });
    EXPECT_THAT(message, HasSubstr("'text'"));
    EXPECT_THAT(message, HasSubstr("not an integer"));
    store_->set("max", std::to_string(INT64_MAX));
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { store_->add("max", 1); }), HasSubstr("overflows"));
}

TEST_P(StoreSemantics, CompareAndSet) {
    EXPECT_EQ(store_->compare_and_set("leader", std::nullopt, "rank3"), "rank3");
    EXPECT_EQ(store_->compare_and_set("leader", std::nullopt, "rank5"), "rank3");
    EXPECT_EQ(store_->compare_and_set("leader", "rank5", "rank7"), "rank3");
    EXPECT_EQ(store_->compare_and_set("leader", "rank3", "rank7"), "rank7");
    // Expecting a value of an absent key: no change, and nothing to return.
    EXPECT_EQ(store_->compare_and_set("absent", "x", "y"), "");
    EXPECT_EQ(store_->try_get("absent"), std::nullopt);
}

TEST_P(StoreSemantics, GetTimeoutNamesKeyAndStore) {
    const auto start = std::chrono::steady_clock::now();
    const auto message = error_message(Errc::timeout, [&] { store_->get("never", 30ms); });
    EXPECT_GE(std::chrono::steady_clock::now() - start, 30ms);
    EXPECT_THAT(message, HasSubstr("key 'never' not set after 30 ms"));
    EXPECT_THAT(message, HasSubstr(store_->address()));
}

TEST_P(StoreSemantics, WaitListsTheMissingKeys) {
    store_->set("a", "1");
    store_->set("b", "2");
    const std::vector<std::string> present = {"a", "b"};
    store_->wait(present, 0ms);
    store_->wait({}, 0ms);
    const std::vector<std::string> keys = {"a", "c", "b", "d"};
    const auto message = error_message(Errc::timeout, [&] { store_->wait(keys, 30ms); });
    EXPECT_THAT(message, HasSubstr("2 of 4 keys not set after 30 ms: 'c', 'd'"));
    EXPECT_THAT(message, Not(HasSubstr("'a'")));
}

TEST_P(StoreSemantics, WaitersAreReleasedBySetsFromOtherThreads) {
    // The same store object on both sides: a parked get must not hold up a set.
    std::thread setter([&] {
        std::this_thread::sleep_for(20ms);
        store_->set("late", "here");
        std::this_thread::sleep_for(10ms);
        store_->set("x", "1");
        another()->set("y", "2");
    });
    EXPECT_EQ(store_->get("late", 5s), "here");
    const std::vector<std::string> keys = {"x", "y"};
    store_->wait(keys, 5s);
    setter.join();
}

TEST_P(StoreSemantics, OneSetReleasesEveryWaiter) {
    std::vector<std::thread> waiters;
    std::atomic<int> released{0};
    for (int i = 0; i < 4; ++i) {
        waiters.emplace_back([&, i] {
            auto client = i % 2 == 0 ? store_ : another();
            if (client->get("go", 5s) == "now") ++released;
        });
    }
    std::this_thread::sleep_for(20ms);
    store_->set("go", "now");
    for (auto& t : waiters) t.join();
    EXPECT_EQ(released, 4);
}

TEST_P(StoreSemantics, ConcurrentAddsSum) {
    constexpr int kThreads = 8;
    constexpr int kAdds = 25;
    auto second = another();  // half the threads use another client
    std::vector<std::vector<int64_t>> seen(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            Store& s = t % 2 == 0 ? *store_ : *second;
            for (int i = 0; i < kAdds; ++i) seen[t].push_back(s.add("counter", 1));
        });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(store_->add("counter", 0), kThreads * kAdds);
    std::set<int64_t> distinct;
    for (const auto& v : seen) distinct.insert(v.begin(), v.end());
    EXPECT_EQ(distinct.size(), static_cast<std::size_t>(kThreads * kAdds));  // every add saw its own total
}

TEST_P(StoreSemantics, ScopedStoresAreIsolated) {
    auto job1 = scoped_store(store_, "job/1/");
    auto job2 = scoped_store(store_, "job/2/");
    job1->set("k", "one");
    job2->set("k", "two");
    EXPECT_EQ(job1->get("k", 1s), "one");
    EXPECT_EQ(job2->try_get("k"), "two");
    EXPECT_EQ(store_->try_get("job/1/k"), "one");
    EXPECT_EQ(store_->try_get("k"), std::nullopt);
    EXPECT_EQ(job1->add("n", 2), 2);
    EXPECT_EQ(job2->try_get("n"), std::nullopt);
    auto gen = scoped_store(job1, "gen/3/");
    gen->set("rank0", "addr");
    EXPECT_EQ(store_->try_get("job/1/gen/3/rank0"), "addr");
    const std::vector<std::string> keys = {"rank0", "rank1"};
    EXPECT_THAT(error_message(Errc::timeout, [&] { gen->wait(keys, 10ms); }), HasSubstr("'job/1/gen/3/rank1'"));
    EXPECT_TRUE(job2->remove("k"));
    EXPECT_EQ(job1->try_get("k"), "one");
    EXPECT_EQ(job1->address(), store_->address());
    EXPECT_EQ(error_message(Errc::invalid_argument, [] { scoped_store(nullptr, "p/"); }),
              "scoped_store('p/'): the base store is null");
}

std::string kind_name(const ::testing::TestParamInfo<Kind>& param) {
    switch (param.param) {
        case Kind::tcp:
            return "Tcp";
        case Kind::tcp_hosted:
            return "TcpHosted";
        case Kind::file:
            return "File";
    }
    return "Unknown";
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreSemantics, ::testing::Values(Kind::tcp, Kind::tcp_hosted, Kind::file),
                         kind_name);

// A port nothing listens on right now.
uint16_t free_port() {
    return StoreServer("127.0.0.1", 0).port();
}

TEST(StoreUrl, BadUrlsSayWhatIsWrong) {
    const std::pair<std::string, std::string> cases[] = {
        {"", "has no scheme"},
        {"localhost:29500", "has no scheme; expected tcp://HOST:PORT, file:///DIR or coordinator://HOST:PORT/JOB/GENERATION"},
        {"http://h:1", "unknown scheme 'http'"},
        {"tcp://h", "no port"},
        {"tcp://h:", "no port"},
        {"tcp://:29500", "no host"},
        {"tcp://h:port", "port 'port' is not a number"},
        {"tcp://h:-1", "port '-1' is not a number"},
        {"tcp://h:70000", "port 70000 is past 65535"},
        {"tcp://h:1/x", "unexpected '/x' after the port"},
        {"tcp://::1:29500", "write an IPv6 address in brackets"},
        {"tcp://[::1:29500", "no ']' closes"},
        {"tcp://[nope]:1", "'nope' is not an IPv6 address"},
        {"tcp://[::1]", "no port"},
        {"tcp://h:0", "port 0 can only be hosted"},
        {"file://", "no folder"},
        {"file:///", "names no folder"},
        {"file://server/dir", "file URLs take no host ('server')"},
        {"file:///tmp/%zz", "'%' is not followed by two hex digits"},
    };
    for (const auto& [url, what] : cases) {
        // [&url = url]: clang 14 cannot capture a structured binding implicitly.
        const auto message =
            error_message(Errc::invalid_argument, [&url = url] { open_store(url, with_timeout(100ms)); });
        EXPECT_THAT(message, HasSubstr("'" + url + "'")) << url;
        EXPECT_THAT(message, HasSubstr(what)) << url;
    }
    EXPECT_THAT(error_message(Errc::invalid_argument, [] { open_store("file:///tmp/x", with_timeout(0ms)); }),
                HasSubstr("timeout must be positive"));
}

TEST(StoreTcp, UnreachableServerIsUnavailableWithinTheTimeout) {
    const uint16_t port = free_port();
    const std::string url = "tcp://127.0.0.1:" + std::to_string(port);
    const auto start = std::chrono::steady_clock::now();
    const auto message = error_message(Errc::unavailable, [&] { open_store(url, with_timeout(200ms)); });
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
    EXPECT_EQ(message, "cannot reach store " + url + " after 200 ms: connection refused");
}

TEST(StoreTcp, ClientRetriesUntilTheServerStarts) {
    const uint16_t port = free_port();
    std::optional<StoreServer> server;
    std::thread rank0([&] {
        std::this_thread::sleep_for(100ms);
        server.emplace("127.0.0.1", port);
    });
    auto store = open_store("tcp://127.0.0.1:" + std::to_string(port), with_timeout(5s));
    rank0.join();
    store->set("k", "v");
    EXPECT_EQ(store->get("k", 1s), "v");
}

TEST(StoreTcp, ServerGoneIsUnavailableWithinTheTimeout) {
    auto server = std::make_unique<StoreServer>("127.0.0.1", 0);
    auto store = open_store(server->url(), with_timeout(300ms));
    store->set("k", "v");
    server.reset();
    const auto start = std::chrono::steady_clock::now();
    const auto message = error_message(Errc::unavailable, [&] { store->get("k", 1s); });
    EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
    EXPECT_THAT(message, HasSubstr(store->address()));
    EXPECT_THAT(error_message(Errc::unavailable, [&] { store->add("n", 1); }), HasSubstr(store->address()));
}

// 127.0.0.1:port as the socket calls take it.
sockaddr_in loopback(uint16_t port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return address;
}

// A raw client socket connected to 127.0.0.1:port, or -1.
int raw_client(uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const sockaddr_in address = loopback(port);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

// Rank 0 hosting a store that a launcher (or another communicator in the
// process) already serves shares that store.
TEST(StoreTcp, HostingAPortAStoreAlreadyServesSharesIt) {
    StoreServer server("127.0.0.1", 0);
    const std::string url = "tcp://127.0.0.1:" + std::to_string(server.port());
    auto hosted = open_store(url, with_timeout(1s, true));
    hosted->set("k", "v");
    EXPECT_EQ(open_store(server.url(), with_timeout(1s))->get("k", 1s), "v");
}

TEST(StoreTcp, HostingAPortSomethingElseHoldsIsUnavailable) {
    // A listener that accepts (through its backlog) and never answers.
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = loopback(0);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    ASSERT_EQ(::listen(fd, 4), 0);
    socklen_t length = sizeof address;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
    const std::string url = "tcp://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
    const auto message = error_message(Errc::unavailable, [&] { open_store(url, with_timeout(100ms, true)); });
    EXPECT_THAT(message, HasSubstr("cannot host store " + url + ": address already in use"));
    EXPECT_THAT(message, HasSubstr("is not a store"));
    ::close(fd);
}

TEST(StoreTcp, ServerUrlAndHostedAddress) {
    StoreServer server("127.0.0.1", 0);
    EXPECT_NE(server.port(), 0);
    EXPECT_EQ(server.url(), "tcp://127.0.0.1:" + std::to_string(server.port()));
    StoreServer moved = std::move(server);
    auto hosted = open_store("tcp://0.0.0.0:0", with_timeout(1s, true));
    EXPECT_THAT(hosted->address(), HasSubstr("tcp://0.0.0.0:"));
    hosted->set("k", "v");
    const std::string port = hosted->address().substr(hosted->address().rfind(':') + 1);
    EXPECT_NE(port, "0");
    EXPECT_EQ(open_store("tcp://127.0.0.1:" + port, with_timeout(1s))->get("k", 1s), "v");
}

TEST(StoreTcp, Ipv6Loopback) {
    std::optional<StoreServer> server;
    try {
        server.emplace("::1", 0);
    } catch (const Error& e) {
        GTEST_SKIP() << "no IPv6 loopback here: " << e.what();
    }
    EXPECT_EQ(server->url(), "tcp://[::1]:" + std::to_string(server->port()));
    auto store = open_store(server->url(), with_timeout(1s));
    EXPECT_EQ(store->address(), server->url());
    store->set("k", "v6");
    EXPECT_EQ(store->get("k", 1s), "v6");
}

// A raw TCP client that sends `bytes` and reports whether the server then
// closed the connection (rather than leaving it open or answering).
bool server_hangs_up_after(uint16_t port, const std::string& bytes) {
    const int fd = raw_client(port);
    timeval limit{.tv_sec = 3, .tv_usec = 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    bool hung_up = false;
    if (fd >= 0 && ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size())) {
        char reply[64];
        hung_up = ::recv(fd, reply, sizeof reply, 0) == 0;
    }
    ::close(fd);
    return hung_up;
}

std::string le32(uint32_t v) {
    std::string out(4, '\0');
    for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
    return out;
}

TEST(StoreTcp, GarbageFromOneClientClosesOnlyThatConnection) {
    StoreServer server("127.0.0.1", 0);
    auto store = open_store(server.url(), with_timeout(2s));
    store->set("k", "v");
    // A client that announces a frame and never sends it stays connected and
    // harms no one.
    const int silent = raw_client(server.port());
    ASSERT_GE(silent, 0);
    ASSERT_EQ(::send(silent, le32(1000).data(), 4, MSG_NOSIGNAL), 4);

    ::testing::internal::CaptureStderr();
    EXPECT_TRUE(server_hangs_up_after(server.port(), le32(0xffffffff)));                   // oversized frame
    EXPECT_TRUE(server_hangs_up_after(server.port(), le32(0)));                            // empty frame
    EXPECT_TRUE(server_hangs_up_after(server.port(), le32(1) + "\x7f"));                   // unknown command
    EXPECT_TRUE(server_hangs_up_after(server.port(), le32(5) + "\x03" + le32(1u << 30)));  // key longer than the frame
    EXPECT_TRUE(server_hangs_up_after(server.port(), le32(5) + "\x03" + le32(0)));         // empty key
    EXPECT_TRUE(server_hangs_up_after(server.port(), le32(7) + "\x03" + le32(1) + "kX"));  // trailing bytes
    EXPECT_TRUE(server_hangs_up_after(server.port(), le32(9) + "\x06" + le32(1000000) + "xyzw"));  // key count
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_THAT(log, HasSubstr("exceeds the"));
    EXPECT_THAT(log, HasSubstr("unknown command 0x7f"));
    EXPECT_THAT(log, HasSubstr("key of 0 bytes"));

    // A client that leaves while its get is parked.
    const int leaver = raw_client(server.port());
    ASSERT_GE(leaver, 0);
    const std::string get = le32(14) + "\x02" + le32(1) + "w" + le32(60000) + le32(0);
    ASSERT_EQ(::send(leaver, get.data(), get.size(), MSG_NOSIGNAL), static_cast<ssize_t>(get.size()));
    std::this_thread::sleep_for(10ms);
    ::close(leaver);

    EXPECT_EQ(store->get("k", 1s), "v");
    store->set("w", "x");
    EXPECT_EQ(open_store(server.url(), with_timeout(2s))->add("n", 3), 3);
    ::close(silent);
}

TEST(StoreFile, FolderThatCannotBeCreatedIsAnIoError) {
    TempDir dir;
    std::filesystem::create_directories(dir.path());
    std::ofstream(dir.path() / "plain") << "x";
    const std::string path = (dir.path() / "plain" / "sub").string();
    const auto message = error_message(Errc::io, [&] { open_store("file://" + path); });
    EXPECT_THAT(message, HasSubstr(path));
}

TEST(StoreFile, PercentEncodedUrlAndCreatedFolder) {
    TempDir dir;
    const auto folder = dir.path() / "with space";
    auto store = open_store("file://" + dir.path().string() + "/with%20space");
    EXPECT_TRUE(std::filesystem::is_directory(folder));
    EXPECT_EQ(store->address(), "file://" + folder.string());
    store->set("k", "v");
    EXPECT_EQ(open_store("file://" + folder.string())->get("k", 1s), "v");
}

// Store::host(): where a communicator looks for the route to its store.
TEST(StoreHost, TcpGivesTheUrlsHostEvenWhenHostingOverLoopback) {
    StoreServer server("127.0.0.1", 0);
    auto store = open_store(server.url(), with_timeout(1s));
    EXPECT_EQ(store->host(), "127.0.0.1");
    EXPECT_EQ(scoped_store(store, "job/1/")->host(), "127.0.0.1");
    // Rank 0 hosts "tcp://localhost:0" and talks to it over 127.0.0.1; its
    // peers reach it as "localhost", and so its host is that.
    auto hosted = open_store("tcp://localhost:0", with_timeout(1s, true));
    EXPECT_EQ(hosted->host(), "localhost");
    hosted->set("k", "v");
}

TEST(StoreHost, FileHasNone) {
    TempDir dir;
    auto store = open_store("file://" + dir.path().string());
    EXPECT_EQ(store->host(), "");
    EXPECT_EQ(scoped_store(store, "a/")->host(), "");
}

TEST(StoreHost, Ipv6WithoutBrackets) {
    std::optional<StoreServer> server;
    try {
        server.emplace("::1", 0);
    } catch (const Error& e) {
        GTEST_SKIP() << "no IPv6 loopback here: " << e.what();
    }
    EXPECT_EQ(open_store(server->url(), with_timeout(1s))->host(), "::1");
}

// A store of the program's own with only address(): the default host()
// reads SCHEME://[USER@]HOST[:PORT][/...].
class AddressOnlyStore final : public Store {
public:
    explicit AddressOnlyStore(std::string address) : address_(std::move(address)) {}
    void set(std::string_view, std::string_view) override {}
    std::string get(std::string_view, std::chrono::milliseconds) override { return {}; }
    std::optional<std::string> try_get(std::string_view) override { return std::nullopt; }
    int64_t add(std::string_view, int64_t) override { return 0; }
    std::string compare_and_set(std::string_view, const std::optional<std::string>&, std::string_view) override {
        return {};
    }
    void wait(std::span<const std::string>, std::chrono::milliseconds) override {}
    bool remove(std::string_view) override { return false; }
    std::string address() const override { return address_; }

private:
    std::string address_;
};

TEST(StoreHost, DefaultReadsTheAuthorityOfTheAddress) {
    const std::pair<std::string, std::string> cases[] = {
        {"mine://h.example:99/job/3", "h.example"},
        {"mine://h.example/job", "h.example"},
        {"mine://10.1.2.3", "10.1.2.3"},
        {"mine://[fe80::1]:5/x", "fe80::1"},
        {"mine://user@10.1.2.3:7/x", "10.1.2.3"},
        {"mine:///a/folder", ""},
        {"not a url", ""},
        {"mine://[fe80::1/x", ""},
        {"", ""},
    };
    for (const auto& [address, host] : cases) {
        EXPECT_EQ(AddressOnlyStore(address).host(), host) << address;
        EXPECT_EQ(scoped_store(std::make_shared<AddressOnlyStore>(address), "p/")->host(), host) << address;
    }
}

// A scheme of the program's own: open_store hands the rest of the URL to its
// opener. The collectives know only tcp:// and file://; coordinator:// is
// registered this way too, by the coordinator client.
TEST(StoreSchemes, ARegisteredSchemeOpensThroughItsOpener) {
    TempDir dir;
    std::string seen_url, seen_rest;
    register_store_scheme("mine+test", [&](std::string_view url, std::string_view rest, const StoreOptions& o) {
        seen_url = url;
        seen_rest = rest;
        return open_store("file://" + dir.path().string() + "/" + std::string(rest), o);
    });
    auto store = open_store("mine+test://sub");
    EXPECT_EQ(seen_url, "mine+test://sub");
    EXPECT_EQ(seen_rest, "sub");
    store->set("k", "v");
    EXPECT_EQ(store->get("k", 1s), "v");
    // An unknown scheme's error lists what is registered.
    EXPECT_THAT(error_message(Errc::invalid_argument, [] { open_store("nosuch://x"); }),
                AllOf(HasSubstr("unknown scheme 'nosuch'"), HasSubstr("mine+test://"), HasSubstr("coordinator://")));
}

TEST(StoreSchemes, BuiltInSchemesAndBadNamesAreRefused) {
    const StoreOpener opener = [](std::string_view, std::string_view, const StoreOptions&) -> std::shared_ptr<Store> {
        return nullptr;
    };
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { register_store_scheme("tcp", opener); }),
                HasSubstr("tcp:// is built in"));
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { register_store_scheme("file", opener); }),
                HasSubstr("file:// is built in"));
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { register_store_scheme("Bad Scheme", opener); }),
                HasSubstr("'Bad Scheme' is not a scheme"));
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { register_store_scheme("", opener); }),
                HasSubstr("is not a scheme"));
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { register_store_scheme("empty", nullptr); }),
                HasSubstr("empty: no opener"));
}

}  // namespace
}  // namespace cohort::test
