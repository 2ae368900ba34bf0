// What the client's source files share: the retry loop around one HTTP
// exchange, across the replicas (client_call.cpp), and the mapping of error
// answers to cohort::Error. The bodies
// are read and written by coordinator/protocol.
#pragma once

#include "coordinator/client/http_pool.hpp"
#include "coordinator/client/leader_finder.hpp"

#include <cohort/coordinator_client.hpp>
#include <cohort/error.hpp>

#include <boost/json/value.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

namespace cohort {

struct CoordinatorClient::Impl {
    Impl(coord::client::UrlSet set, CoordinatorClientOptions o)
        : url(set.address), options(std::move(o)), finder(std::move(set), options.token,
                 {options.tls_ca_file, options.tls_cert_file, options.tls_key_file}) {}

    // A request parked by the server (a store get or wait) says how long it
    // may wait in its target or body; a retry on another replica must ask
    // for what is left of it. Given the wait left, it rewrites the target
    // and body.
    using Rewait = std::function<void(std::chrono::milliseconds left, std::string& target, std::string& body)>;

    // One request, retried through connection failures and 5xx answers until
    // options.retry_deadline (after `wait`, how long the server may park
    // it), across the replicas (docs/coordinator.md, "Clients and several
    // replicas"). A 4xx (or a 5xx past the deadline) throws the mapped
    // Error. Unless it is a GET or `keyed` is false, every attempt carries
    // the same Idempotency-Key, so a retry of a change a replica made is not
    // made again.
    coord::client::HttpReply call(std::string_view method, const std::string& target, std::string_view body = {},
                                  std::string_view content_type = "application/json",
                                  std::chrono::milliseconds wait = {}, bool keyed = true,
                                  const Rewait& rewait = nullptr);
    // call() and the body parsed as a JSON object.
    boost::json::value call_json(std::string_view method, const std::string& target,
                                 const boost::json::value* body = nullptr, bool keyed = true);

    std::string url;  // the address as given (UrlSet::address)
    CoordinatorClientOptions options;
    coord::client::LeaderFinder finder;
};

namespace coord::client {

// "/v1/jobs/NAME" with NAME escaped.
std::string job_path(std::string_view job);
// The mapped Error of an error answer ({"error", "detail"}).
Error error_from_reply(const std::string& url, std::string_view method, const std::string& target,
                       const HttpReply& reply);
Errc code_for_status(long status);

}  // namespace coord::client

}  // namespace cohort
