// GpuProbe: choosing a backend, and bounding every query. The backend runs on
// a worker thread the probe owns; the caller waits for it at most the
// deadline, and a query that never returns strands only that thread, which
// keeps what it touches alive through a shared_ptr.
#include <cohort/error.hpp>
#include <cohort/gpu_probe.hpp>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include <fmt/format.h>

namespace cohort {

GpuBackend::~GpuBackend() = default;

namespace {

using SteadyClock = std::chrono::steady_clock;

// How long past the deadline a caller waits, for a result that is on its way.
constexpr auto kSlack = std::chrono::milliseconds(50);
// Deadlines past a day are mistakes, and would overflow steady_clock maths.
constexpr double kMaxDeadline = 86400;

std::string seconds_text(double s) { return fmt::format("{:g}s", s); }

double seconds_since(SteadyClock::time_point t) {
    return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

SteadyClock::duration to_duration(double seconds) {
    return std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(seconds));
}

// What "auto" falls back to: no GPUs, samples that say backend "none".
class NoGpuBackend final : public GpuBackend {
public:
    std::string name() const override { return "none"; }
    std::vector<GpuReading> read(double /*deadline_seconds*/) override { return {}; }
};

struct PendingXid {
    uint32_t gpu = 0;
    XidEvent event;
};

// Everything the worker thread touches. Shared with the worker so that a
// worker stuck in read() can outlive the probe: the last owner frees it.
struct QueryState {
    std::mutex mutex;
    std::condition_variable wake_worker;
    std::condition_variable result_ready;
    std::unique_ptr<GpuBackend> backend;
    double deadline_seconds = 0;
    bool stop = false;
    // Queries are numbered; one is in flight while requested > completed.
    uint64_t requested = 0;
    uint64_t completed = 0;
    SteadyClock::time_point started;
    bool abandoned = false;  // every caller of the query in flight gave up on it
    // The outcome of query `completed`.
    bool result_ok = false;
    std::vector<GpuReading> result;
    std::string result_error;
    double result_latency = 0;
    // The latest good readings, without Xid events (a stale sample must not
    // report them twice).
    std::vector<GpuReading> last_good;
    // Xid events of a late result that no caller saw; the next sample has them.
    std::vector<PendingXid> unseen_xids;
};

void run_worker(std::shared_ptr<QueryState> state) {
    QueryState& s = *state;
    std::unique_lock lock(s.mutex);
    for (;;) {
        s.wake_worker.wait(lock, [&] { return s.stop || s.requested > s.completed; });
        if (s.stop) return;
        const uint64_t id = s.requested;
        lock.unlock();
        const auto begin = SteadyClock::now();
        bool ok = false;
        std::vector<GpuReading> readings;
        std::string error;
        try {
            readings = s.backend->read(s.deadline_seconds);
            ok = true;
        } catch (const std::exception& e) {
            error = *e.what() != '\0' ? e.what() : "the backend failed without saying why";
        } catch (...) {
            error = "the backend threw something that is not an exception";
        }
        const double latency = seconds_since(begin);
        lock.lock();
        s.completed = id;
        s.result_ok = ok;
        s.result_error = std::move(error);
        s.result_latency = latency;
        if (ok) {
            s.last_good = readings;
            for (GpuReading& gpu : s.last_good) {
                if (s.abandoned) {
                    for (XidEvent& x : gpu.xid_events) s.unseen_xids.push_back({gpu.index, std::move(x)});
                }
                gpu.xid_events.clear();
            }
        }
        s.result = std::move(readings);
        s.result_ready.notify_all();
    }
}

using Opener = std::unique_ptr<GpuBackend> (*)(const ProbeOptions&);

// Opens a backend on a thread of its own: loading a driver library or a first
// query can hang as surely as a sample can. Opening may run a query or two
// under the deadline itself, so the bound is generous; it only catches a call
// with no deadline of its own (a wedged nvmlInit).
std::unique_ptr<GpuBackend> open_bounded(std::string_view name, Opener opener, const ProbeOptions& options) {
    struct Opening {
        std::mutex mutex;
        std::condition_variable done_cv;
        bool done = false;
        std::unique_ptr<GpuBackend> backend;
        std::exception_ptr error;
    };
    auto opening = std::make_shared<Opening>();
    std::thread([opening, opener, options] {
        std::unique_ptr<GpuBackend> backend;
        std::exception_ptr error;
        try {
            backend = opener(options);
        } catch (...) {
            error = std::current_exception();
        }
        std::lock_guard lock(opening->mutex);
        opening->backend = std::move(backend);
        opening->error = error;
        opening->done = true;
        opening->done_cv.notify_all();
    }).detach();
    const double bound = 2 * options.deadline_seconds + 1;
    std::unique_lock lock(opening->mutex);
    if (!opening->done_cv.wait_for(lock, to_duration(bound), [&] { return opening->done; }))
        throw Error(Errc::unavailable, fmt::format("{} did not open within {}", name, seconds_text(bound)));
    if (opening->error) std::rethrow_exception(opening->error);
    return std::move(opening->backend);
}

}  // namespace

struct GpuProbe::Impl {
    ProbeOptions options;
    std::string name;
    std::vector<BackendChoice> selection;
    std::shared_ptr<QueryState> state;
    std::thread worker;

    ~Impl() {
        if (!worker.joinable()) return;  // the constructor failed before starting it
        bool in_flight = false;
        {
            std::lock_guard lock(state->mutex);
            state->stop = true;
            in_flight = state->requested > state->completed;
        }
        state->wake_worker.notify_all();
        // An idle worker exits at once; a busy one may never return, so it
        // is left to finish (or not) on its own, owning the shared state.
        if (in_flight) worker.detach();
        else worker.join();
    }

    double now() const {
        if (options.clock) return options.clock();
        return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    }
};

GpuProbe::GpuProbe(std::unique_ptr<GpuBackend> backend, ProbeOptions options) {
    if (!backend) throw Error(Errc::invalid_argument, "GpuProbe needs a backend, got none");
    const double deadline = options.deadline_seconds;
    if (!(deadline > 0) || deadline > kMaxDeadline) {
        throw Error(Errc::invalid_argument, fmt::format("deadline_seconds must be more than 0 and at most {:g}, got {}",
                                                        kMaxDeadline, deadline));
    }
    auto impl = std::make_shared<Impl>();
    impl->name = backend->name();
    impl->selection = {BackendChoice{impl->name, true, {}}};
    impl->state = std::make_shared<QueryState>();
    impl->state->backend = std::move(backend);
    impl->state->deadline_seconds = deadline;
    impl->options = std::move(options);
    impl->worker = std::thread(run_worker, impl->state);
    impl_ = std::move(impl);
}

GpuProbe::GpuProbe(GpuProbe&&) noexcept = default;
GpuProbe& GpuProbe::operator=(GpuProbe&&) noexcept = default;
GpuProbe::~GpuProbe() = default;

GpuProbe GpuProbe::open(std::string_view spec, ProbeOptions options) {
    std::vector<BackendChoice> selection;
    std::unique_ptr<GpuBackend> backend;
    if (spec == "auto") {
        const std::pair<std::string_view, Opener> candidates[] = {{"nvml", open_nvml_backend},
                                                                  {"nvidia-smi", open_smi_backend}};
        for (const auto& [name, opener] : candidates) {
            try {
                backend = open_bounded(name, opener, options);
                selection.push_back({std::string(name), true, {}});
                break;
            } catch (const std::exception& e) {
                selection.push_back({std::string(name), false, e.what()});
            }
        }
        if (!backend) {
            backend = std::make_unique<NoGpuBackend>();
            selection.push_back({"none", true, {}});
        }
    } else if (spec == "nvml") {
        backend = open_bounded("nvml", open_nvml_backend, options);
        selection.push_back({"nvml", true, {}});
    } else if (spec == "smi" || spec == "nvidia-smi") {
        backend = open_bounded("nvidia-smi", open_smi_backend, options);
        selection.push_back({"nvidia-smi", true, {}});
    } else if (spec == "none") {
        backend = std::make_unique<NoGpuBackend>();
        selection.push_back({"none", true, {}});
    } else if (spec.starts_with("file:")) {
        const std::string_view path = spec.substr(5);
        if (path.empty()) throw Error(Errc::invalid_argument, "GPU backend 'file:' needs a path: file:PATH");
        backend = open_simulated_backend(std::filesystem::path(path), options);
        selection.push_back({backend->name(), true, {}});
    } else {
        throw Error(Errc::invalid_argument,
                    fmt::format("unknown GPU backend '{}' (expected auto, nvml, smi, file:PATH or none)", spec));
    }
    GpuProbe probe(std::move(backend), std::move(options));
    probe.impl_->selection = std::move(selection);
    return probe;
}

GpuSample GpuProbe::sample() {
    if (!impl_) throw Error(Errc::invalid_argument, "sample() on a GpuProbe that was moved from");
    Impl& impl = *impl_;
    QueryState& s = *impl.state;
    const auto begin = SteadyClock::now();
    GpuSample out;
    out.backend = impl.name;
    auto stale = [&](ProbeHealth health, std::string error) {
        out.health = health;
        out.stale = true;
        out.error = std::move(error);
        out.gpus = s.last_good;
        out.latency_seconds = seconds_since(begin);
    };

    std::unique_lock lock(s.mutex);
    if (s.requested > s.completed && s.abandoned) {
        // Still stuck in a query nobody waits for: queueing another behind
        // it would only pile up work, so answer at once.
        stale(ProbeHealth::unresponsive,
              fmt::format("{} did not answer within {} (its query started {:.1f}s ago is still running)", impl.name,
                          seconds_text(s.deadline_seconds), seconds_since(s.started)));
    } else {
        // Callers that arrive while a query is in flight share its result.
        if (s.requested == s.completed) {
            ++s.requested;
            s.started = SteadyClock::now();
            s.abandoned = false;
            s.wake_worker.notify_one();
        }
        const uint64_t id = s.requested;
        const auto until = s.started + to_duration(s.deadline_seconds) + kSlack;
        if (s.result_ready.wait_until(lock, until, [&] { return s.completed >= id; })) {
            if (s.result_ok) {
                out.gpus = s.result;
                out.latency_seconds = s.result_latency;
            } else {
                stale(ProbeHealth::failed, s.result_error);
            }
        } else {
            s.abandoned = true;
            stale(ProbeHealth::unresponsive,
                  fmt::format("{} did not answer within {}", impl.name, seconds_text(s.deadline_seconds)));
        }
    }
    for (PendingXid& pending : s.unseen_xids) {
        for (GpuReading& gpu : out.gpus) {
            if (gpu.index == pending.gpu) gpu.xid_events.push_back(std::move(pending.event));
        }
    }
    s.unseen_xids.clear();
    lock.unlock();
    out.time = impl.now();
    return out;
}

std::string GpuProbe::backend() const {
    if (!impl_) throw Error(Errc::invalid_argument, "backend() on a GpuProbe that was moved from");
    return impl_->name;
}

const std::vector<BackendChoice>& GpuProbe::selection() const {
    if (!impl_) throw Error(Errc::invalid_argument, "selection() on a GpuProbe that was moved from");
    return impl_->selection;
}

}  // namespace cohort
