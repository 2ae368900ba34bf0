// The API-server double: pods of one namespace over HTTP/1.1 with the real
// API's paths, verbs, content types, list and watch semantics, plus faults a
// test switches on (slow answers, dropped connections, 410 Gone). Routes
// under /_double/ let a test in another process drive it (control_routes.cpp).
// HTTPS (and mTLS) when ServerOptions::tls is set (tls.cpp).
// One Asio thread serves every connection; the public calls are thread-safe.
#pragma once

#include "pod_store.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace cohort::k8s_double {

struct TlsOptions {
    std::filesystem::path cert;       // the server's certificate chain (PEM)
    std::filesystem::path key;        // its private key (PEM)
    std::filesystem::path client_ca;  // empty: no client certificate asked for; else one is required
};

struct ServerOptions {
    std::string host = "127.0.0.1";
    uint16_t port = 0;  // 0: any free port
    // How often a watch with allowWatchBookmarks=true gets a BOOKMARK.
    std::chrono::milliseconds bookmark_interval{1000};
    bool log_requests = false;      // one line per request on stderr
    std::optional<TlsOptions> tls;  // none: plain HTTP
    // Non-empty: API requests must carry "Authorization: Bearer <token>"
    // (or a verified client certificate, under mTLS), else 401, as the API
    // server answers an unauthenticated client. /_double/ routes are exempt.
    std::string token;
};

struct ServerCounts {
    uint64_t creates = 0, deletes = 0, patches = 0, gets = 0, lists = 0, watches = 0, conflicts = 0;
    uint64_t tls_handshakes = 0, tls_failures = 0;  // HTTPS: handshakes completed and refused
};

class ApiServer {
public:
    ApiServer(PodStore& store, ServerOptions options = {});
    ~ApiServer();
    ApiServer(const ApiServer&) = delete;
    ApiServer& operator=(const ApiServer&) = delete;

    uint16_t port() const;
    std::string url() const;  // http://127.0.0.1:PORT, or https:// in TLS mode
    // The CN of the last client certificate a handshake verified (mTLS);
    // empty before one.
    std::string last_client() const;

    // Every API answer waits this long first (watch streams: their header).
    void set_delay(std::chrono::milliseconds delay);
    // The next `count` API requests are answered by closing the connection.
    void drop_next(int count);
    // Closes every open watch stream mid-body (no last chunk), and returns
    // once they are closed.
    void drop_watches();
    // Ends every open watch with an ERROR event holding a 410 Status, as
    // the watch cache does when it has moved past the watcher.
    void expire_watches();
    // A watch from a resourceVersion that history no longer holds is
    // answered HTTP 410 instead of an ERROR event in a 200 stream.
    void set_gone_as_http(bool on);
    std::size_t open_watches() const;
    ServerCounts counts() const;
    // A handler for POST /_double/... routes (control_routes.cpp installs one).
    using Control = std::function<std::pair<int, std::string>(const std::string& target)>;
    void set_control(Control control);

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace cohort::k8s_double
