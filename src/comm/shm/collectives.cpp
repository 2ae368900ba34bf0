// Shared-memory collectives: rounds of "write my slot, sync, read theirs".
#include "comm/shm/collectives.hpp"

#include "comm/reduce.hpp"

#include <algorithm>
#include <cstring>
#include <set>

namespace cohort::comm::shm {
namespace {

// Up to this size each rank reduces the whole message itself from every
// slot: one round, and a reading cost that small messages do not feel.
constexpr std::size_t kWholeReduce = std::size_t(32) << 10;
// Larger messages go in chunks of this much per rank, so the slots a round
// touches (ranks x chunk) stay in the processors' caches.
constexpr std::size_t kChunk = std::size_t(256) << 10;

void copy_bytes(std::byte* to, const std::byte* from, std::size_t bytes) {
    if (bytes > 0 && to != from) std::memcpy(to, from, bytes);
}

// out = slot(0) OP slot(1) OP ... in rank order, for elements [begin, begin + count).
void reduce_slots(const Group& g, std::byte* out, std::size_t begin, std::size_t count, const Reduction& r) {
    const std::size_t at = begin * r.element;
    reduce_to(out, g.slot(0) + at, g.slot(1) + at, count, r.dtype, r.op);
    for (int j = 2; j < g.size(); ++j) reduce_into(out, g.slot(j) + at, count, r.dtype, r.op);
}

}  // namespace

void allreduce(Group& g, Engine& engine, const Reduction& r, bool finish) {
    const std::size_t es = r.element, bytes = r.count * es;
    const bool avg = finish && r.op == ReduceOp::avg;
    if (bytes <= std::min(kWholeReduce, g.slot_bytes())) {
        g.next_buffers();
        copy_bytes(g.mine(), r.in, bytes);
        g.sync(engine, true);
        if (bytes == 0) return;
        reduce_slots(g, r.out, 0, r.count, r);
        if (avg) finish_avg(r.out, r.count, r.dtype, r.avg_ranks);
        return;
    }
    // Each chunk: every rank copies it in; rank j reduces share j of it
    // into its own slot; every rank copies the shares out.
    const std::size_t per_chunk = std::min(kChunk, g.slot_bytes()) / es;
    const int n = g.size(), me = g.me();
    bool first = true;
    for (std::size_t done = 0; done < r.count;) {
        const std::size_t count = std::min(per_chunk, r.count - done), at = done * es;
        g.next_buffers();
        copy_bytes(g.mine(), r.in + at, count * es);
        g.sync(engine, first);
        first = false;
        const Part share = part(count, n, me);
        if (share.length > 0) {
            std::byte* mine = r.out + at + share.begin * es;
            reduce_slots(g, mine, share.begin, share.length, r);
            if (avg) finish_avg(mine, share.length, r.dtype, r.avg_ranks);
            std::memcpy(g.mine() + share.begin * es, mine, share.length * es);
        }
        g.sync(engine);
        for (int j = 0; j < n; ++j) {
            const Part theirs = part(count, n, j);
            if (j != me && theirs.length > 0)
                std::memcpy(r.out + at + theirs.begin * es, g.slot(j) + theirs.begin * es, theirs.length * es);
        }
        done += count;
    }
}

void broadcast(Group& g, Engine& engine, std::byte* data, std::size_t bytes, int root) {
    const std::size_t chunk = g.slot_bytes();
    bool first = true;
    std::size_t done = 0;
    do {
        const std::size_t length = std::min(chunk, bytes - done);
        g.next_buffers();
        if (g.me() == root) copy_bytes(g.mine(), data + done, length);
        g.sync(engine, first);
        first = false;
        if (g.me() != root) copy_bytes(data + done, g.slot(root), length);
        done += length;
    } while (done < bytes);
}

void allgather(Group& g, Engine& engine, const std::byte* in, std::byte* out, std::size_t bytes) {
    const std::size_t chunk = g.slot_bytes();
    bool first = true;
    std::size_t done = 0;
    do {
        const std::size_t length = std::min(chunk, bytes - done);
        g.next_buffers();
        copy_bytes(g.mine(), in + done, length);
        g.sync(engine, first);
        first = false;
        for (int j = 0; j < g.size(); ++j)
            if (length > 0) std::memmove(out + std::size_t(j) * bytes + done, g.slot(j), length);
        done += length;
    } while (done < bytes);
}

// Each rank copies a piece of every block into its slot, then reduces the
// piece of its own block from every slot.
void reduce_scatter(Group& g, Engine& engine, const Reduction& r) {
    const std::size_t es = r.element, n = std::size_t(g.size()), block = r.count * es;
    const std::size_t per_piece = std::max<std::size_t>(1, g.slot_bytes() / n / es);
    const std::size_t me = std::size_t(g.me());
    bool first = true;
    std::size_t done = 0;
    do {
        const std::size_t count = std::min(per_piece, r.count - done);
        g.next_buffers();
        for (std::size_t j = 0; j < n; ++j) copy_bytes(g.mine() + j * count * es, r.in + j * block + done * es, count * es);
        g.sync(engine, first);
        first = false;
        if (count > 0) {
            std::byte* out = r.out + done * es;
            const std::size_t at = me * count * es;
            reduce_to(out, g.slot(0) + at, g.slot(1) + at, count, r.dtype, r.op);
            for (int j = 2; j < g.size(); ++j) reduce_into(out, g.slot(j) + at, count, r.dtype, r.op);
            if (r.op == ReduceOp::avg) finish_avg(out, count, r.dtype, r.avg_ranks);
        }
        done += count;
    } while (done < r.count);
}

void barrier(Group& g, Engine& engine) {
    g.next_buffers();
    g.sync(engine, true);
}

void allreduce_hierarchical(Group& g, Engine& engine, const std::vector<std::string>& hosts, const Reduction& r) {
    allreduce(g, engine, r, false);  // avg stays a sum until the ring divides once
    if (engine.rank() == g.ranks().front()) {
        std::set<std::string> seen;
        std::vector<int> leaders;  // each host's lowest rank, ascending
        for (int rank = 0; rank < static_cast<int>(hosts.size()); ++rank)
            if (seen.insert(hosts[rank]).second) leaders.push_back(rank);
        Reduction across = r;
        across.in = r.out;
        allreduce_ring(engine, leaders, across, 100);
    }
    broadcast(g, engine, r.out, r.count * r.element, 0);
}

}  // namespace cohort::comm::shm
