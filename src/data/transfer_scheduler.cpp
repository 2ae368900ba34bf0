// TransferScheduler: one dispatcher thread decides (policy, order, holds,
// prefetch depth) and a pool of I/O threads reads. The dispatcher starts a
// transfer only when an I/O thread is free, so the order is decided as late
// as it can be; the policy is asked outside the lock (a GpuMonitor may take
// a sample, bounded by its probe's deadline).
#include "data/file_range.hpp"
#include "data/pending_transfer.hpp"
#include "data/verdict.hpp"

#include <cohort/error.hpp>
#include <cohort/transfers.hpp>
#include <cohort/workloads.hpp>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

namespace cohort {

namespace {

using data::Clock;
using data::Pending;
using data::seconds;
using data::Values;

// How long a prefetch transfer waits before the policy is asked again when
// the prefetch depth is 0 (a reduce_prefetch factor of 0).
constexpr auto kRecheck = std::chrono::milliseconds(100);
// How often the registry is pruned while transfers wait.
constexpr auto kPruneEvery = std::chrono::milliseconds(500);

}  // namespace

struct TransferScheduler::Impl {
    TransferOptions options;
    Clock::time_point started = Clock::now();

    mutable std::mutex mutex;
    std::condition_variable dispatcher_wake, worker_wake;
    bool stopping = false;
    uint64_t next_seq = 0;
    std::vector<std::unique_ptr<Pending>> queue;
    std::deque<std::unique_ptr<Pending>> ready;  // dispatched, for an I/O thread
    std::map<std::string, Pending*, std::less<>> running;
    std::set<std::string, std::less<>> active;  // ids queued, ready or running
    std::deque<std::pair<std::string, std::vector<TransferDecision>>> finished;
    std::size_t busy = 0, prefetch_busy = 0;  // dispatched and not done
    double factor = 1.0;
    std::optional<PolicyAction> factor_by;  // the reduce_prefetch action behind `factor`
    TransferStats counts;
    Clock::time_point next_prune = Clock::now();

    std::thread dispatcher;
    std::vector<std::thread> workers;

    std::size_t depth() const {
        if (factor <= 0) return 0;
        // Clamped: a factor may be above 1, and the cast of a huge double is undefined.
        const double d = std::min(std::floor(double(options.prefetch_depth) * factor), 1e9);
        return std::max<std::size_t>(1, static_cast<std::size_t>(d));
    }

    void count_event(const PolicyAction& action) {
        if (action.category == "memory") ++counts.memory_pressure_events;
        if (action.category == "thermal") ++counts.temperature_events;
    }

    // The result's last fields, the deadline's verdict, the counters.
    void finalize(Pending& p, Clock::time_point now) {
        TransferResult& r = p.result;
        r.id = p.request.id;
        r.seconds = seconds(now - p.submitted);
        if (p.request.deadline && now > *p.request.deadline) {
            r.missed_deadline = true;
            ++counts.misses;
            p.record(now, "scheduler", "deadline", {{"late_seconds", seconds(now - *p.request.deadline)}},
                     "finished after its deadline: counted as a miss");
        }
        if (r.code == Errc::ok) {
            ++counts.completed;
            counts.bytes += r.bytes;
            if (p.stage) ++counts.staged;
        }
    }

    void complete(std::unique_ptr<Pending> p) {
        active.erase(p->request.id);
        finished.emplace_back(p->request.id, p->result.decisions);
        while (finished.size() > options.explain_history) finished.pop_front();
        std::promise<TransferResult> promise = std::move(p->promise);
        promise.set_value(std::move(p->result));
    }

    // Drops a queued transfer with an error (shutdown, ended workload).
    void drop(std::size_t index, Errc code, std::string why, Clock::time_point now) {
        std::unique_ptr<Pending> p = std::move(queue[index]);
        queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(index));
        p->result.code = code;
        p->result.error = std::move(why);
        ++counts.dropped;
        finalize(*p, now);
        complete(std::move(p));
    }

    bool eligible(const Pending& p, Clock::time_point now) const {
        if (p.hold_until > now) return false;
        if (!p.request.prefetch) return true;
        // With no prefetch running, one may be asked about even at depth 0,
        // so that the factor is learnt again.
        return prefetch_busy == 0 || prefetch_busy < depth();
    }

    std::optional<std::size_t> pick(Clock::time_point now) const {
        std::optional<std::size_t> best;
        double best_value = 0;
        for (std::size_t i = 0; i < queue.size(); ++i) {
            if (!eligible(*queue[i], now)) continue;
            const double value = queue[i]->effective(now, options.aging_per_second);
            if (!best || value > best_value || (value == best_value && queue[i]->seq < queue[*best]->seq)) {
                best = i;
                best_value = value;
            }
        }
        return best;
    }

    // A boost changes the order only while a transfer waits, so it is
    // applied when the transfer is queued and again when it is started.
    void apply_boost(Pending& p, const data::Verdict& v, Clock::time_point now) {
        if (v.boost != p.boost && (v.boost_by != nullptr || p.boost != 0)) {
            const std::string rule = v.boost_by ? v.boost_by->rule : "scheduler";
            p.record(now, rule, "prioritize", v.boost_by ? v.boost_by->values : Values{},
                     fmt::format("priority {} -> {} (boost {})", int64_t{p.base} + p.boost, int64_t{p.base} + v.boost,
                                 v.boost));
            if (v.boost_by) count_event(*v.boost_by);
            if (!p.boosted && v.boost > 0) ++counts.prioritized;
            p.boosted = p.boosted || v.boost > 0;
            p.boost = v.boost;
        }
    }

    // Records why a prefetch transfer waits, once per depth it waits for.
    void note_prefetch_wait(Pending& p, Clock::time_point now) {
        const std::size_t d = depth();
        if (p.waited_for_depth == d) return;
        p.waited_for_depth = d;
        ++counts.prefetch_waits;
        Values values = factor_by ? factor_by->values : Values{};
        values.emplace_back("factor", factor);
        values.emplace_back("prefetch_running", double(prefetch_busy));
        p.record(now, factor_by ? factor_by->rule : "scheduler", "reduce_prefetch", std::move(values),
                 fmt::format("prefetch depth {} x {:g} = {}, {} running: waits", options.prefetch_depth, factor, d,
                             prefetch_busy));
        if (factor_by) count_event(*factor_by);
    }

    // Applies the verdict; true when the transfer may start now.
    bool apply(Pending& p, const data::Verdict& v, Clock::time_point now) {
        factor = v.factor;
        if (v.factor_by)
            factor_by = *v.factor_by;
        else
            factor_by.reset();
        apply_boost(p, v, now);
        if (v.delay_by != nullptr) {
            const auto hold =
                std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(v.delay_seconds));
            p.hold_until = now + hold;
            p.record(now, v.delay_by->rule, "delay_transfer", v.delay_by->values,
                     fmt::format("held for {:g} s", v.delay_seconds), v.delay_seconds);
            count_event(*v.delay_by);
            if (!p.held) ++counts.delayed;
            p.held = true;
            counts.total_delay_seconds += v.delay_seconds;
            return false;
        }
        if (p.request.prefetch && prefetch_busy >= depth()) {
            if (depth() == 0) p.hold_until = now + kRecheck;
            note_prefetch_wait(p, now);
            return false;
        }
        if (v.stage_by != nullptr && !p.stage) {
            if (options.staging_dir.empty()) {
                p.record(now, v.stage_by->rule, "stage_transfer", v.stage_by->values,
                         "not staged: no staging_dir is configured; read into the caller's buffer");
            } else {
                p.stage = true;
                p.record(now, v.stage_by->rule, "stage_transfer", v.stage_by->values,
                         fmt::format("staged to {} instead of the caller's buffer", options.staging_dir.string()));
                count_event(*v.stage_by);
            }
        }
        return true;
    }

    void dispatch(std::size_t index, Clock::time_point now) {
        std::unique_ptr<Pending> p = std::move(queue[index]);
        queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(index));
        std::size_t overtaken = 0;
        for (const auto& other : queue)
            if (other->seq < p->seq) ++overtaken;
        p->record(now, "scheduler", "dispatch",
                  {{"priority", double(p->base)},
                   {"boost", double(p->boost)},
                   {"waited_seconds", seconds(now - p->submitted)},
                   {"effective", p->effective(now, options.aging_per_second)}},
                  fmt::format("started ahead of {} transfer(s) queued before it", overtaken));
        p->result.waited_seconds = seconds(now - p->submitted);
        ++busy;
        if (p->request.prefetch) ++prefetch_busy;
        running.emplace(p->request.id, p.get());
        ready.push_back(std::move(p));
        worker_wake.notify_one();
    }

    void prune_workloads(std::unique_lock<std::mutex>& lock) {
        if (options.registry == nullptr || Clock::now() < next_prune) return;
        next_prune = Clock::now() + kPruneEvery;
        lock.unlock();
        const std::vector<std::string> ended = options.registry->prune();
        lock.lock();
        for (const std::string& workload : ended)
            for (std::size_t i = queue.size(); i-- > 0;)
                if (queue[i]->request.workload == workload)
                    drop(i, Errc::not_found,
                         fmt::format("transfer '{}': workload '{}' ended (its process exited) or was removed; dropped",
                                     queue[i]->request.id, workload),
                         Clock::now());
    }

    // Asks the policy about a queued transfer, outside the lock. Only the
    // dispatcher removes transfers from the queue, so `p` stays valid.
    std::vector<PolicyAction> ask(std::unique_lock<std::mutex>& lock, Pending& p) {
        if (!options.policy) return {};
        const TransferFacts facts{p.request.id, p.request.workload, p.request.kind, p.request.length,
                                  p.base,       p.request.prefetch};
        std::vector<PolicyAction> actions;
        std::string error;
        lock.unlock();
        try {
            actions = options.policy(facts);
        } catch (const std::exception& e) {
            error = e.what();
        } catch (...) {
            error = "an exception that is not a std::exception";
        }
        lock.lock();
        if (!error.empty())
            p.record(Clock::now(), "scheduler", "policy", {}, "the policy failed (" + error + "); no rule applied");
        return actions;
    }

    // Whether the registry still has the transfer's workload (find() drops
    // it there when its process ended); asked outside the lock.
    bool known_workload(std::unique_lock<std::mutex>& lock, const Pending& p) {
        const std::string workload = p.request.workload;
        lock.unlock();
        const bool known = options.registry->find(workload).has_value();
        lock.lock();
        return known;
    }

    std::size_t index_of(const Pending* p) const {
        const auto at = std::find_if(queue.begin(), queue.end(), [&](const auto& q) { return q.get() == p; });
        return static_cast<std::size_t>(at - queue.begin());
    }

    void run_dispatcher() {
        std::unique_lock lock(mutex);
        while (!stopping) {
            prune_workloads(lock);
            // Newly queued transfers first: their boosts decide the order.
            const auto fresh = std::find_if(queue.begin(), queue.end(), [](const auto& q) { return !q->admitted; });
            if (fresh != queue.end()) {
                Pending* p = fresh->get();
                std::vector<PolicyAction> actions = ask(lock, *p);
                p->admitted = true;
                apply_boost(*p, data::fold(actions, options.prioritize_boost), Clock::now());
                continue;
            }
            Clock::time_point now = Clock::now();
            std::optional<std::size_t> best = busy < options.workers ? pick(now) : std::nullopt;
            if (!best) {
                for (const auto& q : queue)
                    if (q->request.prefetch && q->hold_until <= now && busy < options.workers)
                        note_prefetch_wait(*q, now);
                std::optional<Clock::time_point> wake;
                for (const auto& p : queue)
                    if (p->hold_until > now && (!wake || p->hold_until < *wake)) wake = p->hold_until;
                if (options.registry != nullptr && !queue.empty())
                    wake = std::min(wake.value_or(next_prune), next_prune);
                if (wake)
                    dispatcher_wake.wait_until(lock, *wake);
                else
                    dispatcher_wake.wait(lock);
                continue;
            }
            Pending* p = queue[*best].get();
            if (options.registry != nullptr && !known_workload(lock, *p)) {
                drop(index_of(p), Errc::not_found,
                     fmt::format("transfer '{}': workload '{}' ended (its process exited) or was removed; dropped",
                                 p->request.id, p->request.workload),
                     Clock::now());
                continue;
            }
            std::vector<PolicyAction> actions = ask(lock, *p);
            if (stopping) break;
            now = Clock::now();
            if (apply(*p, data::fold(actions, options.prioritize_boost), now) && busy < options.workers)
                dispatch(index_of(p), now);
        }
        // Shutting down: what waits is completed with an error.
        while (!queue.empty())
            drop(queue.size() - 1, Errc::closed,
                 fmt::format("transfer '{}': the scheduler shut down before it started", queue.back()->request.id),
                 Clock::now());
    }

    void execute(Pending& p) {
        const TransferRequest& r = p.request;
        try {
            if (p.stage) {
                p.result.staged = options.staging_dir / staging_name(p);
                data::stage_range(r.path, r.offset, r.length, p.result.staged);
            } else {
                data::read_range(r.path, r.offset, r.buffer.first(static_cast<std::size_t>(r.length)));
            }
            p.result.bytes = r.length;
        } catch (const Error& e) {
            p.result.code = e.code();
            p.result.error = fmt::format("transfer '{}': {}", r.id, e.what());
            p.result.staged.clear();
        } catch (const std::exception& e) {
            p.result.code = Errc::internal;
            p.result.error =
                fmt::format("transfer '{}': {} at offset {}: {}", r.id, r.path.string(), r.offset, e.what());
        }
    }

    void run_worker() {
        std::unique_lock lock(mutex);
        while (true) {
            worker_wake.wait(lock, [&] { return stopping || !ready.empty(); });
            if (ready.empty()) return;  // stopping, nothing left to run
            std::unique_ptr<Pending> p = std::move(ready.front());
            ready.pop_front();
            lock.unlock();
            execute(*p);
            lock.lock();
            if (p->result.code != Errc::ok) ++counts.failed;
            finalize(*p, Clock::now());
            lock.unlock();
            if (p->request.on_done) {
                try {
                    p->request.on_done(p->result);
                } catch (...) {
                    // A callback's failure is the caller's; the transfer is done.
                }
            }
            lock.lock();
            running.erase(p->request.id);
            --busy;
            if (p->request.prefetch) --prefetch_busy;
            complete(std::move(p));
            dispatcher_wake.notify_one();
        }
    }
};

TransferScheduler::TransferScheduler(TransferOptions options) : impl_(std::make_unique<Impl>()) {
    const auto bad = [](std::string_view what) {
        throw Error(Errc::invalid_argument, fmt::format("TransferScheduler: {}", what));
    };
    if (options.workers == 0 || options.workers > 256)
        bad(fmt::format("workers must be 1 to 256 I/O threads, got {}", options.workers));
    if (options.prefetch_depth == 0)
        bad("prefetch_depth must be at least 1 (reduce_prefetch scales it down; a factor of 0 stops prefetching)");
    if (!std::isfinite(options.aging_per_second) || options.aging_per_second <= 0)
        bad(fmt::format("aging_per_second must be more than 0 (or a transfer could starve), got {}",
                        options.aging_per_second));
    if (!options.staging_dir.empty() && !std::filesystem::is_directory(options.staging_dir))
        bad(fmt::format("staging_dir {} is not a directory; create it first", options.staging_dir.string()));
    impl_->options = std::move(options);
    impl_->workers.reserve(impl_->options.workers);
    for (std::size_t i = 0; i < impl_->options.workers; ++i)
        impl_->workers.emplace_back([impl = impl_.get()] { impl->run_worker(); });
    impl_->dispatcher = std::thread([impl = impl_.get()] { impl->run_dispatcher(); });
}

TransferScheduler::~TransferScheduler() {
    {
        std::lock_guard lock(impl_->mutex);
        impl_->stopping = true;
    }
    impl_->dispatcher_wake.notify_all();
    impl_->dispatcher.join();
    impl_->worker_wake.notify_all();
    for (std::thread& worker : impl_->workers) worker.join();
}

std::future<TransferResult> TransferScheduler::submit(TransferRequest request) {
    const auto bad = [&](std::string_view what) {
        throw Error(Errc::invalid_argument,
                    fmt::format("TransferScheduler::submit: transfer '{}': {}", request.id, what));
    };
    if (request.id.empty()) bad("id is empty; give each transfer an id");
    if (request.path.empty()) bad("path is empty; name the file to read");
    if (request.length == 0) bad("length is 0; a transfer reads at least 1 byte");
    if (request.offset > UINT64_MAX - request.length || request.offset + request.length > uint64_t(INT64_MAX))
        bad(fmt::format("offset {} + length {} is past the largest file offset", request.offset, request.length));
    if (request.stage && impl_->options.staging_dir.empty())
        bad("stage is set, but the scheduler has no staging_dir; set TransferOptions::staging_dir");
    if (!request.stage && request.buffer.empty())
        bad("no destination: give a buffer of at least `length` bytes, or set stage");
    if (!request.buffer.empty() && request.buffer.size() < request.length)
        bad(fmt::format("buffer holds {} bytes, fewer than length {}", request.buffer.size(), request.length));
    int base = request.priority;
    if (WorkloadRegistry* registry = impl_->options.registry) {
        const auto workload = registry->find(request.workload);
        if (!workload)
            throw Error(Errc::not_found,
                        fmt::format("TransferScheduler::submit: transfer '{}': workload '{}' is not registered (or "
                                    "its process ended); register it in the WorkloadRegistry first",
                                    request.id, request.workload));
        // Saturated: two priorities near INT_MAX must not overflow.
        base = static_cast<int>(std::clamp<int64_t>(int64_t{base} + workload->workload.priority, INT_MIN, INT_MAX));
    }
    auto p = std::make_unique<Pending>();
    std::future<TransferResult> future = p->promise.get_future();
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopping) throw Error(Errc::closed, "TransferScheduler::submit: the scheduler is shutting down");
    if (impl_->active.contains(request.id))
        bad("a transfer with this id is already queued or running; ids must be unique until they finish");
    p->seq = impl_->next_seq++;
    p->submitted = Clock::now();
    p->base = base;
    p->stage = request.stage;
    impl_->active.insert(request.id);
    p->request = std::move(request);
    impl_->queue.push_back(std::move(p));
    ++impl_->counts.submitted;
    impl_->dispatcher_wake.notify_one();
    return future;
}

std::vector<TransferDecision> TransferScheduler::explain(std::string_view id) const {
    std::lock_guard lock(impl_->mutex);
    for (const auto& p : impl_->queue)
        if (p->request.id == id) return p->result.decisions;
    for (const auto& p : impl_->ready)
        if (p->request.id == id) return p->result.decisions;
    if (auto it = impl_->running.find(id); it != impl_->running.end()) return it->second->result.decisions;
    for (auto it = impl_->finished.rbegin(); it != impl_->finished.rend(); ++it)
        if (it->first == id) return it->second;
    throw Error(Errc::not_found,
                fmt::format("TransferScheduler::explain: no transfer '{}' is queued or running, nor among the last "
                            "{} finished (TransferOptions::explain_history)",
                            id, impl_->options.explain_history));
}

TransferStats TransferScheduler::stats() const {
    std::lock_guard lock(impl_->mutex);
    TransferStats out = impl_->counts;
    const auto now = Clock::now();
    out.queued = impl_->queue.size();
    out.held = static_cast<std::size_t>(
        std::count_if(impl_->queue.begin(), impl_->queue.end(), [&](const auto& p) { return p->hold_until > now; }));
    out.running = impl_->busy;
    const double elapsed = seconds(now - impl_->started);
    out.bytes_per_second = elapsed > 0 ? double(out.bytes) / elapsed : 0;
    out.prefetch_factor = impl_->factor;
    out.prefetch_depth = impl_->depth();
    return out;
}

void TransferScheduler::set_prefetch_depth(std::size_t depth) {
    if (depth == 0)
        throw Error(Errc::invalid_argument,
                    "TransferScheduler: set_prefetch_depth: the depth must be at least 1 (reduce_prefetch scales it "
                    "down; a factor of 0 stops prefetching)");
    {
        std::lock_guard lock(impl_->mutex);
        impl_->options.prefetch_depth = depth;
    }
    // A deeper limit may let a waiting prefetch start now.
    impl_->dispatcher_wake.notify_all();
}

std::size_t TransferScheduler::prefetch_depth() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->options.prefetch_depth;
}

}  // namespace cohort
