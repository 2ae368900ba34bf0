// libcurl under the etcd client: pooled easy handles (each keeps its
// connections open), endpoint failover, the auth token, and the streaming
// reader that splits a watch's chunked body into JSON messages.
#include "etcd/http.hpp"

#include "core/curl_setup.hpp"
#include "etcd/answer.hpp"

#include <cohort/error.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/stream_parser.hpp>

#include <curl/curl.h>

#include <algorithm>
#include <thread>

#include <fmt/format.h>

namespace cohort::etcd {

namespace json = boost::json;

namespace {

struct HeaderList {
    curl_slist* list = nullptr;
    ~HeaderList() { curl_slist_free_all(list); }
    void add(const std::string& header) {
        curl_slist* next = curl_slist_append(list, header.c_str());
        if (next == nullptr) throw std::bad_alloc();
        list = next;
    }
};

// Where a transfer's bytes go: all of a unary reply, or each message of a
// stream handed on as it completes.
struct Sink {
    CURL* handle = nullptr;
    std::string body;  // unary replies, and a stream's error reply
    const std::function<bool(const json::object&)>* on_message = nullptr;
    json::stream_parser parser;
    bool started = false;
    bool stopped = false;
    std::string parse_error;
    const std::atomic<bool>* cancel = nullptr;
};

size_t write_body(char* data, size_t size, size_t count, void* user) {
    auto& sink = *static_cast<Sink*>(user);
    const size_t n = size * count;
    long status = 0;
    curl_easy_getinfo(sink.handle, CURLINFO_RESPONSE_CODE, &status);
    if (sink.on_message == nullptr || status != 200) {
        sink.body.append(data, n);
        return n;
    }
    sink.started = true;
    std::string_view rest(data, n);
    while (!rest.empty()) {
        boost::system::error_code ec;
        const size_t used = sink.parser.write_some(rest.data(), rest.size(), ec);
        if (ec) {
            sink.parse_error = ec.message();
            return 0;
        }
        rest.remove_prefix(used);
        if (sink.parser.done()) {
            const json::value message = sink.parser.release();
            sink.parser.reset();
            if (!message.is_object()) {
                sink.parse_error = "a message is not a JSON object";
                return 0;
            }
            if (!(*sink.on_message)(message.get_object())) {
                sink.stopped = true;
                return 0;
            }
        } else if (used == 0) {
            break;
        }
    }
    return n;
}

int check_cancel(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    const auto* cancel = static_cast<Sink*>(user)->cancel;
    return cancel != nullptr && cancel->load() ? 1 : 0;
}

bool is_refused(CURLcode rc) {
    return rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY;
}

bool is_tls_problem(CURLcode rc) {
    return rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CERTPROBLEM ||
           rc == CURLE_SSL_CIPHER || rc == CURLE_SSL_CACERT_BADFILE || rc == CURLE_SSL_ENGINE_NOTFOUND ||
           rc == CURLE_SSL_ISSUER_ERROR || rc == CURLE_SSL_CRL_BADFILE;
}

std::string lowercase_first(std::string text) {
    if (text.size() > 1 && text[0] >= 'A' && text[0] <= 'Z' && text[1] >= 'a' && text[1] <= 'z') text[0] = static_cast<char>(text[0] - 'A' + 'a');
    return text;
}

// "http://a:2379 (connection refused), http://b:2379 (no leader)".
std::string tried_list(const std::vector<std::string>& endpoints, const std::vector<std::string>& failures) {
    std::string tried;
    for (std::size_t e = 0; e < endpoints.size(); ++e) {
        if (!failures[e].empty()) tried += fmt::format("{}{} ({})", tried.empty() ? "" : ", ", endpoints[e], failures[e]);
    }
    return tried;
}

std::chrono::milliseconds left_until(Clock::time_point deadline) {
    return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                    std::chrono::milliseconds::zero());
}

}  // namespace

struct EtcdHttp::Outcome {
    enum class Kind { answered, refused, failed, fatal, stream_end };
    Kind kind = Kind::answered;
    long status = 0;
    json::value body;
    std::string error;
    StreamEnd end = StreamEnd::broken;
};

EtcdHttp::EtcdHttp(EtcdConfig config) : config_(std::move(config)) {
    detail::curl_global_setup("etcd client");
    check_config(config_, "etcd client");
    auth_enabled_ = !config_.user.empty();
}

EtcdHttp::~EtcdHttp() {
    for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* EtcdHttp::take() {
    {
        std::lock_guard lock(pool_mutex_);
        if (!idle_.empty()) {
            void* h = idle_.back();
            idle_.pop_back();
            return h;
        }
    }
    CURL* h = curl_easy_init();
    if (h == nullptr) throw Error(Errc::no_memory, "etcd client: curl_easy_init failed");
    return h;
}

void EtcdHttp::give(void* handle) {
    std::lock_guard lock(pool_mutex_);
    idle_.push_back(handle);
}

EtcdHttp::Outcome EtcdHttp::attempt(std::size_t endpoint, std::string_view path, const std::string& body,
                                    Clock::time_point deadline, bool streaming,
                                    const std::function<bool(const json::object&)>* on_message,
                                    const std::atomic<bool>* cancel) {
    CURL* h = static_cast<CURL*>(take());
    struct Return {
        EtcdHttp* self;
        CURL* h;
        ~Return() { self->give(h); }
    } give_back{this, h};
    curl_easy_reset(h);  // keeps the open connections, forgets the options

    const std::string url = config_.endpoints[endpoint] + std::string(path);
    const std::string token = on_message == nullptr && path == "/v3/auth/authenticate" ? std::string() : token_copy();
    HeaderList headers;
    headers.add("Content-Type: application/json");
    headers.add("Expect:");
    if (!token.empty()) headers.add("Authorization: " + token);
    Sink sink;
    sink.handle = h;
    sink.on_message = on_message;
    sink.cancel = cancel;
    char error[CURL_ERROR_SIZE] = {};
    const auto left = left_until(deadline);
    const auto timeout = streaming ? left : std::min(left, config_.attempt_timeout);
    const auto connect = std::min(left, config_.connect_timeout);
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    detail::curl_open_sockets_cloexec(h);
    curl_easy_setopt(h, CURLOPT_PROXY, "");  // etcd is reached directly
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max<int64_t>(timeout.count(), 1)));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::max<int64_t>(connect.count(), 1)));
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.list);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
    if (cancel != nullptr) {
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, check_cancel);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, &sink);
    }
    if (!config_.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, config_.ca_file.c_str());
    if (!config_.cert_file.empty()) curl_easy_setopt(h, CURLOPT_SSLCERT, config_.cert_file.c_str());
    if (!config_.key_file.empty()) curl_easy_setopt(h, CURLOPT_SSLKEY, config_.key_file.c_str());

    const CURLcode rc = curl_easy_perform(h);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
    Outcome out;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out.status);
    const std::string detail = error[0] != '\0' ? std::string(error) : std::string(curl_easy_strerror(rc));
    if (streaming && sink.started && (out.status == 200)) {
        out.kind = Outcome::Kind::stream_end;
        if (sink.stopped) {
            out.end = StreamEnd::stopped;
        } else if (rc == CURLE_ABORTED_BY_CALLBACK) {
            out.end = StreamEnd::cancelled;
        } else if (rc == CURLE_OPERATION_TIMEDOUT) {  // a stream's timeout is the deadline
            out.end = StreamEnd::deadline;
        } else {
            out.end = StreamEnd::broken;
            out.error = !sink.parse_error.empty() ? "unreadable stream: " + sink.parse_error
                        : rc != CURLE_OK          ? detail
                                                  : std::string("the stream ended");
        }
        return out;
    }
    if (rc == CURLE_ABORTED_BY_CALLBACK) {
        out.kind = Outcome::Kind::stream_end;
        out.end = StreamEnd::cancelled;
        return out;
    }
    if (rc != CURLE_OK) {
        out.error = detail;
        // A TLS alert is the server turning this client's certificate away
        // (TLS 1.3 reports it at the first read): no retry will help.
        const bool alert = rc == CURLE_RECV_ERROR && detail.find("SSL") != std::string::npos &&
                           detail.find(" alert ") != std::string::npos;
        out.kind = is_refused(rc)                ? Outcome::Kind::refused
                   : is_tls_problem(rc) || alert ? Outcome::Kind::fatal
                                                 : Outcome::Kind::failed;
        return out;
    }
    boost::system::error_code ec;
    out.body = json::parse(sink.body, ec);
    if (ec) out.body = nullptr;
    return out;
}

std::string EtcdHttp::token_copy() {
    std::lock_guard lock(token_mutex_);
    return token_;
}

std::string EtcdHttp::token(Clock::time_point deadline) {
    {
        std::lock_guard lock(token_mutex_);
        if (!auth_enabled_ || !token_.empty()) return token_;
    }
    authenticate("", deadline);
    return token_copy();
}

void EtcdHttp::authenticate(const std::string& stale, Clock::time_point deadline) {
    std::lock_guard lock(auth_mutex_);
    {
        std::lock_guard token_lock(token_mutex_);
        if (!auth_enabled_ || token_ != stale) return;  // another thread has done it
    }
    json::object body{{"name", config_.user}, {"password", config_.password}};
    json::object reply;
    try {
        reply = exchange("/v3/auth/authenticate", body, deadline, Replay::safe,
                         fmt::format("authenticating as etcd user '{}'", config_.user), true);
    } catch (const Error& e) {
        if (e.code() != Errc::invalid_argument) throw;
        // etcd refuses a wrong password with InvalidArgument; say what it is.
        throw Error(Errc::permission_denied,
                    fmt::format("{}; check the user and its password (etcd:// options user= and password-file=)",
                                e.what()));
    }
    std::lock_guard token_lock(token_mutex_);
    if (reply.contains("auth_off")) {
        auth_enabled_ = false;
        token_.clear();
        return;
    }
    const auto* t = reply.if_contains("token");
    if (t == nullptr || !t->is_string() || t->get_string().empty()) {
        throw Error(Errc::parse, fmt::format("etcd's reply to authenticating as '{}' has no token", config_.user));
    }
    token_ = t->get_string();
}

json::object EtcdHttp::call(std::string_view path, const json::object& body, Clock::time_point deadline,
                            Replay replay, std::string_view what) {
    token(deadline);
    return exchange(path, body, deadline, replay, what, false);
}

json::object EtcdHttp::exchange(std::string_view path, const json::object& body, Clock::time_point deadline,
                                Replay replay, std::string_view what, bool authenticating) {
    const std::string text = json::serialize(body);
    const std::size_t n = config_.endpoints.size();
    std::vector<std::string> failures(n);
    auto backoff = std::chrono::milliseconds(25);
    bool reauthenticated = false;
    for (;;) {
        const std::size_t first = preferred_.load();
        std::size_t fatal = 0;
        for (std::size_t i = 0; i < n; ++i) {
            if (Clock::now() >= deadline && i > 0) break;
            const std::size_t e = (first + i) % n;
            const std::string stale = authenticating ? std::string() : token_copy();
            Outcome out = attempt(e, path, text, deadline, false, nullptr, nullptr);
            const std::string& endpoint = config_.endpoints[e];
            if (out.kind == Outcome::Kind::refused || out.kind == Outcome::Kind::failed ||
                out.kind == Outcome::Kind::fatal) {
                failures[e] = lowercase_first(out.error);
                if (out.kind == Outcome::Kind::fatal) ++fatal;
                if (out.kind == Outcome::Kind::failed && replay == Replay::unsafe) {
                    throw Error(Errc::unavailable,
                                fmt::format("etcd at {} failed during {} ({}); etcd may or may not have applied it, "
                                            "so it was not sent again",
                                            endpoint, what, failures[e]));
                }
                continue;
            }
            const Reading r = read_answer(out.status, &out.body);
            switch (r.verdict) {
                case Verdict::ok:
                    preferred_.store(e);
                    return std::move(out.body.get_object());
                case Verdict::auth_off:
                    if (authenticating) return json::object{{"auth_off", true}};
                    [[fallthrough]];
                case Verdict::refused:
                    throw Error(errc_for(r), fmt::format("etcd at {} refused {}: {}{}", endpoint, what, r.message,
                                                         advice_for(r)));
                case Verdict::auth_expired:
                    if (authenticating || reauthenticated || config_.user.empty()) {
                        throw Error(Errc::permission_denied,
                                    fmt::format("etcd at {} refused {}: {}{}", endpoint, what, r.message,
                                                config_.user.empty() ? "; give a user and a password" : ""));
                    }
                    reauthenticated = true;
                    authenticate(stale, deadline);
                    --i;  // the same endpoint again, with the new token
                    continue;
                case Verdict::retry_maybe:
                    if (replay == Replay::unsafe) {
                        throw Error(Errc::unavailable,
                                    fmt::format("etcd at {} failed during {} ({}); etcd may or may not have applied "
                                                "it, so it was not sent again",
                                                endpoint, what, r.message));
                    }
                    [[fallthrough]];
                case Verdict::retry_unapplied:
                    failures[e] = r.message;
                    continue;
                case Verdict::not_etcd:
                    failures[e] = r.message + " (is this etcd's client port, of etcd 3.4 or later?)";
                    ++fatal;
                    continue;
            }
        }
        const std::string tried = tried_list(config_.endpoints, failures);
        if (fatal == n) {
            throw Error(Errc::unavailable,
                        fmt::format("etcd cannot be used for {}: {}; check the endpoints and the TLS files (etcd:// "
                                    "options cacert=, cert=, key=)",
                                    what, tried));
        }
        const auto left = left_until(deadline);
        if (Clock::now() >= deadline) {
            throw Error(Errc::unavailable,
                        fmt::format("etcd unavailable: no endpoint answered {} in time: {}; is etcd running and "
                                    "reachable there? (etcdctl --endpoints=... endpoint health)",
                                    what, tried));
        }
        std::this_thread::sleep_for(std::min(backoff, left));
        backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
    }
}

StreamEnd EtcdHttp::stream(std::string_view path, const json::object& body, Clock::time_point deadline,
                           Clock::time_point connect_deadline, const std::function<bool(const json::object&)>& on_message,
                           const std::atomic<bool>* cancel, std::string_view what) {
    connect_deadline = std::min(connect_deadline, deadline);
    token(connect_deadline);
    const std::string text = json::serialize(body);
    const std::size_t n = config_.endpoints.size();
    std::vector<std::string> failures(n);
    auto backoff = std::chrono::milliseconds(25);
    bool reauthenticated = false;
    for (;;) {
        const std::size_t first = preferred_.load();
        for (std::size_t i = 0; i < n; ++i) {
            if (cancel != nullptr && cancel->load()) return StreamEnd::cancelled;
            if (Clock::now() >= deadline) return StreamEnd::deadline;
            const std::size_t e = (first + i) % n;
            const std::string stale = token_copy();
            Outcome out = attempt(e, path, text, deadline, true, &on_message, cancel);
            if (out.kind == Outcome::Kind::stream_end) {
                if (out.end == StreamEnd::broken) failures[e] = out.error;
                return out.end;
            }
            if (out.kind != Outcome::Kind::answered) {
                failures[e] = lowercase_first(out.error);
                continue;
            }
            const Reading r = read_answer(out.status, &out.body);
            if (r.verdict == Verdict::auth_expired && !reauthenticated && !config_.user.empty()) {
                reauthenticated = true;
                authenticate(stale, deadline);
                --i;
                continue;
            }
            if (r.verdict == Verdict::retry_maybe || r.verdict == Verdict::retry_unapplied ||
                r.verdict == Verdict::not_etcd) {
                failures[e] = r.message;
                continue;
            }
            if (r.verdict == Verdict::ok) return StreamEnd::broken;  // an empty 200: ended at once
            throw Error(r.verdict == Verdict::auth_expired ? Errc::permission_denied : errc_for(r),
                        fmt::format("etcd at {} refused {}: {}{}", config_.endpoints[e], what, r.message,
                                    advice_for(r)));
        }
        const std::string tried = tried_list(config_.endpoints, failures);
        // Time points, not the milliseconds left: with half a millisecond
        // to go the stream has not failed yet, and its deadline comes first.
        if (Clock::now() >= deadline) return StreamEnd::deadline;
        const auto left = left_until(connect_deadline);
        if (Clock::now() >= connect_deadline) {
            throw Error(Errc::unavailable,
                        fmt::format("etcd unavailable: no endpoint accepted {} in time: {}; is etcd running and "
                                    "reachable there? (etcdctl --endpoints=... endpoint health)",
                                    what, tried));
        }
        std::this_thread::sleep_for(std::min(backoff, left));
        backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
    }
}

}  // namespace cohort::etcd
