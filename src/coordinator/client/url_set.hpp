// Where a CoordinatorClient finds the coordinator: one URL, a list of
// replicas ("http://a:1,http://b:2") or an etcd:// URL whose leader key
// names the leader (docs/coordinator.md, "Clients and several replicas").
// Read once, here, for the client, the coordinator:// store and the
// programs that take a coordinator URL.
#pragma once

#include "etcd/config.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::coord::client {

// The leader key's prefix when an etcd:// URL names none; the replicas'
// default --etcd-prefix.
inline constexpr std::string_view kDefaultEtcdPrefix = "/cohort/coordinator";

struct UrlSet {
    // "http://HOST:PORT" each, in the order given; empty with etcd.
    std::vector<std::string> urls;
    // etcd:// only: how to reach etcd, and the key holding
    // {"id", "url", "since"} of the leader: "<prefix>/leader".
    std::optional<etcd::EtcdConfig> etcd;
    std::string leader_key;
    // What CoordinatorClient::url() returns: the list as
    // "http://a:1,http://b:2", or "etcd://HOSTS/PREFIX" without the query
    // (so without file names of keys and passwords).
    std::string address;
};

// text: "http://HOST:PORT[,http://HOST:PORT...]" (a trailing '/' on each is
// ignored) or "etcd://HOST:PORT[,HOST:PORT...][/PREFIX][?OPTIONS]".
// Error(invalid_argument) saying what is wrong with which entry.
UrlSet parse_url_set(std::string_view text);

// One "http://HOST:PORT" entry, checked and without a trailing '/';
// nothing when it is not of that form (`why` then says what is wrong).
std::optional<std::string> http_url(std::string_view text, std::string* why = nullptr);

// "HOST:PORT,http://HOST:PORT" -> "http://HOST:PORT,http://HOST:PORT";
// etcd:// URLs and entries with a scheme are left as they are.
std::string with_http_scheme(std::string_view text);

// The coordinator:// store's address for a client's url() (UrlSet::address):
// "coordinator://a:1,b:2/JOB/GEN" or "coordinator+etcd://HOSTS/PREFIX/JOB/GEN".
std::string store_address(std::string_view address, std::string_view job, uint64_t generation);

// The HOST of "http://HOST:PORT" ("[::1]" as "::1"); "" when there is none.
std::string host_of(std::string_view url);

}  // namespace cohort::coord::client
