// The API-server double's pods in one namespace: objects of the real v1 Pod
// shape, a resourceVersion counter shared by every change, and the event
// history a watch replays from. History older than the last compaction is
// gone, as etcd's is, so a list or watch from before it is answered 410.
// Thread-safe: the server's thread and a test's thread both call it.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace cohort::k8s_double {

// An HTTP status and the body the real API server sends with it: the
// object, a list, or a `Status` for an error.
struct Answer {
    int status = 200;
    boost::json::value body;
};

// A `Status` object (kind Status, apiVersion v1) with the real reasons:
// NotFound, AlreadyExists, Gone, BadRequest, ...
boost::json::object status_object(int code, const std::string& reason, const std::string& message,
                                  const std::string& kind = "pods", const std::string& name = {});

struct WatchEvent {
    std::string type;  // ADDED, MODIFIED, DELETED
    boost::json::object object;
    uint64_t resource_version = 0;
};

// Label and field selectors as the API server parses them: `k=v`, `k==v`,
// `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`; fields only with =, ==
// and != on metadata.name, metadata.namespace and status.phase.
class Selector {
public:
    // Throws std::invalid_argument with the server's wording on bad syntax.
    static Selector labels(const std::string& text);
    static Selector fields(const std::string& text);
    bool matches(const boost::json::object& pod) const;

private:
    struct Term {
        std::string key;
        enum Op { eq, ne, exists, absent, in, notin } op = eq;
        std::vector<std::string> values;
    };
    bool on_fields_ = false;
    std::vector<Term> terms_;
};

// What a test makes a pod do; each sets `status` as the kubelet or the
// scheduler would.
enum class PodFate {
    running,           // scheduled on a node, container running, Ready
    succeeded,         // container terminated with exit code 0, reason Completed
    failed,            // terminated with the given exit code, reason Error
    oom_killed,        // terminated with 137, reason OOMKilled
    evicted,           // phase Failed, reason Evicted (the kubelet's node pressure)
    preempted,         // DisruptionTarget condition (PreemptionByScheduler), then Failed
    node_lost,         // the node went away: DisruptionTarget DeletionByTaintManager, Ready Unknown, reason NodeLost
    unschedulable,     // stays Pending: PodScheduled False, reason Unschedulable
    image_pull_error,  // stays Pending: waiting.reason ErrImagePull or ImagePullBackOff
};

class PodStore {
public:
    explicit PodStore(std::string ns = "default");

    const std::string& ns() const { return ns_; }

    // The API.
    Answer create(boost::json::value body);
    Answer get(const std::string& name) const;
    Answer remove(const std::string& name);
    // JSON merge patch (RFC 7386); a strategic merge patch is the same for
    // metadata maps such as labels and annotations, which is what clients patch.
    Answer patch(const std::string& name, const boost::json::value& patch);
    // A PodList; 410 when `resource_version` (not "0" or empty) is older than the history.
    Answer list(const Selector& labels, const Selector& fields) const;

    // Events after `resource_version` that match, or nullopt when history
    // no longer reaches back that far (410 Gone).
    std::optional<std::vector<WatchEvent>> events_since(uint64_t resource_version, const Selector& labels,
                                                        const Selector& fields) const;
    uint64_t resource_version() const;
    uint64_t oldest_resource_version() const;

    // For tests.
    bool set_fate(const std::string& name, PodFate fate, int exit_code = 1, std::string reason = {});
    std::vector<std::string> names() const;
    std::optional<boost::json::object> pod(const std::string& name) const;
    // Forgets the history: watches and lists from before now get 410.
    void compact();
    // Called (on the store's caller's thread) after every change; the id
    // removes it again.
    int on_change(std::function<void()> callback);
    void remove_on_change(int id);
    // Adds a node (capacity grows): every Pending pod that is Unschedulable
    // is scheduled and starts running.
    void add_node(const std::string& node);
    // Mutates a pod through `edit` and records a MODIFIED event.
    bool modify(const std::string& name, const std::function<void(boost::json::object&)>& edit);

private:
    void record(const std::string& type, boost::json::object& pod);  // bumps resourceVersion; needs mu_
    void notify();

    std::string ns_;
    mutable std::mutex mu_;
    uint64_t rv_ = 1000;
    uint64_t compacted_ = 1000;  // events at or below this are gone
    uint64_t next_uid_ = 1;
    std::map<std::string, boost::json::object> pods_;
    std::deque<WatchEvent> history_;
    std::map<int, std::function<void()>> callbacks_;
    int next_callback_ = 0;
};

// RFC 3339 time as the API writes it: 2026-11-26T15:04:05Z.
std::string now_rfc3339();

}  // namespace cohort::k8s_double
