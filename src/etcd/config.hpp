// How to reach an etcd cluster: its endpoints, TLS files, credentials and
// how long one request may take. Shared by every etcd user in cohort (the
// etcd:// store, the coordinator's replicas).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::etcd {

struct EtcdConfig {
    // "http://HOST:PORT" or "https://HOST:PORT", tried in this order; a
    // failed one is skipped until the others fail too.
    std::vector<std::string> endpoints;
    // PEM files. ca_file checks the servers' certificates (else the system's
    // CAs); cert_file and key_file are this client's, for etcd's
    // --client-cert-auth.
    std::string ca_file;
    std::string cert_file;
    std::string key_file;
    // etcd's own users (etcdctl user add): the client authenticates once and
    // again whenever etcd says the token expired.
    std::string user;
    std::string password;
    // One request to one endpoint: past it the next endpoint is tried. The
    // caller's deadline bounds the whole call.
    std::chrono::milliseconds attempt_timeout{std::chrono::seconds(5)};
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(1)};
};

// "h1:2379,https://h2:2379" -> {"http://h1:2379", "https://h2:2379"}:
// endpoints without a scheme get `default_scheme`. Error(invalid_argument)
// naming `where` for an empty entry, a missing or bad port, or a path.
std::vector<std::string> parse_endpoints(std::string_view list, std::string_view default_scheme,
                                         std::string_view where);

// Error(invalid_argument) naming `where` when the config cannot work: no
// endpoints, a key without a certificate, a user without a password, a
// file that cannot be read.
void check_config(const EtcdConfig& config, std::string_view where);

// "http://h1:2379, http://h2:2379": for messages.
std::string endpoint_list(const std::vector<std::string>& endpoints);

}  // namespace cohort::etcd
