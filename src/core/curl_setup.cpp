// libcurl's process-wide start and its close-on-exec sockets, in one place.
#include "core/curl_setup.hpp"

#include <cohort/error.hpp>

#include <mutex>

#include <fmt/format.h>

#include <sys/socket.h>

namespace cohort::detail {

namespace {

curl_socket_t open_cloexec_socket(void*, curlsocktype, curl_sockaddr* address) {
    const int fd = ::socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
    return fd < 0 ? CURL_SOCKET_BAD : fd;
}

}  // namespace

void curl_global_setup(std::string_view who) {
    static std::once_flag once;
    // A throw leaves the flag unset, so the next client tries again.
    std::call_once(once, [who] {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            throw Error(Errc::internal, fmt::format("{}: curl_global_init failed", who));
        }
    });
}

void curl_open_sockets_cloexec(CURL* handle) {
    curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, open_cloexec_socket);
}

}  // namespace cohort::detail
