// core/curl_setup: libcurl starts once, and the sockets of a handle set up
// with it are close-on-exec (a worker cohort-run starts must not inherit them).
#include "core/curl_setup.hpp"
#include "core/cloexec.hpp"

#include <gtest/gtest.h>

#include <string>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace cohort::detail {
namespace {

TEST(CurlSetup, GlobalSetupMayBeCalledAgain) {
    curl_global_setup("test");
    curl_global_setup("test");  // once per process: the second is a no-op
}

TEST(CurlSetup, AConnectedSocketIsCloseOnExec) {
    curl_global_setup("test");
    // A loopback listener to connect to; the backlog takes the connection
    // without an accept.
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(listener, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    ASSERT_EQ(::listen(listener, 4), 0);
    socklen_t length = sizeof address;
    ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);

    CURL* h = curl_easy_init();
    ASSERT_NE(h, nullptr);
    const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port)) + "/";
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
    curl_open_sockets_cloexec(h);
    EXPECT_EQ(curl_easy_perform(h), CURLE_OK);
    curl_socket_t fd = CURL_SOCKET_BAD;
    EXPECT_EQ(curl_easy_getinfo(h, CURLINFO_ACTIVESOCKET, &fd), CURLE_OK);
    ASSERT_NE(fd, CURL_SOCKET_BAD);
    EXPECT_TRUE(is_cloexec(fd));
    curl_easy_cleanup(h);
    ::close(listener);
}

}  // namespace
}  // namespace cohort::detail
