// Passing the segment's descriptor over an abstract Unix socket.
#include "comm/shm/handoff.hpp"

#include "core/local_socket.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace cohort::comm::shm {
namespace {

constexpr int kPollMs = 5;

int ms_until(Deadline deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<int64_t>(0, left.count()));
}

// One byte carrying one descriptor (SCM_RIGHTS), for sendmsg and recvmsg.
struct DescriptorMessage {
    char byte = 'F';
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};

    DescriptorMessage() {
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
    }
    DescriptorMessage(const DescriptorMessage&) = delete;
    DescriptorMessage& operator=(const DescriptorMessage&) = delete;
};

void send_descriptor(int connection, int fd) {
    DescriptorMessage m;
    cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    sendmsg(connection, &m.msg, MSG_NOSIGNAL);  // a rank that went away simply does not get it
}

}  // namespace

Handoff::Handoff() {
    name_ = detail::random_abstract_name("cohort-");
    listener_ = detail::listen_abstract(name_, 128);
    if (listener_ < 0) {
        const int err = errno;
        throw Error(Errc::unavailable,
                    fmt::format("cannot listen on the local socket @{} to hand out the shared-memory segment: {}",
                                name_, std::strerror(err)));
    }
}

Handoff::~Handoff() {
    if (listener_ >= 0) close(listener_);
}

void Handoff::serve(int fd, const std::function<bool()>& done, Deadline deadline) {
    const uid_t me = geteuid();
    while (!done() && std::chrono::steady_clock::now() < deadline) {
        pollfd p{listener_, POLLIN, 0};
        if (poll(&p, 1, std::min(kPollMs, ms_until(deadline))) <= 0) continue;
        for (;;) {
            const int connection = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
            if (connection < 0) break;
            const auto peer = detail::peer_credentials(connection);
            if (peer && peer->uid == me) send_descriptor(connection, fd);
            close(connection);
        }
    }
}

int fetch_descriptor(const std::string& name, int from_rank, Deadline deadline) {
    sockaddr_un addr{};
    const socklen_t length = detail::abstract_address(name, addr);
    for (;;) {
        const int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s < 0) throw Error(Errc::unavailable, fmt::format("cannot make a local socket: {}", std::strerror(errno)));
        if (connect(s, reinterpret_cast<sockaddr*>(&addr), length) != 0) {
            const int err = errno;
            close(s);
            if (err == EAGAIN && std::chrono::steady_clock::now() < deadline) {  // its backlog is full
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
                continue;
            }
            throw Error(Errc::unavailable,
                        fmt::format("cannot reach rank {}'s local socket @{}: {} (are the ranks in different network "
                                    "namespaces? sharing memory needs one)",
                                    from_rank, name, std::strerror(err)));
        }
        pollfd p{s, POLLIN, 0};
        if (poll(&p, 1, ms_until(deadline)) <= 0) {
            close(s);
            throw Error(Errc::timeout, fmt::format("rank {} never handed over the shared-memory segment", from_rank));
        }
        DescriptorMessage m;
        const ssize_t got = recvmsg(s, &m.msg, MSG_CMSG_CLOEXEC);
        close(s);
        const cmsghdr* c = got == 1 ? CMSG_FIRSTHDR(&m.msg) : nullptr;
        if (c == nullptr || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
            c->cmsg_len != CMSG_LEN(sizeof(int)))
            throw Error(
                Errc::unavailable,
                fmt::format("rank {}'s local socket @{} sent no segment (another user's process?)", from_rank, name));
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
        return fd;
    }
}

}  // namespace cohort::comm::shm
