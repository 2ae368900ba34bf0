// Every descriptor cohort opens is close-on-exec, so a worker that
// cohort-run starts inherits none of them (the coordinator's listening
// socket above all: an orphaned worker holding it keeps the port taken).
// Checked on the helper itself, then on what a coordinator, a tcp:// store
// and their clients open while they serve.
#include "core/cloexec.hpp"

#include <cohort/coordinator.hpp>
#include <cohort/coordinator_client.hpp>
#include <cohort/store.hpp>

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>

#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>

#include <fcntl.h>
#include <unistd.h>

namespace cohort::detail {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

// The inodes of this machine's Unix-domain sockets.
std::set<std::string> unix_sockets() {
    std::set<std::string> out;
    std::string text;
    if (std::FILE* f = std::fopen("/proc/net/unix", "re")) {
        char buffer[4096];
        for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0;) text.append(buffer, n);
        std::fclose(f);
    }
    std::istringstream lines(text);
    std::string line;
    std::getline(lines, line);  // the header
    while (std::getline(lines, line)) {
        std::istringstream fields(line);
        std::string field;
        for (int i = 0; i < 6 && fields >> field; ++i) {
        }
        if (fields >> field) out.insert(field);  // the 7th column: Inode
    }
    return out;
}

// The descriptors of this process that survive exec, but for Unix-domain
// sockets: libcurl 7.88 makes a socketpair per handle without
// SOCK_CLOEXEC, and cohort cannot reach it (spawn_process keeps it from
// workers all the same).
std::set<int> inheritable() {
    const std::set<std::string> unix_inodes = unix_sockets();
    std::set<int> out;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
        const int fd = std::stoi(entry.path().filename().string());
        if (::fcntl(fd, F_GETFD) < 0 || is_cloexec(fd)) continue;
        const auto target = std::filesystem::read_symlink(entry.path(), ec).string();
        if (target.starts_with("socket:[") && unix_inodes.contains(target.substr(8, target.size() - 9))) continue;
        out.insert(fd);
    }
    return out;
}

// "7 -> socket:[1234]" for each descriptor, for failure messages.
std::string describe(const std::set<int>& fds) {
    std::string out;
    for (const int fd : fds) {
        std::error_code ec;
        const auto target = std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd), ec);
        out += std::to_string(fd) + " -> " + (ec ? std::string("?") : target.string()) + "; ";
    }
    return out;
}

TEST(Cloexec, AcceptorAcceptedAndConnectedSocketsAreCloseOnExec) {
    asio::io_context io;
    boost::system::error_code ec;
    tcp::acceptor acceptor(io);
    open_cloexec(acceptor, tcp::v4(), ec);
    ASSERT_FALSE(ec) << ec.message();
    acceptor.bind(tcp::endpoint(asio::ip::address_v4::loopback(), 0), ec);
    ASSERT_FALSE(ec) << ec.message();
    acceptor.listen(4, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_TRUE(is_cloexec(acceptor.native_handle()));

    tcp::socket client(io);
    open_cloexec(client, tcp::v4(), ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_TRUE(is_cloexec(client.native_handle()));
    client.connect(acceptor.local_endpoint(), ec);
    ASSERT_FALSE(ec) << ec.message();

    acceptor.wait(tcp::acceptor::wait_read, ec);
    ASSERT_FALSE(ec) << ec.message();
    tcp::socket accepted(io);
    ASSERT_TRUE(accept_cloexec(acceptor, accepted, ec));
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_TRUE(accepted.is_open());
    EXPECT_TRUE(is_cloexec(accepted.native_handle()));

    // Nothing waiting: "wait again", not an error and not a blocked thread.
    tcp::socket none(io);
    EXPECT_FALSE(accept_cloexec(acceptor, none, ec));
    EXPECT_FALSE(ec);
    EXPECT_FALSE(none.is_open());

    asio::ip::udp::socket udp(io);
    open_cloexec(udp, asio::ip::udp::v4(), ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_TRUE(is_cloexec(udp.native_handle()));
}

TEST(Cloexec, OpenOnAnOpenSocketFailsAndLeaksNothing) {
    asio::io_context io;
    boost::system::error_code ec;
    tcp::socket s(io);
    open_cloexec(s, tcp::v4(), ec);
    ASSERT_FALSE(ec);
    const std::set<int> before = inheritable();
    const int fds_before = static_cast<int>(std::distance(std::filesystem::directory_iterator("/proc/self/fd"), {}));
    open_cloexec(s, tcp::v4(), ec);
    EXPECT_EQ(ec, asio::error::already_open);
    const int fds_after = static_cast<int>(std::distance(std::filesystem::directory_iterator("/proc/self/fd"), {}));
    EXPECT_EQ(fds_after, fds_before);
    EXPECT_EQ(inheritable(), before);
}

TEST(Cloexec, SetCloexecReportsABadDescriptor) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    EXPECT_FALSE(is_cloexec(fds[0]));
    EXPECT_EQ(set_cloexec(fds[0]), 0);
    EXPECT_TRUE(is_cloexec(fds[0]));
    ::close(fds[0]);
    ::close(fds[1]);
    EXPECT_EQ(set_cloexec(fds[0]), EBADF);
    EXPECT_FALSE(is_cloexec(fds[0]));
}

// A coordinator serving a client, and a tcp:// store serving a client:
// every descriptor they opened, listening, accepted or connected, is
// close-on-exec.
TEST(Cloexec, CoordinatorAndStoreOpenNothingInheritable) {
    const std::set<int> before = inheritable();
    const auto check = [&](const char* stage) {
        std::set<int> opened;
        for (const int fd : inheritable())
            if (!before.contains(fd)) opened.insert(fd);
        EXPECT_TRUE(opened.empty()) << stage << ": inheritable descriptors: " << describe(opened);
    };
    Coordinator coordinator;
    check("coordinator started");
    CoordinatorClient client(coordinator.url());
    check("client made");
    client.create_job("cloexec");
    check("job created");
    EXPECT_NE(client.job_state("cloexec").find("cloexec"), std::string::npos);
    check("job read");
    StoreServer server("127.0.0.1", 0);
    check("store server started");
    auto store = open_store(server.url());
    store->set("k", "v");
    EXPECT_EQ(store->get("k", std::chrono::seconds(5)), "v");
    check("store used");
}

}  // namespace
}  // namespace cohort::detail
