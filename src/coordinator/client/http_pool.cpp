// libcurl under the coordinator client: one easy handle per exchange in
// flight, reused afterwards so its connection stays open.
#include "coordinator/client/http_pool.hpp"

#include "core/curl_setup.hpp"

#include <cohort/error.hpp>

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <string_view>
#include <cstdint>
#include <mutex>
#include <random>

#include <fmt/format.h>

#include <unistd.h>

namespace cohort::coord::client {

namespace {

size_t append_body(char* data, size_t size, size_t count, void* user) {
    static_cast<std::string*>(user)->append(data, size * count);
    return size * count;
}

// Keeps the X-Cohort-Leader header of the answer; libcurl hands over one
// header line at a time, "Name: value\r\n".
size_t read_header(char* data, size_t size, size_t count, void* user) {
    constexpr std::string_view kName = "x-cohort-leader:";
    const std::string_view line(data, size * count);
    if (line.size() > kName.size() &&
        std::equal(kName.begin(), kName.end(), line.begin(),
                   [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); })) {
        std::string_view value = line.substr(kName.size());
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
        while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) {
            value.remove_suffix(1);
        }
        *static_cast<std::string*>(user) = std::string(value.substr(0, 512));
    }
    return size * count;
}

struct HeaderList {
    curl_slist* list = nullptr;
    ~HeaderList() { curl_slist_free_all(list); }
    void add(const std::string& header) {
        curl_slist* next = curl_slist_append(list, header.c_str());
        if (next == nullptr) throw std::bad_alloc();
        list = next;
    }
};

}  // namespace

std::string percent_encode(std::string_view text) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(text.size());
    for (const char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if ((u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') || u == '-' || u == '.' ||
            u == '_' || u == '~') {
            out += c;
        } else {
            out += '%';
            out += kHex[u >> 4];
            out += kHex[u & 15];
        }
    }
    return out;
}

std::string new_idempotency_key() {
    // Seeded per thread from the OS: keys from different processes and
    // threads do not collide, which a shared seed could not promise. A
    // process forked after the thread drew keys (Python's multiprocessing,
    // a test) would go on with its parent's sequence and send the parent's
    // keys: each answered 422, or worse with the parent's first answer. So
    // a new process id means a new seed.
    struct Bits {
        pid_t pid = -1;
        std::mt19937_64 engine;
    };
    thread_local Bits bits;
    if (bits.pid != ::getpid()) {
        std::random_device device;
        std::seed_seq seed{device(), device(), device(), device(), device(), device(), device(), device()};
        bits.engine.seed(seed);
        bits.pid = ::getpid();
    }
    const uint64_t high = bits.engine();
    const uint64_t low = bits.engine();
    return fmt::format("{:016x}{:016x}", high, low);
}

HttpPool::HttpPool(std::string base_url, std::string token, HttpTls tls)
    : base_url_(std::move(base_url)), tls_(std::move(tls)) {
    detail::curl_global_setup("coordinator client");
    if (!token.empty()) authorization_ = "Authorization: Bearer " + token;
}

HttpPool::~HttpPool() {
    for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* HttpPool::take() {
    {
        std::lock_guard lock(mutex_);
        if (!idle_.empty()) {
            void* h = idle_.back();
            idle_.pop_back();
            return h;
        }
    }
    CURL* h = curl_easy_init();
    if (h == nullptr) throw Error(Errc::no_memory, "coordinator client: curl_easy_init failed");
    return h;
}

void HttpPool::give(void* handle) {
    std::lock_guard lock(mutex_);
    idle_.push_back(handle);
}

HttpReply HttpPool::perform(std::string_view method, const std::string& target, std::string_view body,
                            std::string_view content_type, std::chrono::milliseconds timeout,
                            std::string_view idempotency_key) {
    CURL* h = static_cast<CURL*>(take());
    // Back to the pool however this ends: the handle keeps its connection.
    struct Return {
        HttpPool* pool;
        CURL* h;
        ~Return() { pool->give(h); }
    } give_back{this, h};

    curl_easy_reset(h);  // keeps the open connections, forgets the options
    const std::string url = base_url_ + target;
    HttpReply reply;
    char error[CURL_ERROR_SIZE] = {};
    HeaderList headers;
    if (!authorization_.empty()) headers.add(authorization_);
    if (!content_type.empty()) headers.add("Content-Type: " + std::string(content_type));
    if (!idempotency_key.empty()) headers.add("Idempotency-Key: " + std::string(idempotency_key));
    headers.add("Expect:");  // no 100-continue round trip for PUT bodies

    const long timeout_ms = static_cast<long>(std::clamp<int64_t>(timeout.count(), 1, int64_t(24) * 3600 * 1000));
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    detail::curl_open_sockets_cloexec(h);
    curl_easy_setopt(h, CURLOPT_PROXY, "");  // the coordinator is reached directly
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, append_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &reply.body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, read_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &reply.leader);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.list);
    // The server is always verified (peer and host name); these only say
    // against what, and what this client offers.
    if (!tls_.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, tls_.ca_file.c_str());
    if (!tls_.cert_file.empty()) curl_easy_setopt(h, CURLOPT_SSLCERT, tls_.cert_file.c_str());
    if (!tls_.key_file.empty()) curl_easy_setopt(h, CURLOPT_SSLKEY, tls_.key_file.c_str());
    const std::string verb(method);
    if (verb == "GET") {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else if (verb == "POST" || verb == "PUT") {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
        if (verb == "PUT") curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
    } else {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, verb.c_str());
    }

    const CURLcode rc = curl_easy_perform(h);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
    if (rc != CURLE_OK) {
        std::string detail = error[0] != '\0' ? std::string(error) : std::string(curl_easy_strerror(rc));
        // A server that cannot be verified stays so: no retry helps.
        if (rc == CURLE_PEER_FAILED_VERIFICATION) {
            throw Error(Errc::permission_denied,
                        fmt::format("coordinator client: {} is not trusted: {} (curl error {}); give the CA that "
                                    "signed its certificate (tls_ca_file, $COHORT_COORDINATOR_CACERT)",
                                    base_url_, detail, static_cast<int>(rc)));
        }
        if (rc == CURLE_SSL_CACERT_BADFILE || rc == CURLE_SSL_CERTPROBLEM) {
            throw Error(Errc::invalid_argument,
                        fmt::format("coordinator client: the TLS files for {} cannot be used: {} (curl error {})",
                                    base_url_, detail, static_cast<int>(rc)));
        }
        // A TLS alert from the server (certificate required, unknown CA,
        // bad certificate) is its verdict on this client: the same on
        // every try.
        if ((rc == CURLE_RECV_ERROR || rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_SEND_ERROR) &&
            detail.find(" alert ") != std::string::npos) {
            throw Error(Errc::permission_denied,
                        fmt::format("coordinator client: {} refused this client's TLS: {} (curl error {}); it may "
                                    "want a client certificate signed by its client CA (tls_cert_file and "
                                    "tls_key_file, $COHORT_COORDINATOR_CERT and $COHORT_COORDINATOR_KEY)",
                                    base_url_, detail, static_cast<int>(rc)));
        }
        throw TransportError(fmt::format("{} (curl error {})", detail, static_cast<int>(rc)),
                             rc == CURLE_OPERATION_TIMEDOUT);
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &reply.status);
    return reply;
}

}  // namespace cohort::coord::client
