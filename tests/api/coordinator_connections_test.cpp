// The coordinator's connection limits as a client sees them, with small
// caps: refusals past the cap per client (503, counted in /metrics), the
// longest idle connection giving way at the cap, idle connections closed
// sooner while crowded, the idle timeout, bad settings, and the open-file
// limit raised at start. Idle connections come from 127.0.0.2 (Linux routes
// all of 127/8 to loopback), so the test's own requests from 127.0.0.1
// have an address of their own.
#include "support.hpp"

#include <cohort/coordinator.hpp>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;

class Socket {
public:
    explicit Socket(int fd) : fd_(fd) {}
    Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    Socket& operator=(Socket&&) = delete;
    ~Socket() {
        if (fd_ >= 0) ::close(fd_);
    }
    int fd() const { return fd_; }

private:
    int fd_;
};

// A connection from `source` to the coordinator that sends nothing.
Socket connect_from(const char* source, uint16_t port) {
    Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_GE(s.fd(), 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &from.sin_addr);
    EXPECT_EQ(::bind(s.fd(), reinterpret_cast<sockaddr*>(&from), sizeof from), 0) << source;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    EXPECT_EQ(::connect(s.fd(), reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
    return s;
}

// What arrives on `s` until the coordinator closes it, or nullopt when it
// is still open after `wait`.
std::optional<std::string> closed_within(const Socket& s, std::chrono::milliseconds wait) {
    std::string data;
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (true) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left <= 0ms) return std::nullopt;
        pollfd p{s.fd(), POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
        char buffer[1024];
        const ssize_t n = ::recv(s.fd(), buffer, sizeof buffer, 0);
        if (n <= 0) return data;  // closed (or reset)
        data.append(buffer, static_cast<std::size_t>(n));
    }
}

// GET `path` from 127.0.0.1 on a connection of its own: the whole reply.
std::string get(uint16_t port, const std::string& path) {
    Socket s = connect_from("127.0.0.1", port);
    const std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    EXPECT_EQ(::send(s.fd(), request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
    return closed_within(s, 5s).value_or("(no reply within 5 s)");
}

// The value of a /metrics line that starts with `series`, or -1.
long long metric(const std::string& text, const std::string& series) {
    const auto at = text.find("\n" + series + " ");
    if (at == std::string::npos) return -1;
    return std::stoll(text.substr(at + series.size() + 2));
}

cohort::CoordinatorOptions options(std::size_t max, std::size_t per_client) {
    cohort::CoordinatorOptions o;
    o.token.clear();
    o.max_connections = max;
    o.max_connections_per_client = per_client;
    return o;
}

// Lets the server's thread accept what is waiting in its backlog.
void settle() {
    std::this_thread::sleep_for(200ms);
}

TEST(CoordinatorConnections, PastTheCapPerClientAConnectionIsRefusedAndCounted) {
    cohort::Coordinator c(options(16, 3));
    std::vector<Socket> idle;
    for (int i = 0; i < 3; ++i) idle.push_back(connect_from("127.0.0.2", c.port()));
    settle();
    Socket fourth = connect_from("127.0.0.2", c.port());
    const auto refused = closed_within(fourth, 5s);
    ASSERT_TRUE(refused) << "the fourth connection from 127.0.0.2 was left open";
    EXPECT_NE(refused->find("503 Service Unavailable"), std::string::npos) << *refused;
    EXPECT_NE(refused->find("too many connections"), std::string::npos) << *refused;
    for (const Socket& s : idle) EXPECT_FALSE(closed_within(s, 0ms)) << "a connection within the cap was closed";
    // Another address is not affected.
    const std::string metrics = get(c.port(), "/metrics");
    EXPECT_NE(metrics.find("200 OK"), std::string::npos) << metrics;
    EXPECT_EQ(metric(metrics, "cohort_coordinator_connections_refused_total{reason=\"per_client\"}"), 1) << metrics;
    EXPECT_EQ(metric(metrics, "cohort_coordinator_connections_refused_total{reason=\"max_connections\"}"), 0);
    EXPECT_EQ(metric(metrics, "cohort_coordinator_connections_max"), 16);
    EXPECT_EQ(metric(metrics, "cohort_coordinator_connections_per_client_max"), 3);
    EXPECT_EQ(metric(metrics, "cohort_coordinator_connections"), 4);  // the three idle and this request's
}

TEST(CoordinatorConnections, AtTheCapTheLongestIdleConnectionGivesWay) {
    cohort::Coordinator c(options(4, 4));
    std::vector<Socket> idle;
    for (int i = 0; i < 4; ++i) {
        idle.push_back(connect_from("127.0.0.2", c.port()));
        settle();  // in this order
    }
    const std::string metrics = get(c.port(), "/metrics");
    EXPECT_NE(metrics.find("200 OK"), std::string::npos) << metrics;
    EXPECT_EQ(metric(metrics, "cohort_coordinator_connections_shed_total{reason=\"displaced\"}"), 1) << metrics;
    EXPECT_EQ(metric(metrics, "cohort_coordinator_connections_refused_total{reason=\"max_connections\"}"), 0);
    EXPECT_TRUE(closed_within(idle[0], 2s)) << "the oldest idle connection is still open";
    for (std::size_t i = 1; i < idle.size(); ++i) EXPECT_FALSE(closed_within(idle[i], 0ms)) << i;
}

TEST(CoordinatorConnections, AtTheCapWithNoneIdleANewcomerIsRefused) {
    cohort::Coordinator c(options(2, 2));
    // Two requests parked on a key nobody sets: busy, not idle.
    const std::string job = "{\"name\":\"j\"}";
    const std::string create =
        "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
        std::to_string(job.size()) + "\r\nConnection: close\r\n\r\n" + job;
    {
        Socket s = connect_from("127.0.0.1", c.port());
        ASSERT_EQ(::send(s.fd(), create.data(), create.size(), MSG_NOSIGNAL), static_cast<ssize_t>(create.size()));
        const auto reply = closed_within(s, 5s);
        ASSERT_TRUE(reply && reply->find("201") != std::string::npos) << reply.value_or("(open)");
    }
    const std::string join = "{\"id\":\"n0\",\"host\":\"h\",\"address\":\"10.0.0.1:29500\"}";
    {
        Socket s = connect_from("127.0.0.1", c.port());
        const std::string request =
            "POST /v1/jobs/j/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: " +
            std::to_string(join.size()) + "\r\nConnection: close\r\n\r\n" + join;
        ASSERT_EQ(::send(s.fd(), request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
        const auto reply = closed_within(s, 5s);
        ASSERT_TRUE(reply && reply->find("200 OK") != std::string::npos) << reply.value_or("(open)");
    }
    settle();  // both closed
    std::vector<Socket> parked;
    for (int i = 0; i < 2; ++i) {
        parked.push_back(connect_from("127.0.0.2", c.port()));
        const std::string wait = "GET /v1/jobs/j/store/1/missing?timeout_ms=20000 HTTP/1.1\r\nHost: x\r\n\r\n";
        ASSERT_EQ(::send(parked.back().fd(), wait.data(), wait.size(), MSG_NOSIGNAL),
                  static_cast<ssize_t>(wait.size()));
    }
    settle();
    Socket third = connect_from("127.0.0.3", c.port());
    const auto refused = closed_within(third, 5s);
    ASSERT_TRUE(refused) << "the third connection was left open";
    EXPECT_NE(refused->find("503"), std::string::npos) << *refused;
    for (const Socket& s : parked) EXPECT_FALSE(closed_within(s, 0ms)) << "a parked request was closed";
}

TEST(CoordinatorConnections, CrowdedIdleConnectionsCloseSooner) {
    auto o = options(10, 10);  // crowded above 8
    o.crowded_idle_timeout = 300ms;
    cohort::Coordinator c(o);
    std::vector<Socket> idle;
    for (int i = 0; i < 8; ++i) idle.push_back(connect_from("127.0.0.2", c.port()));
    std::this_thread::sleep_for(700ms);
    for (const Socket& s : idle) ASSERT_FALSE(closed_within(s, 0ms)) << "closed early though not crowded";
    idle.push_back(connect_from("127.0.0.2", c.port()));  // the ninth: crowded
    // The eight that waited over 300 ms go, at once or by the shedding timer.
    for (std::size_t i = 0; i < 8; ++i) EXPECT_TRUE(closed_within(idle[i], 3s)) << i;
    EXPECT_FALSE(closed_within(idle[8], 0ms));
    const std::string metrics = get(c.port(), "/metrics");
    EXPECT_EQ(metric(metrics, "cohort_coordinator_connections_shed_total{reason=\"crowded_idle\"}"), 8) << metrics;
}

TEST(CoordinatorConnections, AnIdleConnectionClosesAfterTheIdleTimeout) {
    auto o = options(10, 10);
    o.idle_timeout = 300ms;
    o.crowded_idle_timeout = 300ms;
    cohort::Coordinator c(o);
    Socket s = connect_from("127.0.0.2", c.port());
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(closed_within(s, 5s));
    EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
}

TEST(CoordinatorConnections, BadSettingsSayWhatToChange) {
    auto o = options(10, 10);
    o.idle_timeout = 0ms;
    EXPECT_EQ(cohort::test::error_message(cohort::Errc::invalid_argument, [&] { cohort::Coordinator c(o); }),
              "coordinator: idle_timeout must be positive, not 0 ms");
    o.idle_timeout = 1000ms;
    o.crowded_idle_timeout = 5000ms;
    EXPECT_EQ(cohort::test::error_message(cohort::Errc::invalid_argument, [&] { cohort::Coordinator c(o); }),
              "coordinator: crowded_idle_timeout must be positive and at most idle_timeout (1000 ms), not 5000 ms");
}

TEST(CoordinatorConnections, TheOpenFileLimitIsRaisedAndTheCapsDerivedFromIt) {
    cohort::CoordinatorOptions o;
    o.token.clear();
    cohort::Coordinator c(o);
    rlimit limit{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
    if (limit.rlim_max != RLIM_INFINITY) {
        EXPECT_EQ(limit.rlim_cur, limit.rlim_max);
    }
    const std::string metrics = get(c.port(), "/metrics");
    const long long max = metric(metrics, "cohort_coordinator_connections_max");
    const long long expected = std::min<long long>(65536, static_cast<long long>(limit.rlim_cur) - 128);
    EXPECT_EQ(max, expected) << metrics;
    EXPECT_EQ(metric(metrics, "cohort_coordinator_connections_per_client_max"), max / 4);
}

}  // namespace
