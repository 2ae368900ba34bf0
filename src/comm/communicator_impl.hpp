// The state behind a Communicator, shared by its files: set-up
// (bootstrap.cpp), operations (communicator.cpp) and the progress thread
// that runs asynchronous ones (progress.cpp).
#pragma once

#include "comm/engine.hpp"
#include "comm/shm/group.hpp"
#include "comm/transport/address.hpp"
#include "comm/work_state.hpp"

#include <cohort/communicator.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace cohort {

// What an AbortHandle reaches the engine through: the Impl detaches it
// before the engine goes, so a handle that outlives the communicator finds
// no engine.
struct Communicator::AbortHandle::Signal {
    std::mutex mutex;
    comm::Engine* engine = nullptr;  // guarded by mutex
};

struct Communicator::Impl {
    explicit Impl(const CommOptions& options);
    ~Impl();

    // Runs `op` now on this thread, or, once asynchronous operations are in
    // use, after them on the progress thread (operations keep their order).
    void execute(const char* what, std::function<void()> op);
    Work submit(const char* what, std::function<void()> op);
    void close();

    std::chrono::milliseconds timeout_of(const CallOptions& call) const {
        return call.timeout.count() > 0 ? call.timeout : options.timeout;
    }
    // Opens operation number ++seq on the engine.
    void begin(comm::OpSignature op, const CallOptions& call);
    Algorithm resolve(Algorithm requested, std::size_t bytes, const CommTuning& tuning) const;
    CommTuning current_tuning() const {
        std::lock_guard lock(tuning_mutex);
        return tuning;
    }

    CommOptions options;
    std::shared_ptr<Store> store;  // kept: rank 0 may be hosting it
    std::shared_ptr<Store> scoped;  // this communicator's own keys (Communicator::store)
    mutable std::mutex tuning_mutex;
    CommTuning tuning;  // guarded by tuning_mutex: what the next operation uses
    std::vector<std::string> hosts;
    bool multi_rank_host = false;  // some host runs more than one rank
    std::size_t host_count = 1;
    std::vector<Transport> transports;
    std::vector<std::string> direct_unavailable;  // by rank: why a peer reached over TCP is not copied from directly
    std::string tls_negotiated;  // "TLSv1.3 TLS_AES_256_GCM_SHA384" under TLS, else ""
    comm::ListenAddress listening;  // where this rank listens, and why there (port 0: alone)
    // This host's shared memory (null without), and why not when wanted.
    std::unique_ptr<comm::shm::Group> shm;
    std::string shm_unavailable;
    bool shm_everyone = false;  // the segment holds every rank of the communicator
    // Every rank of the segment also copies directly from every other, as
    // they all know alike (shm::Joined::direct_everywhere).
    bool shm_direct_everywhere = false;
    std::unique_ptr<comm::Engine> engine;
    std::shared_ptr<AbortHandle::Signal> abort_signal = std::make_shared<AbortHandle::Signal>();
    uint64_t seq = 0;
    std::mutex run_mutex;  // one operation at a time on the engine

    struct Task {
        std::function<void()> op;
        std::shared_ptr<Work::State> state;
    };
    std::mutex queue_mutex;
    std::condition_variable queue_cv;
    std::deque<Task> queue;
    std::thread progress;
    bool progress_started = false;
    bool stopping = false;
    bool closed = false;
};

}  // namespace cohort
