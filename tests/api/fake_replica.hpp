// A stand-in for one replica of a highly available coordinator, for the
// client's failover tests: a loopback HTTP server that either forwards each
// request to a real in-process cohort::Coordinator (the replica leads) or
// answers it as a follower does: 503 {"error": "not_leader"} with
// X-Cohort-Leader naming the leader, or without it during an election.
// Several replicas forwarding to one Coordinator share its state, as the
// real replicas share etcd's. kill() stops listening and breaks every open
// connection, requests parked on the Coordinator included, like a replica
// killed with -9. Every read and write is bounded (5 s), every loop in
// count, and the destructor joins every thread.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace cohort::test {

class FakeReplica {
public:
    enum class Role { leader, follower };

    // upstream: the Coordinator's port, where a leading replica forwards.
    explicit FakeReplica(uint16_t upstream) : upstream_(upstream) {
        listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
            ::listen(listener_, 64) != 0) {
            throw std::runtime_error("fake replica: cannot listen on loopback");
        }
        socklen_t len = sizeof a;
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
        port_ = ntohs(a.sin_port);
        acceptor_ = std::thread([this] { accept_loop(); });
    }
    FakeReplica(const FakeReplica&) = delete;
    FakeReplica& operator=(const FakeReplica&) = delete;
    ~FakeReplica() {
        kill();
        acceptor_.join();
        std::vector<std::thread> threads;
        {
            std::lock_guard lock(mutex_);
            threads.swap(connections_);
        }
        for (auto& t : threads) t.join();
    }

    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

    void lead() {
        std::lock_guard lock(mutex_);
        role_ = Role::leader;
    }
    // leader "": no X-Cohort-Leader (an election is on).
    void follow(std::string leader) {
        std::lock_guard lock(mutex_);
        role_ = Role::follower;
        leader_ = std::move(leader);
    }
    // The next `count` requests whose request line holds `match` reach the
    // Coordinator, which answers, and then this replica dies before passing
    // the answer on (the leader killed between its write and its reply).
    void die_after(std::string match, int count = 1) {
        std::lock_guard lock(mutex_);
        die_match_ = std::move(match);
        die_count_ = count;
    }
    // Stops listening (new connections are refused) and breaks the open ones.
    void kill() {
        std::lock_guard lock(mutex_);
        if (dead_) return;
        dead_ = true;
        ::shutdown(listener_, SHUT_RDWR);
        for (const int fd : open_) ::shutdown(fd, SHUT_RDWR);
    }

    int forwarded() const { return forwarded_; }
    int refused() const { return refused_; }  // answered as a follower
    // Request lines forwarded, and the Idempotency-Key of each ("" for none).
    std::vector<std::pair<std::string, std::string>> seen() const {
        std::lock_guard lock(mutex_);
        return seen_;
    }
    // The bodies of the requests forwarded, in the same order.
    std::vector<std::string> bodies() const {
        std::lock_guard lock(mutex_);
        return bodies_;
    }

private:
    static void bounded(int fd) {
        timeval tv{5, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }

    static bool send_all(int fd, const std::string& bytes) {
        std::size_t sent = 0;
        while (sent < bytes.size()) {
            const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
            if (n <= 0) return false;
            sent += static_cast<std::size_t>(n);
        }
        return true;
    }

    static std::string lower(std::string text) {
        std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
        return text;
    }

    // One HTTP/1.1 message with a Content-Length body; nothing when the peer
    // closed, went quiet, or the connection was broken. `patient`: a parked
    // answer may take longer than one read's timeout.
    static std::optional<std::string> read_message(int fd, std::string& buffer, bool patient = false) {
        int quiet = 0;
        for (int reads = 0; reads < 100000; ++reads) {
            const auto head_end = buffer.find("\r\n\r\n");
            if (head_end != std::string::npos) {
                const std::string head = lower(buffer.substr(0, head_end));
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
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && patient && ++quiet < 12) continue;
            if (n <= 0) return std::nullopt;
            buffer.append(chunk, static_cast<std::size_t>(n));
        }
        return std::nullopt;
    }

    void accept_loop() {
        for (int polls = 0; polls < 20 * 60 * 10; ++polls) {  // ten minutes at most
            {
                std::lock_guard lock(mutex_);
                if (dead_) break;
            }
            pollfd p{listener_, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) continue;
            std::lock_guard lock(mutex_);
            if (dead_) {
                ::close(fd);
                break;
            }
            open_.insert(fd);
            connections_.emplace_back([this, fd] { serve(fd); });
        }
        ::close(listener_);
    }

    // Registers a socket so that kill() breaks it; false when dead already.
    bool track(int fd) {
        std::lock_guard lock(mutex_);
        if (dead_) return false;
        open_.insert(fd);
        return true;
    }
    void untrack_and_close(int fd) {
        {
            std::lock_guard lock(mutex_);
            open_.erase(fd);
        }
        ::close(fd);
    }

    void serve(int client) {
        bounded(client);
        int server = -1;
        std::string from_client, from_server;
        for (int exchanges = 0; exchanges < 10000; ++exchanges) {
            std::optional<std::string> request = read_message(client, from_client);
            if (!request) break;
            Role role;
            std::string leader;
            bool die = false;
            {
                std::lock_guard lock(mutex_);
                if (dead_) break;
                role = role_;
                leader = leader_;
                const std::string line = request->substr(0, request->find("\r\n"));
                if (role == Role::leader && die_count_ > 0 && line.find(die_match_) != std::string::npos) {
                    --die_count_;
                    die = true;
                }
            }
            if (role == Role::follower) {
                ++refused_;
                const std::string body = R"({"error":"not_leader","detail":"this replica follows)" +
                                         (leader.empty() ? std::string(" nobody yet")
                                                         : " " + leader) + "\"}";
                std::string reply = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n";
                if (!leader.empty()) reply += "X-Cohort-Leader: " + leader + "\r\n";
                reply += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
                if (!send_all(client, reply)) break;
                continue;
            }
            {
                std::lock_guard lock(mutex_);
                const std::string head = lower(request->substr(0, request->find("\r\n\r\n")));
                std::string key;
                if (const auto at = head.find("\r\nidempotency-key:"); at != std::string::npos) {
                    key = request->substr(at + 18, request->find("\r\n", at + 2) - at - 18);
                    while (!key.empty() && key.front() == ' ') key.erase(0, 1);
                }
                seen_.emplace_back(request->substr(0, request->find("\r\n")), key);
                bodies_.push_back(request->substr(request->find("\r\n\r\n") + 4));
            }
            if (server < 0) {
                server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                sockaddr_in a{};
                a.sin_family = AF_INET;
                a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                a.sin_port = htons(upstream_);
                if (server < 0 || !track(server) ||
                    ::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
                    break;
                }
                bounded(server);
            }
            ++forwarded_;
            if (!send_all(server, *request)) break;
            std::optional<std::string> reply = read_message(server, from_server, true);
            if (!reply) break;
            if (die) {
                kill();  // the Coordinator made the change; its answer is lost with this replica
                break;
            }
            if (!send_all(client, *reply)) break;
        }
        if (server >= 0) untrack_and_close(server);
        untrack_and_close(client);
    }

    const uint16_t upstream_;
    uint16_t port_ = 0;
    int listener_ = -1;
    std::thread acceptor_;
    mutable std::mutex mutex_;
    std::vector<std::thread> connections_;
    std::set<int> open_;
    bool dead_ = false;
    Role role_ = Role::leader;
    std::string leader_;
    std::string die_match_;
    int die_count_ = 0;
    std::atomic<int> forwarded_{0};
    std::atomic<int> refused_{0};
    std::vector<std::pair<std::string, std::string>> seen_;
    std::vector<std::string> bodies_;
};

}  // namespace cohort::test
