// ShardReader: a leasing thread keeps shards leased and read ahead of the
// training loop, as many as the scheduler's prefetch depth allows now; each
// shard's segments are read by the scheduler's I/O threads into the shard's
// buffer. The completion callbacks hold the shared state and the shard, so a
// read still running when the reader goes away writes into memory it keeps
// alive rather than into freed memory.
#include <cohort/error.hpp>
#include <cohort/shard_reader.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include <fmt/format.h>

namespace cohort {

namespace {

using Clock = std::chrono::steady_clock;

// How often the leasing thread reads the scheduler's depth while it has as
// many shards ahead as that allows: a reduce_prefetch that ends is seen this soon.
constexpr auto kDepthRecheck = std::chrono::milliseconds(50);

// Distinguishes the transfer ids of readers that share a scheduler.
std::atomic<uint64_t> next_reader_id{1};

// A leased shard and its reads. `buffer` gets the shard's reads, issued as
// prefetch transfers; when the loop waits for a shard whose prefetch reads
// the scheduler holds back (a depth of 0), the same ranges are read again
// into `need` as reads of need, and the first set to finish serves.
struct Reads {
    std::vector<std::byte> bytes;
    std::size_t pending = 0;  // segment reads not finished
    Errc code = Errc::ok;     // the first failure
    std::string error;
    bool issued = false;
    bool over() const { return issued && pending == 0; }
};

struct Slot {
    ShardLease lease;
    Reads ahead;  // read ahead of need
    Reads need;   // read again because the loop waits for it at a depth of 0
    bool prefetch = true;  // `ahead` went as prefetch transfers (not when the loop already waited)
    bool ready() const { return ahead.over() || need.over(); }
    // What next() hands out: the reads that finished well, else the failure.
    const Reads& result() const {
        if (ahead.over() && ahead.code == Errc::ok) return ahead;
        if (need.over() && need.code == Errc::ok) return need;
        return ahead.over() ? ahead : need;
    }
};

std::string lease_name(const ShardLease& lease) {
    return fmt::format("shard {} ('{}', lease {}, epoch {})", lease.shard, lease.shard_id, lease.lease, lease.epoch);
}

}  // namespace

// What the leasing thread, next(), done() and the completion callbacks share.
struct ReaderState {
    std::mutex mutex;
    std::condition_variable wake;
    bool stopping = false;
    bool finished = false;
    bool consumer_waiting = false;
    std::optional<Error> lease_error;
    std::deque<std::shared_ptr<Slot>> ahead;             // leased, in lease order
    std::map<uint64_t, std::shared_ptr<Slot>> handed;  // by lease: next() gave it, done() not yet
    uint64_t shards_read = 0;  // shards whose reads finished (for the start, below)
    ShardReaderStats stats;
};

struct ShardReader::Impl {
    ShardLeaseSource source;
    ShardSet shards;
    ShardReaderOptions options;
    uint64_t id = next_reader_id.fetch_add(1);
    std::unique_ptr<TransferScheduler> own;
    TransferScheduler* scheduler = nullptr;
    std::shared_ptr<ReaderState> state = std::make_shared<ReaderState>();
    std::thread leaser;

    void lease_loop();
    void release_leases();
    std::shared_ptr<Slot> make_slot(const ShardLease& lease) const;
    void submit(const std::shared_ptr<Slot>& slot, Reads Slot::* which, bool prefetch);
    std::filesystem::path file_path(uint32_t file) const;
};

std::filesystem::path ShardReader::Impl::file_path(uint32_t file) const {
    std::filesystem::path p = shards.dataset().files()[file].path;
    if (p.is_relative() && !options.root.empty()) p = options.root / p;
    return p;
}

std::shared_ptr<Slot> ShardReader::Impl::make_slot(const ShardLease& lease) const {
    auto slot = std::make_shared<Slot>();
    slot->lease = lease;
    Reads& r = slot->ahead;
    r.issued = true;
    if (lease.shard >= shards.size()) {
        r.code = Errc::mismatch;
        r.error = fmt::format(
            "the reader's layout has {} shards, so it has no shard {}: register the dataset plan made from the "
            "same ShardSet (dataset_plan_json)",
            shards.size(), lease.shard);
    } else if (lease.bytes != 0 && lease.bytes != shards.bytes(lease.shard)) {
        r.code = Errc::mismatch;
        r.error = fmt::format(
            "the plan says it has {} bytes, the reader's layout {}: register the dataset plan made from the same "
            "ShardSet (dataset_plan_json)",
            lease.bytes, shards.bytes(lease.shard));
    } else {
        r.bytes.resize(shards.bytes(lease.shard));
        r.pending = shards.segments(lease.shard).size();
    }
    return slot;
}

// Issues the reads of `reads` (the slot's `ahead` or `need`, sized and
// counted by the caller under the lock).
void ShardReader::Impl::submit(const std::shared_ptr<Slot>& slot, Reads Slot::* which, bool prefetch) {
    const auto segments = shards.segments(slot->lease.shard);
    const std::span<std::byte> buffer(((*slot).*which).bytes);
    uint64_t at = 0;
    for (std::size_t i = 0; i < segments.size(); ++i) {
        const Segment& seg = segments[i];
        TransferRequest r;
        r.id = fmt::format("shard-reader-{}/lease-{}/shard-{}/segment-{}{}", id, slot->lease.lease,
                           slot->lease.shard, i, prefetch ? "" : "/need");
        r.workload = options.workload;
        r.path = file_path(seg.file);
        r.offset = seg.begin;
        r.length = seg.bytes();
        r.priority = options.priority;
        r.kind = "dataset";
        r.prefetch = prefetch;
        r.buffer = buffer.subspan(at, seg.bytes());
        at += seg.bytes();
        // The slot and the state, not the reader: the read may outlive it.
        r.on_done = [state = state, slot, which](const TransferResult& result) {
            std::lock_guard lock(state->mutex);
            Reads& reads = (*slot).*which;
            if (result.code != Errc::ok && reads.code == Errc::ok) {
                reads.code = result.code;
                reads.error = result.error;
            }
            if (--reads.pending == 0) ++state->shards_read;
            state->wake.notify_all();
        };
        try {
            scheduler->submit(std::move(r));  // the callback tells; the future is not needed
        } catch (const Error& e) {
            std::lock_guard lock(state->mutex);
            Reads& reads = (*slot).*which;
            if (reads.code == Errc::ok) {
                reads.code = e.code();
                reads.error = e.what();
            }
            reads.pending -= segments.size() - i;  // this one and the ones never submitted
            state->wake.notify_all();
            return;
        }
    }
}

void ShardReader::Impl::lease_loop() {
    ReaderState& st = *state;
    std::unique_lock lock(st.mutex);
    while (!st.stopping) {
        if (st.finished || st.lease_error) {
            // next() hands out what is left, then the end or the error; after
            // an error it is consumed, and leasing resumes.
            st.wake.wait(lock);
            continue;
        }
        lock.unlock();
        std::size_t depth = scheduler->stats().prefetch_depth;
        lock.lock();
        if (options.max_ahead > 0) depth = std::min(depth, options.max_ahead);
        st.stats.depth = depth;
        if (depth == 0 && st.consumer_waiting && !st.ahead.empty() && !st.ahead.front()->ready() &&
            st.ahead.front()->prefetch && !st.ahead.front()->need.issued) {
            // The loop waits for a shard whose prefetch reads the depth holds
            // back: read it again as a read of need.
            std::shared_ptr<Slot> slot = st.ahead.front();
            slot->need.issued = true;
            slot->need.bytes.resize(slot->ahead.bytes.size());
            slot->need.pending = shards.segments(slot->lease.shard).size();
            lock.unlock();
            submit(slot, &Slot::need, false);
            lock.lock();
            continue;
        }
        // The policy speaks only when asked about a transfer, so the depth
        // before the first read is a guess: lease one more than the shards
        // read so far until the depth is known to allow it.
        depth = std::min<uint64_t>(depth, st.shards_read + 1);
        // The shard the loop waits for with nothing ahead is read even at a
        // depth of 0, as a read of need rather than ahead of it.
        const bool demand = st.consumer_waiting && st.ahead.empty();
        if (st.ahead.size() >= std::max<std::size_t>(depth, demand ? 1 : 0)) {
            st.wake.wait_for(lock, kDepthRecheck);
            continue;
        }
        lock.unlock();
        ShardLease lease;
        std::optional<Error> failed;
        try {
            lease = source.next_shard();
        } catch (const Error& e) {
            failed = e;
        } catch (const std::exception& e) {
            failed = Error(Errc::internal, e.what());
        }
        if (failed) {
            lock.lock();
            st.lease_error = std::move(failed);
            st.wake.notify_all();
            continue;
        }
        if (!lease.granted) {
            lock.lock();
            if (lease.finished) {
                st.finished = true;
                st.stats.finished = true;
                st.wake.notify_all();
            } else {
                // Every shard left is leased to others; one may fail and its shards come back.
                st.wake.wait_for(lock, options.poll_interval, [&] { return st.stopping; });
            }
            continue;
        }
        std::shared_ptr<Slot> slot = make_slot(lease);
        slot->prefetch = !demand;
        lock.lock();
        st.ahead.push_back(slot);
        st.stats.max_ahead = std::max(st.stats.max_ahead, st.ahead.size());
        st.wake.notify_all();
        if (slot->ahead.code != Errc::ok) continue;
        lock.unlock();
        submit(slot, &Slot::ahead, !demand);
        lock.lock();
    }
}

// The leases still held at the end, ahead ones first, given back; a failure
// stops the rest (each would wait out the same unreachable coordinator).
// Never throws: it runs in the destructor.
void ShardReader::Impl::release_leases() {
    std::vector<uint64_t> held;
    {
        std::lock_guard lock(state->mutex);
        for (const auto& slot : state->ahead) held.push_back(slot->lease.lease);
        for (const auto& [lease, slot] : state->handed) held.push_back(lease);
    }
    for (uint64_t lease : held) {
        try {
            source.shard_release(lease);
        } catch (...) {
            return;
        }
    }
}

ShardReader::ShardReader(ShardLeaseSource source, ShardSet shards, ShardReaderOptions options)
    : impl_(std::make_unique<Impl>()) {
    if (!source.next_shard || !source.shard_done) {
        throw Error(Errc::invalid_argument,
                    "ShardReader: the lease source needs next_shard and shard_done (make one with lease_source())");
    }
    if (options.poll_interval.count() < 1 || options.poll_interval > std::chrono::minutes(10)) {
        throw Error(Errc::invalid_argument,
                    fmt::format("ShardReader: poll_interval must be 1 ms to 10 min, got {} ms",
                                options.poll_interval.count()));
    }
    if (source.name.empty()) source.name = "the lease source";
    impl_->source = std::move(source);
    impl_->shards = std::move(shards);
    impl_->options = std::move(options);
    if (impl_->options.scheduler != nullptr) {
        impl_->scheduler = impl_->options.scheduler;
    } else {
        impl_->own = std::make_unique<TransferScheduler>(impl_->options.transfers);
        impl_->scheduler = impl_->own.get();
    }
    impl_->leaser = std::thread([impl = impl_.get()] { impl->lease_loop(); });
}

ShardReader::ShardReader(Membership& membership, ShardSet shards, ShardReaderOptions options)
    : ShardReader(lease_source(membership), std::move(shards), std::move(options)) {}

ShardReader::~ShardReader() {
    {
        std::lock_guard lock(impl_->state->mutex);
        impl_->state->stopping = true;
        impl_->state->wake.notify_all();
    }
    impl_->leaser.join();
    if (impl_->options.release_on_close && impl_->source.shard_release) impl_->release_leases();
    // Then the own scheduler (a member): it finishes the reads started and
    // drops the queued ones; their callbacks keep the shards alive.
}

std::optional<ShardData> ShardReader::next(std::chrono::milliseconds timeout) {
    ReaderState& st = *impl_->state;
    const auto start = Clock::now();
    const auto deadline =
        start + std::clamp(timeout, std::chrono::milliseconds::zero(), std::chrono::milliseconds(int64_t(1) << 40));
    std::unique_lock lock(st.mutex);
    const auto front_ready = [&] { return !st.ahead.empty() && st.ahead.front()->ready(); };
    const bool hit = front_ready();
    st.consumer_waiting = true;
    st.wake.notify_all();
    const bool ready = st.wake.wait_until(lock, deadline, [&] {
        return front_ready() || (st.ahead.empty() && (st.finished || st.lease_error.has_value()));
    });
    st.consumer_waiting = false;
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    st.stats.data_wait_seconds += waited;
    // Told outside the lock: a Membership takes its own.
    const auto tell = [&] {
        if (impl_->source.data_wait && waited > 0) impl_->source.data_wait(waited);
    };
    if (!ready) {
        const std::string waiting_for =
            st.ahead.empty() ? std::string("a lease") : lease_name(st.ahead.front()->lease) + " to be read";
        lock.unlock();
        tell();
        throw Error(Errc::timeout, fmt::format("ShardReader: {}: waited {:.3f} s for {}", impl_->source.name,
                                               waited, waiting_for));
    }
    if (st.ahead.empty()) {
        std::optional<Error> failed = std::move(st.lease_error);
        st.lease_error.reset();
        st.wake.notify_all();
        lock.unlock();
        tell();
        if (!failed) return std::nullopt;  // finished
        throw Error(failed->code(),
                    fmt::format("ShardReader: {}: asking for a lease failed: {}", impl_->source.name, failed->what()));
    }
    std::shared_ptr<Slot> slot = std::move(st.ahead.front());
    st.ahead.pop_front();
    st.wake.notify_all();  // room for one more ahead
    ++(hit ? st.stats.prefetch_hits : st.stats.prefetch_misses);
    const Reads& reads = slot->result();
    if (reads.code != Errc::ok) {
        ++st.stats.failed;
        const Error failed(reads.code, fmt::format("ShardReader: {} of {}: {}", lease_name(slot->lease),
                                                   impl_->source.name, reads.error));
        lock.unlock();
        tell();
        throw failed;
    }
    st.handed[slot->lease.lease] = slot;
    ++st.stats.shards;
    st.stats.bytes += reads.bytes.size();
    ShardData out{slot->lease, std::span<const std::byte>(reads.bytes), hit, waited};
    lock.unlock();
    tell();
    return out;
}

ShardDone ShardReader::done(uint64_t lease) {
    ReaderState& st = *impl_->state;
    {
        std::lock_guard lock(st.mutex);
        if (st.handed.find(lease) == st.handed.end()) {
            throw Error(Errc::invalid_argument,
                        fmt::format("ShardReader::done: lease {} is not a shard next() handed out (or it is done "
                                    "already)",
                                    lease));
        }
    }
    // Reported first: a report that fails leaves the shard to report again.
    const ShardDone answer = impl_->source.shard_done(lease);
    std::lock_guard lock(st.mutex);
    st.handed.erase(lease);
    ++st.stats.reported;
    return answer;
}

ShardReaderStats ShardReader::stats() const {
    ReaderState& st = *impl_->state;
    std::lock_guard lock(st.mutex);
    ShardReaderStats s = st.stats;
    s.ahead = st.ahead.size();
    return s;
}

const ShardSet& ShardReader::shards() const {
    return impl_->shards;
}

std::string dataset_plan_json(const ShardSet& shards, uint32_t epochs) {
    if (epochs < 1) throw Error(Errc::invalid_argument, "dataset_plan_json: epochs must be at least 1, not 0");
    std::string out = "{\"shards\": [";
    out.reserve(out.size() + shards.size() * 32);
    for (uint64_t s = 0; s < shards.size(); ++s) {
        if (s > 0) out += ", ";
        out += fmt::format("{{\"id\": \"{}\", \"bytes\": {}}}", s, shards.bytes(s));
    }
    out += fmt::format("], \"epochs\": {}}}", epochs);
    return out;
}

}  // namespace cohort
