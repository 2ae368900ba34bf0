// Abstract Unix sockets and the kernel's word on who connected
// (core/local_socket.hpp), which shared memory and direct copies rely on.
#include "core/local_socket.hpp"
#include "core/cloexec.hpp"

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace cohort::detail {
namespace {

TEST(LocalSocket, NamesAreFreshAndFitTheHello) {
    const std::string a = random_abstract_name("cohortdc"), b = random_abstract_name("cohortdc");
    EXPECT_NE(a, b);
    EXPECT_EQ(a.size(), 24u);  // kDirectSocketBytes in comm/transport/handshake.hpp
    EXPECT_EQ(a.rfind("cohortdc", 0), 0u);
}

// The kernel names the process that connected, whatever that process says:
// here a forked child, seen from this process.
TEST(LocalSocket, PeerCredentialsNameTheConnectingProcess) {
    const std::string name = random_abstract_name("cohort-test-");
    const int listener = listen_abstract(name, 4);
    ASSERT_GE(listener, 0) << std::strerror(errno);
    EXPECT_TRUE(is_cloexec(listener));
    EXPECT_LT(listen_abstract(name, 4), 0) << "a second listener on one name";
    EXPECT_EQ(errno, EADDRINUSE);
    const pid_t child = fork();
    if (child == 0) {
        const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un address{};
        const socklen_t length = abstract_address(name, address);
        const bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&address), length) == 0;
        char byte = 0;
        if (ok) (void)::read(s, &byte, 1);  // until the parent closes it
        _exit(ok ? 0 : 1);
    }
    ASSERT_GT(child, 0);
    pollfd p{listener, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 10000), 1) << "the child never connected";
    const int connection = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    ASSERT_GE(connection, 0) << std::strerror(errno);
    const auto who = peer_credentials(connection);
    ASSERT_TRUE(who.has_value());
    EXPECT_EQ(who->pid, child);
    EXPECT_EQ(who->uid, geteuid());
    ::close(connection);
    int status = -1;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    ::close(listener);
    EXPECT_FALSE(peer_credentials(-1).has_value());
}

}  // namespace
}  // namespace cohort::detail
