// List-then-watch, as client-go's reflector does it.
#include "elastic/kubernetes/pod_watch.hpp"

#include <boost/json/parse.hpp>

#include <algorithm>
#include <chrono>

namespace cohort::k8s {

namespace json = boost::json;

namespace {

std::string resource_version(const json::object& o) {
    const json::value* meta = o.if_contains("metadata");
    const json::value* rv = meta && meta->is_object() ? meta->as_object().if_contains("resourceVersion") : nullptr;
    return rv && rv->is_string() ? std::string(rv->as_string()) : std::string();
}

}  // namespace

PodWatch::PodWatch(const ApiClient& api, std::string label_selector)
    : api_(api),
      base_("/api/v1/namespaces/" + query_escape(api.cluster().ns) + "/pods"),
      selector_(query_escape(label_selector)) {
    thread_ = std::thread([this] { run(); });
}

PodWatch::~PodWatch() {
    stop_ = true;
    thread_.join();
}

std::vector<PodChange> PodWatch::take() {
    std::lock_guard lock(mu_);
    return std::exchange(changes_, {});
}

WatchCounts PodWatch::counts() const {
    std::lock_guard lock(mu_);
    return counts_;
}

std::string PodWatch::last_error() const {
    std::lock_guard lock(mu_);
    return error_;
}

void PodWatch::push(PodChange change) {
    std::lock_guard lock(mu_);
    changes_.push_back(std::move(change));
}

bool PodWatch::wait_synced(std::chrono::steady_clock::time_point until) const {
    std::unique_lock lock(mu_);
    synced_cv_.wait_until(lock, until, [this] { return counts_.lists > 0 || !tls_refused_.empty(); });
    return counts_.lists > 0;
}

std::string PodWatch::tls_refused() const {
    std::lock_guard lock(mu_);
    return tls_refused_;
}

bool PodWatch::list(std::string& rv) {
    const auto asked = std::chrono::steady_clock::now();
    const ApiReply reply = api_.request("GET", base_ + "?labelSelector=" + selector_);
    json::error_code ec;
    const json::value v = reply.status == 200 ? json::parse(reply.body, ec) : json::value();
    if (reply.status != 200 || ec || !v.is_object() || !v.as_object().contains("items") ||
        !v.as_object().at("items").is_array()) {
        std::lock_guard lock(mu_);
        error_ =
            "listing pods: " + (reply.status == 200 ? std::string("the answer is not a PodList") : describe(reply));
        if (reply.tls_refused) {
            tls_refused_ = error_;
            synced_cv_.notify_all();
        }
        return false;
    }
    PodChange sync;
    sync.type = PodChange::synced;
    sync.listed_at = asked;
    for (const json::value& item : v.as_object().at("items").as_array())
        if (item.is_object()) sync.pods.push_back(item.as_object());
    rv = resource_version(v.as_object());
    std::lock_guard lock(mu_);
    ++counts_.lists;
    error_.clear();
    tls_refused_.clear();
    changes_.push_back(std::move(sync));
    synced_cv_.notify_all();
    return true;
}

void PodWatch::run() {
    auto backoff = std::chrono::milliseconds(50);
    const auto pause = [&] {
        const auto until = std::chrono::steady_clock::now() + backoff;
        while (!stop_ && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
    };
    while (!stop_) {
        std::string rv;
        if (!list(rv)) {
            pause();
            continue;
        }
        backoff = std::chrono::milliseconds(50);
        // Watch until the history is gone or the stream breaks.
        while (!stop_) {
            bool gone = false;
            const auto on_line = [&](std::string_view line) {
                json::error_code ec;
                const json::value v = json::parse(line, ec);
                if (ec || !v.is_object()) return;
                const json::object& e = v.as_object();
                const json::value* type = e.if_contains("type");
                const json::value* object = e.if_contains("object");
                if (type == nullptr || !type->is_string() || object == nullptr || !object->is_object()) return;
                const std::string t(type->as_string());
                const json::object& o = object->as_object();
                if (t == "ERROR") {
                    // 410 Expired/Gone, or anything else: start again from a list.
                    std::lock_guard lock(mu_);
                    ++counts_.gone;
                    const json::value* m = o.if_contains("message");
                    error_ =
                        "watch: " + (m && m->is_string() ? std::string(m->as_string()) : std::string("ERROR event"));
                    gone = true;
                    return;
                }
                if (gone) return;
                if (const std::string next = resource_version(o); !next.empty()) rv = next;
                if (t == "BOOKMARK") {
                    std::lock_guard lock(mu_);
                    ++counts_.bookmarks;
                    return;
                }
                PodChange c;
                c.type = t == "ADDED" ? PodChange::added : t == "DELETED" ? PodChange::deleted : PodChange::modified;
                c.pod = o;
                push(std::move(c));
            };
            {
                std::lock_guard lock(mu_);
                ++counts_.watches;
            }
            const ApiReply reply = api_.watch(base_ +
                                                  "?watch=true&allowWatchBookmarks=true&timeoutSeconds=300"
                                                  "&labelSelector=" +
                                                  selector_ + "&resourceVersion=" + rv,
                                              on_line, stop_);
            if (stop_) return;
            if (gone || reply.status == 410) {
                if (reply.status == 410) {
                    std::lock_guard lock(mu_);
                    ++counts_.gone;
                }
                break;
            }
            if (reply.status == 200 && reply.error.empty()) continue;  // the server's timeout: watch on from rv
            {
                std::lock_guard lock(mu_);
                ++counts_.dropped;
                error_ = "watch: " + describe(reply);
            }
            pause();
            break;
        }
    }
}

}  // namespace cohort::k8s
