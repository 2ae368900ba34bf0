// The job's pods as a stream of changes: list, then watch from the list's
// resourceVersion with bookmarks; on 410 Gone (an ERROR event or an HTTP
// 410) or a dropped stream, list again. Each list is handed on whole (a
// `synced` change) so that the reader can see what vanished meanwhile; the
// reader dedupes by uid and resourceVersion, since a re-list repeats what
// the watch already said. Runs on a thread of its own.
#pragma once

#include "elastic/kubernetes/api_client.hpp"

#include <boost/json/object.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cohort::k8s {

struct PodChange {
    enum Type { added, modified, deleted, synced } type = modified;
    boost::json::object pod;                            // added, modified, deleted
    std::vector<boost::json::object> pods;              // synced: every pod the list holds
    std::chrono::steady_clock::time_point listed_at{};  // synced: when the list was asked for
};

struct WatchCounts {
    uint64_t lists = 0, watches = 0, gone = 0, dropped = 0, bookmarks = 0;
};

class PodWatch {
public:
    PodWatch(const ApiClient& api, std::string label_selector);
    ~PodWatch();
    PodWatch(const PodWatch&) = delete;
    PodWatch& operator=(const PodWatch&) = delete;

    std::vector<PodChange> take();
    // Waits until the first list has come, a list was refused for TLS, or
    // `until`; true when the list has come.
    bool wait_synced(std::chrono::steady_clock::time_point until) const;
    // Why the last list failed, when TLS refused it (asking again will not
    // help); empty otherwise.
    std::string tls_refused() const;
    WatchCounts counts() const;
    // The last failure to list or watch, for messages; empty when healthy.
    std::string last_error() const;

private:
    void run();
    bool list(std::string& resource_version);
    void push(PodChange change);

    const ApiClient& api_;
    std::string base_;
    std::string selector_;
    std::atomic<bool> stop_{false};
    mutable std::mutex mu_;
    std::vector<PodChange> changes_;
    WatchCounts counts_;
    mutable std::condition_variable synced_cv_;
    std::string error_;
    std::string tls_refused_;
    std::thread thread_;
};

}  // namespace cohort::k8s
