// Watches: a key's or a prefix's changes as etcd streams them, from a given
// revision on, so a reader that first reads the store at revision R and then
// watches from R+1 misses nothing in between.
#pragma once

#include "etcd/client.hpp"

#include <cohort/error.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cohort::etcd {

struct WatchRequest {
    std::string key;
    std::string range_end;    // "" watches `key` alone; prefix_end(key) its prefix
    int64_t start_revision = 0;  // 0: from now
    bool prev_kv = false;        // events carry the value before the change
};

inline WatchRequest watch_prefix(std::string prefix, int64_t start_revision) {
    WatchRequest r;
    r.range_end = prefix_end(prefix);
    r.key = std::move(prefix);
    r.start_revision = start_revision;
    return r;
}

// One message of the stream: the events of one or more revisions, or the
// news that the watch was cancelled because `start_revision` has been
// compacted away (then the reader must read the store again).
struct WatchBatch {
    int64_t revision = 0;  // header.revision: the store's revision when sent
    std::vector<Event> events;
    bool created = false;
    int64_t compact_revision = 0;  // > 0: cancelled, history before it is gone
};

// Runs one watch until `on_batch` returns false (StreamEnd::stopped), the
// deadline passes, `cancel` becomes true, or the stream breaks (a member
// died: watch again from the revision after the last one seen). Throws
// Error(unavailable) when no endpoint accepts the watch before the deadline.
// `connect_deadline` (at the latest `deadline`) bounds reaching etcd.
StreamEnd watch(EtcdClient& client, const WatchRequest& request, Clock::time_point deadline,
                Clock::time_point connect_deadline, const std::function<bool(const WatchBatch&)>& on_batch,
                const std::atomic<bool>* cancel = nullptr);

// A watch kept open on a thread of its own until destroyed: it resumes
// after each break from the revision after the last event delivered, so
// `on_batch` sees every change once and in order. A compacted start is
// delivered as a batch with compact_revision set, and the watch goes on from
// there. `on_error` hears of each failure to reach etcd (it keeps trying).
class WatchStream {
public:
    WatchStream(std::shared_ptr<EtcdClient> client, WatchRequest request,
                std::function<void(const WatchBatch&)> on_batch, std::function<void(const Error&)> on_error = {});
    WatchStream(const WatchStream&) = delete;
    WatchStream& operator=(const WatchStream&) = delete;
    ~WatchStream();  // within about a second

private:
    void run();

    std::shared_ptr<EtcdClient> client_;
    WatchRequest request_;
    std::function<void(const WatchBatch&)> on_batch_;
    std::function<void(const Error&)> on_error_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace cohort::etcd
