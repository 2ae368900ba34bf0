// Abstract Unix socket addresses, listeners and peer credentials.
#include "core/local_socket.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace cohort::detail {

socklen_t abstract_address(std::string_view name, sockaddr_un& out) {
    std::memset(&out, 0, sizeof out);
    out.sun_family = AF_UNIX;
    const std::size_t n = std::min(name.size(), sizeof out.sun_path - 1);
    std::memcpy(out.sun_path + 1, name.data(), n);  // sun_path[0] = 0: abstract
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

std::string random_abstract_name(std::string_view prefix) {
    std::random_device device;
    return fmt::format("{}{:08x}{:08x}", prefix, device(), device());
}

int listen_abstract(const std::string& name, int backlog) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    sockaddr_un address{};
    const socklen_t length = abstract_address(name, address);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 || ::listen(fd, backlog) != 0) {
        const int err = errno;
        ::close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

std::optional<ucred> peer_credentials(int fd) {
    ucred peer{};
    socklen_t size = sizeof peer;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 || size != sizeof peer) return std::nullopt;
    return peer;
}

}  // namespace cohort::detail
