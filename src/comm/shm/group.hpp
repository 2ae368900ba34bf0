// The ranks of one host that share a segment, and the one way they
// synchronise: rounds. In a round every rank writes its own slot, arrives,
// and waits until every other rank arrived; then it may read any slot.
//
// Each rank owns three slots and takes the next one for each "use"
// (next_buffers), so a rank can fill its slot for the next use while slower
// ranks still read the last two: a pipelined round reads the previous use's
// slots after its sync, and writing use u again only needs every rank done
// with use u - 3, which every rank finished before it arrived in use u - 1,
// which this rank waited for.
//
// Arrival is a counter per rank in its own cache line. A waiter spins on it
// briefly, then sleeps on it with a futex; the arriving rank makes the wake
// system call only when its waiter count says someone sleeps, so the fast
// path has no system call. A sleeper wakes every few milliseconds to let the
// engine look at the sockets: a rank that died closed them, one that gave
// up sent an abort there, and neither will ever arrive.
#pragma once

#include "comm/engine.hpp"
#include "comm/shm/segment.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cohort::comm::shm {

inline constexpr uint64_t kSegmentMagic = 0x31484D5348434F43ull;  // "COHSHMH1"

// The first page of the segment.
struct Header {
    uint64_t magic;
    uint32_t ranks;
    uint32_t reserved;
    uint64_t slot_bytes;
};

inline constexpr int kSlotsPerRank = 3;

// One rank's arrival counter and the signature of the operation it runs,
// one per slot, so a rank starting the next use cannot overwrite the
// signature a slower rank still compares.
struct alignas(128) Control {
    std::atomic<uint32_t> step;
    std::atomic<uint32_t> waiters;
    OpSignature op[kSlotsPerRank];
};

// Where everything lies in a segment of `bytes` for `ranks` ranks.
struct Layout {
    std::size_t control = 0;  // offset of Control[ranks]
    std::size_t data = 0;     // offset of the slots: rank r's slot p at data + (3r + p) * slot
    std::size_t slot = 0;     // bytes per slot, a multiple of 4 KiB; 0 if it does not fit
};
Layout layout(std::size_t bytes, int ranks);
// The smallest slot cohort accepts.
inline constexpr std::size_t kMinSlot = std::size_t(64) << 10;

class Group {
public:
    // `ranks` are the global ranks of the group, ascending; this process is
    // ranks[me]. `spin` is how long a waiter polls before it sleeps.
    Group(Segment segment, std::vector<int> ranks, int me, std::chrono::microseconds spin);

    int size() const { return static_cast<int>(ranks_.size()); }
    int me() const { return me_; }
    const std::vector<int>& ranks() const { return ranks_; }
    std::size_t slot_bytes() const { return slot_; }
    std::size_t segment_bytes() const { return segment_.size(); }

    // Moves every rank on to its next slot.
    void next_buffers() { ++use_; }
    // Rank `local`'s slot of this use, or of the use `ago` uses back (0..2).
    std::byte* slot(int local, int ago = 0) const {
        return data_ + (kSlotsPerRank * std::size_t(local) + (use_ - uint64_t(ago)) % kSlotsPerRank) * slot_;
    }
    std::byte* mine(int ago = 0) const { return slot(me_, ago); }

    // Ends a round: this rank's writes become visible; returns once every
    // rank of the group has arrived too. `first` marks an operation's first
    // round, where the ranks also check they all run the same operation
    // (Error(mismatch) otherwise). Throws the engine's Error when a peer
    // died or aborted, the operation was aborted, or its deadline passed.
    void sync(Engine& engine, bool first = false);

private:
    Control& control(int local) const { return control_[local]; }
    void arrive();
    void wait_for(Engine& engine, int local, uint32_t target, std::chrono::microseconds spin);
    void check(Engine& engine, int local, uint32_t target, const std::function<std::string()>& waiting);

    Segment segment_;
    std::vector<int> ranks_;
    int me_;
    std::chrono::microseconds spin_;
    bool oversubscribed_;  // more ranks on the host than processors: yield while spinning
    Control* control_;
    std::byte* data_;
    std::size_t slot_;
    uint32_t step_ = 0;
    uint64_t use_ = kSlotsPerRank;  // never below `ago`
};

}  // namespace cohort::comm::shm
