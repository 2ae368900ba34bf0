// libcurl for the Kubernetes API: TLS from the cluster's CA (in memory), a
// bearer token or a client certificate, and a watch driven through a multi
// handle so that it notices `stop` within 100 ms even on a silent stream.
#include "elastic/kubernetes/api_client.hpp"

#include <cohort/error.hpp>

#include <curl/curl.h>
#include <fmt/format.h>
#include <boost/json/parse.hpp>

#include <cctype>
#include <memory>
#include <mutex>

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

void setup(Easy& e, const KubernetesCluster& c, std::string_view method, const std::string& url,
           const std::string& body, std::string_view content_type) {
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
    if (!c.token.empty()) e.headers = curl_slist_append(e.headers, ("Authorization: Bearer " + c.token).c_str());
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

}  // namespace

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
    setup(e, cluster_, method, cluster_.server + path, body, content_type);
    ApiReply reply;
    curl_easy_setopt(e.h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_.count()));
    curl_easy_setopt(e.h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(timeout_.count()));
    curl_easy_setopt(e.h, CURLOPT_WRITEFUNCTION, append);
    curl_easy_setopt(e.h, CURLOPT_WRITEDATA, &reply.body);
    const CURLcode rc = curl_easy_perform(e.h);
    if (rc != CURLE_OK) {
        reply.error =
            fmt::format("{} {}{}: {}", method, cluster_.server, path, e.error[0] ? e.error : curl_easy_strerror(rc));
        reply.body.clear();
        return reply;
    }
    curl_easy_getinfo(e.h, CURLINFO_RESPONSE_CODE, &reply.status);
    return reply;
}

ApiReply ApiClient::watch(const std::string& path, const std::function<void(std::string_view)>& on_line,
                          const std::atomic<bool>& stop) const {
    Easy e;
    setup(e, cluster_, "GET", cluster_.server + path, {}, {});
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
        reply.error =
            fmt::format("watch {}{}: {}", cluster_.server, path, e.error[0] ? e.error : curl_easy_strerror(result));
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
