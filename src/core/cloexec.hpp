// Close-on-exec for every descriptor cohort opens. A worker that cohort-run
// starts must not inherit the launcher's descriptors: an inherited listening
// socket would keep the coordinator's port taken after the launcher died,
// and an inherited connection would keep its peer from seeing EOF.
// Boost.Asio (1.81) calls socket() and accept() without SOCK_CLOEXEC, so
// its sockets are opened and accepted here instead; setting FD_CLOEXEC after
// the fact would leave a window in which a fork on another thread (the
// launcher starting a worker while the coordinator in the same process
// accepts) inherits the descriptor.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

#include <cerrno>

#include <sys/socket.h>
#include <unistd.h>

namespace cohort::detail {

// True when `fd` is open and has FD_CLOEXEC set.
bool is_cloexec(int fd) noexcept;

// Sets FD_CLOEXEC on a descriptor that another library handed over already
// open. Returns 0 or the errno of the failed fcntl.
int set_cloexec(int fd) noexcept;

// What Asio's open(protocol) does, with SOCK_CLOEXEC: `s` is an acceptor or
// a socket (TCP or UDP) and must be closed.
template <typename Socket, typename Protocol>
void open_cloexec(Socket& s, const Protocol& protocol, boost::system::error_code& ec) {
    const int fd = ::socket(protocol.family(), protocol.type() | SOCK_CLOEXEC, protocol.protocol());
    if (fd < 0) {
        ec = boost::system::error_code(errno, boost::system::system_category());
        return;
    }
    s.assign(protocol, fd, ec);
    if (ec) ::close(fd);
}

// Accepts one connection on `acceptor` once it has been reported readable
// (async_wait), with SOCK_CLOEXEC. Returns false when there was nothing to
// accept after all (the client gave up in between): wait again. Otherwise
// `ec` says whether `socket` now holds the connection.
bool accept_cloexec(boost::asio::ip::tcp::acceptor& acceptor, boost::asio::ip::tcp::socket& socket,
                    boost::system::error_code& ec);

}  // namespace cohort::detail
