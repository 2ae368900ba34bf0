// The coordinator client's pieces below the API: reading the URL forms
// (url_set), the store address made from them, and Idempotency-Keys that a
// forked process does not share with its parent.
#include "coordinator/client/http_pool.hpp"
#include "coordinator/client/url_set.hpp"

#include <cohort/error.hpp>

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace cohort::coord::client {
namespace {

TEST(CoordinatorUrlSet, ReadsOneUrlAListAndEtcd) {
    const UrlSet one = parse_url_set("http://127.0.0.1:29400/");
    EXPECT_EQ(one.urls, (std::vector<std::string>{"http://127.0.0.1:29400"}));
    EXPECT_FALSE(one.etcd);
    EXPECT_EQ(one.address, "http://127.0.0.1:29400");

    const UrlSet list = parse_url_set("http://a:1,http://[::1]:2/");
    EXPECT_EQ(list.urls, (std::vector<std::string>{"http://a:1", "http://[::1]:2"}));
    EXPECT_EQ(list.address, "http://a:1,http://[::1]:2");

    const UrlSet etcd = parse_url_set("etcd://e1:2379,e2:2379");
    ASSERT_TRUE(etcd.etcd);
    EXPECT_EQ(etcd.etcd->endpoints, (std::vector<std::string>{"http://e1:2379", "http://e2:2379"}));
    EXPECT_EQ(etcd.leader_key, "/cohort/coordinator/leader");
    EXPECT_EQ(etcd.address, "etcd://e1:2379,e2:2379/cohort/coordinator");
    const UrlSet prefixed = parse_url_set("etcd://e:2379/ha/a/?tls=true");
    EXPECT_EQ(prefixed.leader_key, "/ha/a/leader");
    EXPECT_EQ(prefixed.etcd->endpoints.front(), "https://e:2379");
    EXPECT_EQ(prefixed.address, "etcd://e:2379/ha/a");  // no query
}

TEST(CoordinatorUrlSet, StoreAddressesAndHosts) {
    EXPECT_EQ(store_address("http://a:1,http://b:2", "job", 3), "coordinator://a:1,b:2/job/3");
    EXPECT_EQ(store_address("http://a:1", "job", 3), "coordinator://a:1/job/3");
    EXPECT_EQ(store_address("https://a:1,https://b:2", "job", 3), "coordinator+https://a:1,b:2/job/3");
    EXPECT_EQ(store_address("etcd://e:2379/cohort/coordinator", "j", 0),
              "coordinator+etcd://e:2379/cohort/coordinator/j/0");
    EXPECT_EQ(host_of("http://[::1]:2"), "::1");
    EXPECT_EQ(host_of("http://10.0.0.1:29400"), "10.0.0.1");
    EXPECT_EQ(with_http_scheme("a:1,http://b:2,c:3"), "http://a:1,http://b:2,http://c:3");
    EXPECT_EQ(with_http_scheme("a:1,,b:2"), "http://a:1,,http://b:2");  // the empty entry is kept, to be refused
}

TEST(CoordinatorUrlSet, HttpUrlSaysWhatIsWrong) {
    std::string why;
    EXPECT_FALSE(http_url("ftp://a:1", &why));
    EXPECT_EQ(why, "scheme 'ftp' is not http or https");
    EXPECT_FALSE(http_url("http://:1", &why));
    EXPECT_EQ(why, "has no host");
    EXPECT_FALSE(http_url("http://[::1]", &why));
    EXPECT_EQ(why, "has no port");
    EXPECT_FALSE(http_url("http://a:70000", &why));
    EXPECT_EQ(why, "has no port from 1 to 65535");
    EXPECT_FALSE(http_url("http://a b:1", &why));
    EXPECT_FALSE(http_url("http://user@a:1", &why));
    EXPECT_EQ(http_url("http://a:1//").value_or(""), "http://a:1");
    EXPECT_EQ(http_url("https://a:1/").value_or(""), "https://a:1");
    EXPECT_FALSE(http_url("https://a", &why));
}

TEST(IdempotencyKey, AForkedChildDoesNotRepeatItsParentsKeys) {
    (void)new_idempotency_key();  // this thread's generator is seeded before the fork
    int pipe_fds[2];
    ASSERT_EQ(::pipe(pipe_fds), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        const std::string key = new_idempotency_key();
        const bool written = ::write(pipe_fds[1], key.data(), key.size()) == static_cast<ssize_t>(key.size());
        ::_exit(written ? 0 : 1);
    }
    ::close(pipe_fds[1]);
    const std::string mine = new_idempotency_key();
    char buffer[64] = {};
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
    ::close(pipe_fds[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_EQ(n, 32);
    EXPECT_EQ(mine.size(), 32u);
    EXPECT_NE(std::string(buffer, 32), mine);
}

}  // namespace
}  // namespace cohort::coord::client
