// accept4 under an Asio acceptor, and FD_CLOEXEC for descriptors opened
// elsewhere (core/cloexec.hpp says why).
#include "core/cloexec.hpp"

#include <fcntl.h>

namespace cohort::detail {

bool is_cloexec(int fd) noexcept {
    const int flags = ::fcntl(fd, F_GETFD);
    return flags >= 0 && (flags & FD_CLOEXEC) != 0;
}

int set_cloexec(int fd) noexcept {
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags < 0 || ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC) != 0) return errno;
    return 0;
}

bool accept_cloexec(boost::asio::ip::tcp::acceptor& acceptor, boost::asio::ip::tcp::socket& socket,
                    boost::system::error_code& ec) {
    ec.clear();
    // Readable may not mean acceptable (the connection was reset before we
    // got to it): a blocking accept would then stall the io thread.
    if (!acceptor.native_non_blocking()) {
        acceptor.native_non_blocking(true, ec);
        if (ec) return true;
    }
    const auto endpoint = acceptor.local_endpoint(ec);
    if (ec) return true;
    int fd;
    do fd = ::accept4(acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) return false;
        ec = boost::system::error_code(errno, boost::system::system_category());
        return true;
    }
    socket.assign(endpoint.protocol(), fd, ec);
    if (ec) ::close(fd);
    return true;
}

}  // namespace cohort::detail
