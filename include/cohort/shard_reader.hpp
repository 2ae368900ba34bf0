// ShardReader: the shards the coordinator leases to a member, read ahead of
// the training loop. It leases shards of the job's dataset plan, reads each
// one's segments (byte ranges of the dataset's files, from a ShardSet)
// through a TransferScheduler as prefetch transfers into buffers it owns,
// and keeps as many shards ahead of the loop as the scheduler's prefetch
// depth allows now, so a reduce_prefetch rule reads fewer ahead. next()
// measures the time the loop waited: its data wait. docs/data.md is the guide.
#pragma once

#include <cohort/coordinator_protocol.hpp>
#include <cohort/export.hpp>
#include <cohort/shards.hpp>
#include <cohort/transfers.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace cohort {

class CoordinatorClient;
class Membership;

// Where leases come from and where the reader's waits go. Made from a
// Membership or a CoordinatorClient below; any functions will do.
struct ShardLeaseSource {
    std::function<ShardLease()> next_shard{};
    std::function<ShardDone(uint64_t lease)> shard_done{};
    // Optional: gives a lease back unread (the reader's end, below).
    std::function<ShardRelease(uint64_t lease)> shard_release{};
    // Optional: told each wait of next(), in seconds (Membership::add_data_wait).
    std::function<void(double seconds)> data_wait{};
    std::string name{};  // for messages: "member 'w0' of job 'train'"
};

// Leases of `membership`; its data wait goes to the member's next recorded
// step (Membership::add_data_wait). The membership must outlive the reader.
COHORT_API ShardLeaseSource lease_source(Membership& membership);
// Leases of `member` of `job` through `client`, which must outlive the
// reader; the data wait is the program's to record (ShardReader::stats).
COHORT_API ShardLeaseSource lease_source(CoordinatorClient& client, std::string job, std::string member);

// The dataset plan (CoordinatorClient::register_dataset) whose shard index i
// is shard i of `shards`, with its size: ids "0", "1", ... as
// cohort-plan's. The reader needs the plan's indices to be the ShardSet's.
COHORT_API std::string dataset_plan_json(const ShardSet& shards, uint32_t epochs = 1);

struct ShardReaderOptions {
    // The scheduler to read through (shared with other readers and
    // transfers; it must outlive the reader), or null: the reader makes its
    // own from `transfers`.
    TransferScheduler* scheduler = nullptr;
    TransferOptions transfers{};
    std::string workload{};  // the transfers' workload (a registered one when the scheduler has a registry)
    int priority = 0;        // the transfers' priority
    // Relative paths of the dataset's files are read under it (empty: the
    // working directory).
    std::filesystem::path root{};
    // While every shard left is leased to other members: how often to ask again.
    std::chrono::milliseconds poll_interval{50};
    // At most this many shards ahead, whatever the scheduler allows (0: no cap).
    std::size_t max_ahead = 0;
    // At the reader's end, give the leases it holds back (the source's
    // shard_release), so other members get their shards at once rather than
    // when the leases expire.
    bool release_on_close = true;
};

// A shard next() hands out: its lease and its bytes (the segments in
// order), which stay valid until done(lease.lease) or the reader's end.
struct ShardData {
    ShardLease lease{};
    std::span<const std::byte> bytes{};
    bool prefetch_hit = false;  // its bytes were there when next() was called
    double wait_seconds = 0;    // how long next() blocked for it
};

struct ShardReaderStats {
    double data_wait_seconds = 0;  // next() blocked, added up
    uint64_t shards = 0;           // handed out by next()
    uint64_t bytes = 0;            // of those shards
    uint64_t prefetch_hits = 0;    // next() found the shard read
    uint64_t prefetch_misses = 0;  // next() had to wait for it (or for its lease)
    uint64_t failed = 0;           // shards whose read failed (next() threw)
    uint64_t reported = 0;         // done() calls
    std::size_t ahead = 0;         // leased, not yet handed out: read or being read
    std::size_t max_ahead = 0;     // the most there ever were
    std::size_t depth = 0;         // shards the reader keeps ahead now
    bool finished = false;         // the coordinator said every epoch is done
};

class COHORT_API ShardReader {
public:
    // Starts leasing and reading at once. Error(invalid_argument) for a
    // source without next_shard/shard_done, a poll_interval outside 1 ms to
    // 10 min, or bad options for the reader's own scheduler.
    ShardReader(ShardLeaseSource source, ShardSet shards, ShardReaderOptions options = {});
    ShardReader(Membership& membership, ShardSet shards, ShardReaderOptions options = {});
    // Stops leasing. Shards leased and not handed out, and shards handed
    // out without done(), are not reported: with release_on_close and a
    // source that can, they are given back (not one whose read failed:
    // its lease running out is the pause before the file is read again),
    // one request each, so the
    // coordinator hands them to the next member that asks. The first give-
    // back that fails (the coordinator is gone: it takes the client's
    // retry_deadline) stops the rest, and those shards go out again when
    // their leases expire (the plan's lease_duration), or at once if the
    // member leaves or fails. Reads still under way finish on the
    // scheduler's threads into buffers they keep alive.
    ~ShardReader();
    ShardReader(const ShardReader&) = delete;
    ShardReader& operator=(const ShardReader&) = delete;

    // The next leased shard once its bytes are read, in lease order, or
    // nothing once the coordinator says every epoch is done. Blocks at most
    // `timeout` (Error(timeout)). A read that failed throws the scheduler's
    // code (io for a short or missing file) naming the shard, its lease, the
    // file and the offset; a lease the layout does not have throws
    // Error(mismatch); a lease request that failed throws its error. The
    // reader goes on after each: the next call is the next shard. From one
    // thread at a time; done() and stats() from any.
    std::optional<ShardData> next(std::chrono::milliseconds timeout = std::chrono::hours(24 * 365));
    // Reports the shard of a lease next() handed out done to the
    // coordinator and frees its bytes. Error(invalid_argument) for a lease
    // next() did not hand out, or one already done.
    ShardDone done(uint64_t lease);

    ShardReaderStats stats() const;
    const ShardSet& shards() const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace cohort
