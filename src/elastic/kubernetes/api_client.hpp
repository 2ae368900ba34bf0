// Requests to the Kubernetes API server over libcurl: one call per request
// (each on its own handle, so any thread may call), and a watch that streams
// newline-separated events until it ends, fails or is told to stop.
#pragma once

#include <cohort/kubernetes.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

namespace cohort::k8s {

struct ApiReply {
    long status = 0;    // HTTP status; 0 when no answer came
    std::string body;   // the object, or a Status
    std::string error;  // transport failure (connection refused, timeout), when status is 0
    // A TLS failure that asking again cannot mend (the server's certificate
    // not trusted, the handshake refused); `error` says what to check.
    bool tls_refused = false;
};

class ApiClient {
public:
    ApiClient(KubernetesCluster cluster, std::chrono::milliseconds timeout);

    const KubernetesCluster& cluster() const { return cluster_; }
    // path: from the server's root, e.g. /api/v1/namespaces/ns/pods
    ApiReply request(std::string_view method, const std::string& path, const std::string& body = {},
                     std::string_view content_type = "application/json") const;
    // Streams a watch: `on_line` gets each event line. Returns when the
    // server ends the stream (status 200, error empty), on a failure, or
    // soon after `stop` turns true.
    ApiReply watch(const std::string& path, const std::function<void(std::string_view line)>& on_line,
                   const std::atomic<bool>& stop) const;

private:
    // The bearer token now: cluster_.token, or token_file's, read again
    // when the copy is a minute old (a file that has gone keeps the last).
    std::string token() const;
    ApiReply failed(int code, const char* detail, std::string what) const;

    KubernetesCluster cluster_;
    std::chrono::milliseconds timeout_;
    mutable std::mutex token_mu_;
    mutable std::string token_;
    mutable std::chrono::steady_clock::time_point token_read_{};
};

// The `message` of a Status body, or the body itself, or the transport
// error: for error messages.
std::string describe(const ApiReply& reply);
// Percent-encodes a query value.
std::string query_escape(std::string_view value);

}  // namespace cohort::k8s
