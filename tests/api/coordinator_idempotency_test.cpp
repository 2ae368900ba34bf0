// Retries that must not apply twice: a proxy between CoordinatorClient and
// the coordinator forwards a request, lets the coordinator answer it, then
// closes the client's connection instead of passing the answer on. The
// client retries (its real retry path); with the Idempotency-Key it sends,
// the retry gets the first answer and the change is made once. The same
// proxy stripping the key shows what happened before: applied twice.
#include "comm_support.hpp"

#include <cohort/coordinator.hpp>
#include <cohort/coordinator_client.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;

// A socket closed when it goes out of scope.
struct Fd {
    int fd = -1;
    explicit Fd(int f = -1) : fd(f) {}
    Fd(Fd&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
    Fd& operator=(Fd&&) = delete;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

void bounded(int fd) {
    timeval tv{5, 0};  // no read or write in the proxy waits longer
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

bool send_all(int fd, const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
        const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) return false;
        sent += static_cast<std::size_t>(n);
    }
    return true;
}

// One HTTP/1.1 message (head and a Content-Length body) from `fd`, with
// what was read past it kept in `buffer`; nothing when the peer closed or
// went quiet.
std::optional<std::string> read_message(int fd, std::string& buffer) {
    for (int reads = 0; reads < 100000; ++reads) {
        const auto head_end = buffer.find("\r\n\r\n");
        if (head_end != std::string::npos) {
            std::string head = buffer.substr(0, head_end);
            std::transform(head.begin(), head.end(), head.begin(), [](unsigned char c) { return std::tolower(c); });
            std::size_t length = 0;
            if (const auto at = head.find("\r\ncontent-length:"); at != std::string::npos) {
                length = std::stoul(head.substr(at + 17));
            }
            const std::size_t total = head_end + 4 + length;
            if (buffer.size() >= total) {
                std::string message = buffer.substr(0, total);
                buffer.erase(0, total);
                return message;
            }
        }
        char chunk[16384];
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) return std::nullopt;
        buffer.append(chunk, static_cast<std::size_t>(n));
    }
    return std::nullopt;
}

// Forwards every exchange to the coordinator at `port`. The next `drops`
// requests whose request line holds `match` reach the coordinator, which
// answers, but the client's connection is closed before it sees the answer.
class DroppingProxy {
public:
    explicit DroppingProxy(uint16_t upstream) : upstream_(upstream) {
        listener_.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::bind(listener_.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener_.fd, 16) != 0) {
            throw std::runtime_error("proxy: cannot listen");
        }
        socklen_t len = sizeof a;
        ::getsockname(listener_.fd, reinterpret_cast<sockaddr*>(&a), &len);
        port_ = ntohs(a.sin_port);
        acceptor_ = std::thread([this] { accept_loop(); });
    }
    ~DroppingProxy() {
        stop_ = true;
        acceptor_.join();
        std::lock_guard lock(mutex_);
        for (auto& t : connections_) t.join();
    }

    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
    // strip_key: also take the Idempotency-Key header out of every request,
    // as a client from before keys would send it.
    void drop(std::string match, int count, bool strip_key = false) {
        std::lock_guard lock(mutex_);
        match_ = std::move(match);
        drops_ = count;
        strip_key_ = strip_key;
    }
    int dropped() const { return dropped_; }
    int keyed() const { return keyed_; }

private:
    void accept_loop() {
        for (int polls = 0; !stop_ && polls < 20 * 60 * 10; ++polls) {  // at most ten minutes
            pollfd p{listener_.fd, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            const int fd = ::accept4(listener_.fd, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) continue;
            std::lock_guard lock(mutex_);
            connections_.emplace_back([this, fd] { serve(Fd(fd)); });
        }
    }

    void serve(Fd client) {
        bounded(client.fd);
        Fd server(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(upstream_);
        if (::connect(server.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
        bounded(server.fd);
        std::string from_client, from_server;
        for (int exchanges = 0; exchanges < 1000 && !stop_; ++exchanges) {
            std::optional<std::string> request = read_message(client.fd, from_client);
            if (!request) return;
            bool drop = false;
            {
                std::lock_guard lock(mutex_);
                const std::string line = request->substr(0, request->find("\r\n"));
                if (drops_ > 0 && line.find(match_) != std::string::npos) {
                    --drops_;
                    drop = true;
                }
                std::string lower = *request;
                std::transform(lower.begin(), lower.end(), lower.begin(),
                               [](unsigned char c) { return std::tolower(c); });
                const auto at = lower.find("\r\nidempotency-key:");
                if (at != std::string::npos) {
                    if (drop) ++keyed_;
                    if (strip_key_) request->erase(at, request->find("\r\n", at + 2) - at);
                }
            }
            if (!send_all(server.fd, *request)) return;
            std::optional<std::string> reply = read_message(server.fd, from_server);
            if (!reply) return;
            if (drop) {
                ++dropped_;
                return;  // both connections close; the client never sees the answer
            }
            if (!send_all(client.fd, *reply)) return;
        }
    }

    uint16_t upstream_;
    uint16_t port_ = 0;
    Fd listener_;
    std::atomic<bool> stop_{false};
    std::thread acceptor_;
    std::mutex mutex_;
    std::vector<std::thread> connections_;
    std::string match_;
    int drops_ = 0;
    bool strip_key_ = false;
    std::atomic<int> dropped_{0}, keyed_{0};
};

// A request written out by hand on a connection of its own, sent; the
// connection, to read the answer from (-1 when it could not be sent).
Fd send_request(uint16_t port, const std::string& method, const std::string& target, const std::string& body,
                const std::string& key) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    if (::connect(fd.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return Fd();
    bounded(fd.fd);
    std::string request = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
    if (!key.empty()) request += "Idempotency-Key: " + key + "\r\n";
    request += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    if (!send_all(fd.fd, request)) return Fd();
    return fd;
}

// The answer as it came (head and body), or "" when none did.
std::string read_answer(const Fd& fd) {
    if (fd.fd < 0) return {};
    std::string buffer;
    return read_message(fd.fd, buffer).value_or("");
}

std::string exchange(uint16_t port, const std::string& method, const std::string& target, const std::string& body,
                     const std::string& key) {
    return read_answer(send_request(port, method, target, body, key));
}

CoordinatorClientOptions retrying() {
    CoordinatorClientOptions o;
    o.request_timeout = 5s;
    o.retry_deadline = 5s;
    o.initial_backoff = 10ms;
    o.max_backoff = 50ms;
    return o;
}

JobSettings closes_at(uint32_t nodes) {
    JobSettings s;
    s.min_nodes = nodes;
    s.max_nodes = nodes;
    s.last_call = 0.0;
    s.heartbeat_interval = 0.05;
    s.failure_timeout = 30.0;
    return s;
}

MemberDescriptor node(std::string id) {
    MemberDescriptor d;
    d.id = std::move(id);
    d.host = "host-" + d.id;
    return d;
}

class CoordinatorIdempotencyTest : public ::testing::Test {
protected:
    CoordinatorIdempotencyTest() {
        CoordinatorOptions o;
        o.tick = std::chrono::milliseconds(20);
        server_.emplace(o);
        proxy_.emplace(server_->port());
        direct_.emplace(server_->url(), retrying());
        through_.emplace(proxy_->url(), retrying());
    }
    ~CoordinatorIdempotencyTest() override {
        through_.reset();  // the client's pooled connections close first
        proxy_.reset();
    }

    std::optional<Coordinator> server_;
    std::optional<DroppingProxy> proxy_;
    std::optional<CoordinatorClient> direct_;   // straight to the coordinator
    std::optional<CoordinatorClient> through_;  // through the proxy
};

TEST_F(CoordinatorIdempotencyTest, StoreAddIsAppliedOnceWhenItsAnswerIsLost) {
    direct_->create_job("s", closes_at(1));
    const uint64_t gen = direct_->join("s", node("a")).generation;
    proxy_->drop("/add", 1);
    EXPECT_EQ(through_->store_add("s", gen, "n", 5), 5);  // the retry's answer is the first one
    EXPECT_EQ(proxy_->dropped(), 1);
    EXPECT_EQ(proxy_->keyed(), 1);
    EXPECT_EQ(direct_->store_add("s", gen, "n", 0), 5);  // applied once

    // The defect as it was, for a client that sends no key: applied twice.
    proxy_->drop("/add", 1, true);
    EXPECT_EQ(through_->store_add("s", gen, "old", 5), 10);
    EXPECT_EQ(proxy_->dropped(), 2);
    EXPECT_EQ(direct_->store_add("s", gen, "old", 0), 10);
}

TEST_F(CoordinatorIdempotencyTest, JoinCreatesOneMemberWhenItsAnswerIsLost) {
    direct_->create_job("j", closes_at(2));
    direct_->join("j", node("a"));
    proxy_->drop("/join", 1);
    const JoinReply b = through_->join("j", node("b"));
    EXPECT_EQ(proxy_->dropped(), 1);
    EXPECT_EQ(b.state, "active");
    ASSERT_TRUE(b.rank);
    // One world of two, formed once: the retry did not join b again, which
    // would have opened another round.
    const MemberWorld w = direct_->world("j", "a");
    ASSERT_TRUE(w.active);
    EXPECT_EQ(w.world_size, 2u);
    EXPECT_EQ(w.generation, b.generation);
    const std::string state = direct_->job_state("j");
    EXPECT_THAT(state, HasSubstr("\"id\":\"b\""));
    EXPECT_EQ(state.find("\"id\":\"b\""), state.rfind("\"id\":\"b\""));
    EXPECT_FALSE(direct_->heartbeat("j", "a", w.generation).rendezvous);
}

TEST_F(CoordinatorIdempotencyTest, ShardDoneIsCountedOnceWhenItsAnswerIsLost) {
    direct_->create_job("d", closes_at(1));
    direct_->join("d", node("a"));
    direct_->register_dataset("d", R"({"shards": [{"id": "s0", "bytes": 10}]})");
    const ShardLease lease = direct_->next_shard("d", "a");
    ASSERT_TRUE(lease.granted);
    proxy_->drop("/shards/done", 1);
    const ShardDone done = through_->shard_done("d", "a", lease.lease);
    EXPECT_EQ(proxy_->dropped(), 1);
    // The first answer, not "already_done": the caller knows its shard counted.
    EXPECT_TRUE(done.counted);
    EXPECT_NE(done.outcome, "already_done");
    EXPECT_TRUE(direct_->next_shard("d", "a").finished);
}

// The key as the HTTP API takes it: a retry is answered from memory and
// counted in /metrics, the same key on another request is a named 422, a
// malformed key a named 400; no key, or a read with one, works as before.
TEST_F(CoordinatorIdempotencyTest, KeysOverHttp) {
    const uint16_t port = server_->port();
    direct_->create_job("h", closes_at(1));
    const uint64_t gen = direct_->join("h", node("a")).generation;
    const std::string add = "/v1/jobs/h/store/" + std::to_string(gen) + "/n/add";
    const std::string first = exchange(port, "POST", add, R"({"delta": 3})", "key-1");
    EXPECT_THAT(first, HasSubstr("200 OK"));
    EXPECT_THAT(first, HasSubstr(R"("value":3)"));
    const std::string again = exchange(port, "POST", add, R"({"delta": 3})", "key-1");
    EXPECT_THAT(again, HasSubstr(R"("value":3)"));
    EXPECT_EQ(direct_->store_add("h", gen, "n", 0), 3);

    const std::string reused = exchange(port, "POST", add, R"({"delta": 4})", "key-1");
    EXPECT_THAT(reused, HasSubstr("422"));
    EXPECT_THAT(reused, HasSubstr("idempotency_key_reused"));
    EXPECT_THAT(reused, HasSubstr("was first sent with another request (POST " + add));
    const std::string bad = exchange(port, "POST", add, R"({"delta": 4})", std::string(200, 'k'));
    EXPECT_THAT(bad, HasSubstr("400"));
    EXPECT_THAT(bad, HasSubstr("1 to 128 visible ASCII characters"));
    EXPECT_EQ(direct_->store_add("h", gen, "n", 0), 3);  // neither was applied

    // Without a key each request is applied, as before.
    EXPECT_THAT(exchange(port, "POST", add, R"({"delta": 1})", ""), HasSubstr(R"("value":4)"));
    EXPECT_THAT(exchange(port, "POST", add, R"({"delta": 1})", ""), HasSubstr(R"("value":5)"));
    // A read ignores the key: it changes nothing, and reads the state now.
    const std::string get = "/v1/jobs/h/store/" + std::to_string(gen) + "/n";
    EXPECT_THAT(exchange(port, "GET", get, "", "key-2"), HasSubstr("\r\n\r\n5"));
    direct_->store_add("h", gen, "n", 1);
    EXPECT_THAT(exchange(port, "GET", get, "", "key-2"), HasSubstr("\r\n\r\n6"));

    const std::string metrics = exchange(port, "GET", "/metrics", "", "");
    EXPECT_THAT(metrics, HasSubstr("\ncohort_coordinator_idempotent_replays_total 1\n"));
    EXPECT_THAT(metrics, HasSubstr("\ncohort_coordinator_idempotency_keys "));
}

// A retry that arrives while the first attempt's answer still waits for the
// journal's fsync: both get the same answer, and the change is made once.
TEST(CoordinatorIdempotency, RetryDuringTheJournalSyncIsNotAppliedTwice) {
    CommTempDir dir;
    CoordinatorOptions o;
    o.data_dir = dir.path();
    Coordinator server(o);
    CoordinatorClient client(server.url(), retrying());
    client.create_job("j", closes_at(1));
    const uint64_t gen = client.join("j", node("a")).generation;
    const std::string add = "/v1/jobs/j/store/" + std::to_string(gen) + "/n/add";
    constexpr int kCopies = 8;
    std::vector<Fd> sent;
    for (int i = 0; i < kCopies; ++i) sent.push_back(send_request(server.port(), "POST", add, R"({"delta": 7})", "k"));
    for (const Fd& fd : sent) EXPECT_THAT(read_answer(fd), HasSubstr(R"("value":7)"));
    EXPECT_EQ(client.store_add("j", gen, "n", 0), 7);
}

// The answer to a keyed change is journaled with the change: a coordinator
// that stops after granting a lease (its answer lost on the way) and starts
// again from its directory answers the retry with the same lease, instead
// of granting a second one. Before, the keys lived in memory only.
TEST(CoordinatorIdempotency, ARetryAfterARestartGetsTheFirstAnswer) {
    CommTempDir dir;
    CoordinatorOptions o;
    o.data_dir = dir.path();
    std::string lease_target, first_lease, first_add;
    uint64_t gen = 0;
    {
        Coordinator server(o);
        CoordinatorClient client(server.url(), retrying());
        client.create_job("j", closes_at(1));
        gen = client.join("j", node("a")).generation;
        client.register_dataset("j", R"({"shards": [{"id": "s0", "bytes": 10}, {"id": "s1", "bytes": 10}]})");
        lease_target = "/v1/jobs/j/shards/next";
        first_lease = exchange(server.port(), "POST", lease_target, R"({"member": "a"})", "lease-key");
        ASSERT_THAT(first_lease, HasSubstr("200 OK"));
        first_add = exchange(server.port(), "POST", "/v1/jobs/j/store/" + std::to_string(gen) + "/n/add",
                             R"({"delta": 5})", "add-key");
        ASSERT_THAT(first_add, HasSubstr(R"("value":5)"));
    }
    Coordinator again(o);
    const auto body = [](const std::string& answer) { return answer.substr(answer.find("\r\n\r\n")); };
    const std::string retried = exchange(again.port(), "POST", lease_target, R"({"member": "a"})", "lease-key");
    EXPECT_EQ(body(retried), body(first_lease));
    const std::string added = exchange(again.port(), "POST", "/v1/jobs/j/store/" + std::to_string(gen) + "/n/add",
                                       R"({"delta": 5})", "add-key");
    EXPECT_EQ(body(added), body(first_add));
    CoordinatorClient client(again.url(), retrying());
    EXPECT_EQ(client.store_add("j", gen, "n", 0), 5);  // applied once
    // One lease was granted, not two: the other shard is still there to lease.
    const ShardLease next = client.next_shard("j", "a");
    ASSERT_TRUE(next.granted);
    EXPECT_THAT(first_lease, ::testing::Not(HasSubstr("\"" + next.shard_id + "\"")));
    EXPECT_FALSE(client.next_shard("j", "a").granted);
    // The same key on another request is still told apart after the restart.
    EXPECT_THAT(exchange(again.port(), "POST", lease_target, R"({"member": "b"})", "lease-key"), HasSubstr("422"));
}

}  // namespace
}  // namespace cohort::test
