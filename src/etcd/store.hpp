// The etcd:// store: a Store over the keys under one prefix of an etcd
// cluster, attached to a lease that every open store of the prefix keeps
// alive, so the keys go a TTL after the last store closes.
#pragma once

#include "etcd/config.hpp"

#include <cohort/store.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

namespace cohort::etcd {

struct StoreUrl {
    EtcdConfig config;
    // "/cohort/job7/3": keys live under "/cohort/job7/3/", the shared
    // lease's id at "/cohort/job7/3" itself.
    std::string prefix;
    std::chrono::seconds ttl{60};
    // etcd://ENDPOINTS/PREFIX without the query, so without secrets.
    std::string address;
};

// etcd://HOST:PORT[,HOST:PORT...]/PREFIX[?OPTION=VALUE&...] (docs/launch-env.md).
// Error(invalid_argument) naming the URL for anything malformed.
StoreUrl parse_store_url(std::string_view url);

std::shared_ptr<Store> open_store(StoreUrl url, const StoreOptions& options);

}  // namespace cohort::etcd
