// Shared-memory collectives: rounds of "write my slot, sync, read theirs".
#include "comm/shm/collectives.hpp"

#include "comm/reduce.hpp"

#include <algorithm>
#include <cstring>
#include <set>

namespace cohort::comm::shm {
namespace {

// Up to Reduction::single_round bytes (CommTuning::shm_single_round_max,
// 32 KiB by default) each rank reduces the whole message itself from every
// slot: one round, and a reading cost that small messages do not feel.
// Larger messages go in chunks of Reduction::chunk bytes per rank
// (CommTuning::pipeline_chunk), so the slots a round touches (ranks x
// chunk) stay in the processors' caches; 128 KiB measured best on a 2-core
// EPYC (32 KiB to 1 MiB tried), the Autotuner searches it per job.

void copy_bytes(std::byte* to, const std::byte* from, std::size_t bytes) {
    if (bytes > 0 && to != from) std::memcpy(to, from, bytes);
}

// out = slot(0) OP slot(1) OP ... in rank order, for elements [begin,
// begin + count) of the slots `ago` uses back.
void reduce_slots(const Group& g, std::byte* out, std::size_t begin, std::size_t count, const Reduction& r,
                  int ago = 0) {
    const std::size_t at = begin * r.element;
    reduce_to(out, g.slot(0, ago) + at, g.slot(1, ago) + at, count, r.dtype, r.op);
    for (int j = 2; j < g.size(); ++j) reduce_into(out, g.slot(j, ago) + at, count, r.dtype, r.op);
}

// One round per piece of `total` (at least one, so that an empty
// operation still meets): fill(at, length) writes this rank's slot, and
// drain(at, length) reads the slots once every rank filled its own.
template <typename Fill, typename Drain>
void rounds(Group& g, Engine& engine, std::size_t total, std::size_t piece, Fill fill, Drain drain) {
    bool first = true;
    std::size_t done = 0;
    do {
        const std::size_t length = std::min(piece, total - done);
        g.next_buffers();
        fill(done, length);
        g.sync(engine, first);
        first = false;
        drain(done, length);
        done += length;
    } while (done < total);
}

}  // namespace

void allreduce(Group& g, Engine& engine, const Reduction& r, bool finish) {
    const std::size_t es = r.element, bytes = r.count * es;
    const bool avg = finish && r.op == ReduceOp::avg;
    if (bytes <= std::min(r.single_round, g.slot_bytes())) {
        g.next_buffers();
        copy_bytes(g.mine(), r.in, bytes);
        g.sync(engine, true);
        if (bytes == 0) return;
        reduce_slots(g, r.out, 0, r.count, r);
        if (avg) finish_avg(r.out, r.count, r.dtype, r.avg_ranks);
        return;
    }
    // Pipelined over chunks, one round each: before round k a rank copies
    // chunk k into its slot and reduces its share of chunk k - 1 (whose
    // slots every rank filled before round k - 1) from every slot, into its
    // output and back into its own slot; after round k it copies the other
    // ranks' shares of chunk k - 1 out. A drain round ends the pipeline.
    const std::size_t per_chunk = std::max<std::size_t>(1, std::min(r.chunk, g.slot_bytes()) / es);
    const std::size_t chunks = (r.count + per_chunk - 1) / per_chunk;
    const int n = g.size(), me = g.me();
    for (std::size_t k = 0; k <= chunks; ++k) {
        g.next_buffers();
        if (k < chunks) {
            const std::size_t at = k * per_chunk;
            copy_bytes(g.mine(), r.in + at * es, std::min(per_chunk, r.count - at) * es);
        }
        const std::size_t prev_at = (k - 1) * per_chunk;
        const std::size_t prev_count = k > 0 ? std::min(per_chunk, r.count - prev_at) : 0;
        if (k > 0) {
            const Part share = part(prev_count, n, me);
            if (share.length > 0) {
                std::byte* mine = r.out + (prev_at + share.begin) * es;
                reduce_slots(g, mine, share.begin, share.length, r, 1);
                if (avg) finish_avg(mine, share.length, r.dtype, r.avg_ranks);
                std::memcpy(g.mine(1) + share.begin * es, mine, share.length * es);
            }
        }
        g.sync(engine, k == 0);
        for (int j = 0; k > 0 && j < n; ++j) {
            const Part theirs = part(prev_count, n, j);
            if (j != me && theirs.length > 0)
                std::memcpy(r.out + (prev_at + theirs.begin) * es, g.slot(j, 1) + theirs.begin * es,
                            theirs.length * es);
        }
    }
}

void broadcast(Group& g, Engine& engine, std::byte* data, std::size_t bytes, int root) {
    rounds(
        g, engine, bytes, g.slot_bytes(),
        [&](std::size_t at, std::size_t length) {
            if (g.me() == root) copy_bytes(g.mine(), data + at, length);
        },
        [&](std::size_t at, std::size_t length) {
            if (g.me() != root) copy_bytes(data + at, g.slot(root), length);
        });
}

void allgather(Group& g, Engine& engine, const std::byte* in, std::byte* out, std::size_t bytes) {
    rounds(
        g, engine, bytes, g.slot_bytes(),
        [&](std::size_t at, std::size_t length) { copy_bytes(g.mine(), in + at, length); },
        [&](std::size_t at, std::size_t length) {
            for (int j = 0; j < g.size() && length > 0; ++j)
                std::memmove(out + std::size_t(j) * bytes + at, g.slot(j), length);
        });
}

// Each rank copies a piece of every block into its slot, then reduces the
// piece of its own block from every slot. Pieces count elements here.
void reduce_scatter(Group& g, Engine& engine, const Reduction& r) {
    const std::size_t es = r.element, n = std::size_t(g.size()), block = r.count * es;
    const std::size_t piece = std::max<std::size_t>(1, g.slot_bytes() / n / es);
    const std::size_t me = std::size_t(g.me());
    rounds(
        g, engine, r.count, piece,
        [&](std::size_t at, std::size_t count) {
            for (std::size_t j = 0; j < n; ++j)
                copy_bytes(g.mine() + j * count * es, r.in + j * block + at * es, count * es);
        },
        [&](std::size_t at, std::size_t count) {
            if (count == 0) return;
            std::byte* out = r.out + at * es;
            reduce_slots(g, out, me * count, count, r);
            if (r.op == ReduceOp::avg) finish_avg(out, count, r.dtype, r.avg_ranks);
        });
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
