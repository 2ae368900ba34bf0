// libcurl for the Kubernetes API: TLS from the cluster's CA (in memory), a
// bearer token or a client certificate, and a watch driven through a multi
// handle so that it notices `stop` within 100 ms even on a silent stream.
// The CA, certificate and key go to libcurl as blobs (CURLOPT_*_BLOB,
// libcurl 7.77 and later with OpenSSL): no secret is written to a file.
#include "elastic/kubernetes/api_client.hpp"

#include <cohort/error.hpp>

#include <curl/curl.h>
#include <fmt/format.h>
#include <boost/json/parse.hpp>

#include <cctype>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

#include <sys/socket.h>

namespace cohort::k8s {

namespace {

void global_init() {
    static std::once_flag once;
    std::call_once(once, [] {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
            throw Error(Errc::internal, "Kubernetes client: curl_global_init failed");
    });
}

// Workers started while a request is open must not inherit its socket.
curl_socket_t open_cloexec_socket(void*, curlsocktype, curl_sockaddr* address) {
    const int fd = ::socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
    return fd < 0 ? CURL_SOCKET_BAD : fd;
}

size_t append(char* data, size_t size, size_t count, void* user) {
    static_cast<std::string*>(user)->append(data, size * count);
    return size * count;
}

struct Easy {
    CURL* h = curl_easy_init();
    curl_slist* headers = nullptr;
    char error[CURL_ERROR_SIZE] = {};
    ~Easy() {
        curl_slist_free_all(headers);
        if (h != nullptr) curl_easy_cleanup(h);
    }
};

void blob(CURL* h, CURLoption option, const std::string& data) {
    curl_blob b{const_cast<char*>(data.data()), data.size(), CURL_BLOB_COPY};
    curl_easy_setopt(h, option, &b);
}

void setup(Easy& e, const KubernetesCluster& c, const std::string& token, std::string_view method,
           const std::string& url, const std::string& body, std::string_view content_type) {
    if (e.h == nullptr) throw Error(Errc::no_memory, "Kubernetes client: curl_easy_init failed");
    CURL* h = e.h;
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, open_cloexec_socket);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, e.error);
    e.headers = curl_slist_append(e.headers, "Accept: application/json");
    e.headers = curl_slist_append(e.headers, "User-Agent: cohort-run (KubernetesScheduler)");
    if (!token.empty()) e.headers = curl_slist_append(e.headers, ("Authorization: Bearer " + token).c_str());
    if (!body.empty()) e.headers = curl_slist_append(e.headers, fmt::format("Content-Type: {}", content_type).c_str());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, e.headers);
    if (!c.ca_pem.empty()) blob(h, CURLOPT_CAINFO_BLOB, c.ca_pem);
    if (!c.cert_pem.empty()) {
        blob(h, CURLOPT_SSLCERT_BLOB, c.cert_pem);
        curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
    }
    if (!c.key_pem.empty()) {
        blob(h, CURLOPT_SSLKEY_BLOB, c.key_pem);
        curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (c.insecure_skip_tls_verify) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (method == "GET") {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, std::string(method).c_str());
        if (!body.empty()) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
            curl_easy_setopt(h, CURLOPT_COPYPOSTFIELDS, body.c_str());
        }
    }
}

// Hands a 200 stream's lines on one by one; keeps any other answer whole.
struct LineSplitter {
    const std::function<void(std::string_view)>* on_line;
    CURL* h;
    std::string pending;
    std::string error_body;
    static size_t write(char* data, size_t size, size_t count, void* user) {
        auto* self = static_cast<LineSplitter*>(user);
        long status = 0;
        curl_easy_getinfo(self->h, CURLINFO_RESPONSE_CODE, &status);
        if (status != 200) {
            self->error_body.append(data, size * count);
            return size * count;
        }
        self->pending.append(data, size * count);
        std::size_t start = 0, nl;
        while ((nl = self->pending.find('\n', start)) != std::string::npos) {
            if (nl > start) (*self->on_line)(std::string_view(self->pending).substr(start, nl - start));
            start = nl + 1;
        }
        self->pending.erase(0, start);
        return size * count;
    }
};

// What to check after a TLS failure; empty for other failures. A
// certificate the server refuses shows up as an alert, during the
// handshake (TLS 1.2) or at the first read after it (TLS 1.3).
std::string tls_hint(CURLcode rc, const char* detail, const KubernetesCluster& c) {
    const std::string from = c.origin.empty() ? std::string("the cluster configuration") : c.origin;
    const std::string said = detail != nullptr ? detail : "";
    const bool alert = said.find("alert") != std::string::npos;
    switch (rc) {
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_ISSUER_ERROR:
            return c.ca_pem.empty()
                       ? fmt::format("the server's certificate is not signed by a CA this system trusts, and {} "
                                     "gives no certificate-authority(-data) for the cluster",
                                     from)
                       : fmt::format("the server's certificate is not signed by the CA that {} gives "
                                     "(certificate-authority(-data), or the service account's ca.crt), or does "
                                     "not name the server's host; is the configuration this cluster's?",
                                     from);
        case CURLE_SSL_CACERT_BADFILE:
            if (c.ca_pem.empty())
                return fmt::format("libcurl found no CA bundle on this system, and {} gives no "
                                   "certificate-authority(-data) for the cluster",
                                   from);
            return fmt::format("libcurl could not use the certificate-authority of {}", from);
        case CURLE_SSL_CERTPROBLEM:
            return fmt::format("libcurl could not use the client certificate or key of {}", from);
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
            if (rc != CURLE_SSL_CONNECT_ERROR && !alert) return {};
            return c.cert_pem.empty()
                       ? fmt::format("the server refused the TLS handshake; it may require a client certificate, "
                                     "which {} does not give (client-certificate(-data) and client-key(-data))",
                                     from)
                       : fmt::format("the server refused the TLS handshake or the client certificate of {} (is "
                                     "the certificate signed by the cluster's client CA, and still valid?)",
                                     from);
        default:
            return {};
    }
}

}  // namespace

std::string ApiClient::token() const {
    if (cluster_.token_file.empty()) return cluster_.token;
    std::lock_guard lock(token_mu_);
    const auto now = std::chrono::steady_clock::now();
    if (token_.empty() || now - token_read_ >= std::chrono::minutes(1)) {
        token_read_ = now;
        std::ifstream in(cluster_.token_file, std::ios::binary);
        std::ostringstream text;
        if (in) text << in.rdbuf();
        std::string t = text.str();
        while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
        token_ = !t.empty() ? t : token_.empty() ? cluster_.token : token_;
    }
    return token_;
}

ApiReply ApiClient::failed(int code, const char* detail, std::string what) const {
    ApiReply reply;
    const auto rc = static_cast<CURLcode>(code);
    const std::string hint = tls_hint(rc, detail, cluster_);
    reply.error = fmt::format("{}: {}", what, detail != nullptr && *detail != '\0' ? detail : curl_easy_strerror(rc));
    if (!hint.empty()) {
        reply.error += " (" + hint + ")";
        reply.tls_refused = true;
    }
    return reply;
}

ApiClient::ApiClient(KubernetesCluster cluster, std::chrono::milliseconds timeout)
    : cluster_(std::move(cluster)), timeout_(timeout) {
    global_init();
    if (cluster_.server.empty())
        throw Error(Errc::invalid_argument,
                    "KubernetesScheduler: no API server address (give a kubeconfig, or run in "
                    "a pod with a service account)");
}

ApiReply ApiClient::request(std::string_view method, const std::string& path, const std::string& body,
                            std::string_view content_type) const {
    Easy e;
    setup(e, cluster_, token(), method, cluster_.server + path, body, content_type);
    ApiReply reply;
    curl_easy_setopt(e.h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_.count()));
    curl_easy_setopt(e.h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(timeout_.count()));
    curl_easy_setopt(e.h, CURLOPT_WRITEFUNCTION, append);
    curl_easy_setopt(e.h, CURLOPT_WRITEDATA, &reply.body);
    const CURLcode rc = curl_easy_perform(e.h);
    if (rc != CURLE_OK) return failed(rc, e.error, fmt::format("{} {}{}", method, cluster_.server, path));
    curl_easy_getinfo(e.h, CURLINFO_RESPONSE_CODE, &reply.status);
    return reply;
}

ApiReply ApiClient::watch(const std::string& path, const std::function<void(std::string_view)>& on_line,
                          const std::atomic<bool>& stop) const {
    Easy e;
    setup(e, cluster_, token(), "GET", cluster_.server + path, {}, {});
    ApiReply reply;
    LineSplitter splitter{&on_line, e.h, {}, {}};
    curl_easy_setopt(e.h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(timeout_.count()));
    curl_easy_setopt(e.h, CURLOPT_WRITEFUNCTION, LineSplitter::write);
    curl_easy_setopt(e.h, CURLOPT_WRITEDATA, &splitter);
    CURLM* multi = curl_multi_init();
    if (multi == nullptr) throw Error(Errc::no_memory, "Kubernetes client: curl_multi_init failed");
    std::unique_ptr<CURLM, decltype(&curl_multi_cleanup)> guard(multi, curl_multi_cleanup);
    curl_multi_add_handle(multi, e.h);
    int running = 1;
    CURLcode result = CURLE_OK;
    while (running > 0 && !stop) {
        if (curl_multi_perform(multi, &running) != CURLM_OK) break;
        if (running > 0) curl_multi_poll(multi, nullptr, 0, 100, nullptr);
    }
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi, &left))
        if (m->msg == CURLMSG_DONE) result = m->data.result;
    curl_easy_getinfo(e.h, CURLINFO_RESPONSE_CODE, &reply.status);
    curl_multi_remove_handle(multi, e.h);
    if (stop) return reply;
    if (result != CURLE_OK) {
        const long status = reply.status;  // a 200 stream that broke keeps its status
        reply = failed(result, e.error, fmt::format("watch {}{}", cluster_.server, path));
        reply.status = status;
    } else if (reply.status != 200) {
        reply.body = splitter.error_body;
    }
    return reply;
}

std::string describe(const ApiReply& reply) {
    if (reply.status == 0) return reply.error;
    boost::system::error_code ec;
    const boost::json::value v = boost::json::parse(reply.body, ec);
    if (!ec && v.is_object()) {
        if (const auto* m = v.as_object().if_contains("message"); m && m->is_string())
            return fmt::format("HTTP {}: {}", reply.status, std::string(m->as_string()));
    }
    return fmt::format("HTTP {}: {}", reply.status, reply.body.substr(0, 200));
}

std::string query_escape(std::string_view value) {
    std::string out;
    for (unsigned char c : value) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            out += static_cast<char>(c);
        } else {
            out += fmt::format("%{:02X}", c);
        }
    }
    return out;
}

}  // namespace cohort::k8s
