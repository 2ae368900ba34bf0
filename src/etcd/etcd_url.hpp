// The etcd:// URL every cohort user of etcd takes (the etcd:// store, the
// coordinator client's leader discovery): endpoints, a key path and the
// options that say how to reach the cluster (TLS files, a user). Read once
// here so that the two read the same options the same way.
#pragma once

#include "etcd/config.hpp"

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort::etcd {

struct EtcdUrl {
    EtcdConfig config;  // endpoints, TLS files, user and password, checked
    // The path after the endpoints, percent-decoded, without the leading and
    // trailing '/': "cohort/job7/3"; may be empty.
    std::string path;
    // The endpoints as written ("h1:2379,h2:2379"), for addresses without
    // the query and so without secrets.
    std::string hosts;
    // The options named in `extra_options`, decoded, in the order written.
    std::vector<std::pair<std::string, std::string>> options;
};

// etcd://HOST:PORT[,HOST:PORT...][/PATH][?OPTION=VALUE&...] with the
// options cacert, cert, key, tls, user and password-file, and the caller's
// `extra_options`. Error(invalid_argument) for anything malformed, as
// "<what> '<url>': <problem> (expected <grammar>)".
EtcdUrl parse_etcd_url(std::string_view url, std::string_view what, std::string_view grammar,
                       std::span<const std::string_view> extra_options);

}  // namespace cohort::etcd
