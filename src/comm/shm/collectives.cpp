// Shared-memory collectives: rounds of "write my slot, sync, read theirs".
#include "comm/shm/collectives.hpp"

#include "comm/reduce.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

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

// With the same number of ranks k on every host, the host's ranks first
// reduce-scatter the message into k parts through the slots, and local
// rank i then takes part i across hosts, in a ring with local rank i of
// every other host: k rings at once, each carrying 1/k of what a leaders'
// ring would, so every rank's core and connection work, where the leaders'
// ring left the others idle (on 2 emulated hosts of 2 ranks it was 0.6x
// Open MPI at 1 MiB). Each host's link carries the same bytes as before.
// The parts then meet again through the slots. Hosts with unequal rank
// counts keep the leaders' ring.
void allreduce_hierarchical(Group& g, Engine& engine, const std::vector<std::string>& hosts, const Reduction& r) {
    std::map<std::string, std::vector<int>> by_host;
    for (int rank = 0; rank < static_cast<int>(hosts.size()); ++rank) by_host[hosts[rank]].push_back(rank);
    std::vector<std::vector<int>> host_ranks;  // ordered by each host's lowest rank
    for (const auto& [host, ranks] : by_host) host_ranks.push_back(ranks);
    std::sort(host_ranks.begin(), host_ranks.end());
    const std::size_t k = g.ranks().size(), me = static_cast<std::size_t>(g.me());
    const bool even = by_host[hosts[engine.rank()]] == g.ranks() &&
                      std::all_of(host_ranks.begin(), host_ranks.end(),
                                  [k](const std::vector<int>& ranks) { return ranks.size() == k; });
    if (!even || k == 1) {
        allreduce(g, engine, r, false);  // avg stays a sum until the ring divides once
        if (me == 0) {
            std::vector<int> leaders;
            for (const auto& ranks : host_ranks) leaders.push_back(ranks.front());
            Reduction across = r;
            across.in = r.out;
            allreduce_ring(engine, leaders, across, 100);
        }
        broadcast(g, engine, r.out, r.count * r.element, 0);
        return;
    }
    std::vector<int> peers;  // local rank `me` of every host
    for (const auto& ranks : host_ranks) peers.push_back(ranks[me]);
    const std::size_t es = r.element;
    const Part mine = part(r.count, k, me);
    // The host's reduce-scatter: each round every rank puts a piece of
    // every part in its slot, and sums the piece of its own part from
    // every slot, in rank order. avg stays a sum until the ring divides.
    const std::size_t piece = std::max<std::size_t>(1, g.slot_bytes() / k / es);
    // The elements of part j within [at, at + length).
    auto clip_count = [&](std::size_t j, std::size_t at, std::size_t length) {
        const std::size_t count = part(r.count, k, j).length;
        return at < count ? std::min(length, count - at) : std::size_t(0);
    };
    rounds(
        g, engine, part(r.count, k, 0).length, piece,
        [&](std::size_t at, std::size_t length) {
            for (std::size_t j = 0; j < k; ++j)
                copy_bytes(g.mine() + j * piece * es, r.in + (part(r.count, k, j).begin + at) * es,
                           clip_count(j, at, length) * es);
        },
        [&](std::size_t at, std::size_t length) {
            if (const std::size_t count = clip_count(me, at, length); count > 0)
                reduce_slots(g, r.out + (mine.begin + at) * es, me * piece, count, r);
        });
    Reduction across = r;
    across.in = across.out = r.out + mine.begin * es;
    across.count = mine.length;
    allreduce_ring(engine, peers, across, 100);
    // Every rank's part into its slot, a slot's worth per round, and the
    // others' parts out of theirs.
    rounds(
        g, engine, part(r.count, k, 0).length, std::max<std::size_t>(1, g.slot_bytes() / es),
        [&](std::size_t at, std::size_t length) {
            copy_bytes(g.mine(), r.out + (mine.begin + at) * es, clip_count(me, at, length) * es);
        },
        [&](std::size_t at, std::size_t length) {
            for (std::size_t j = 0; j < k; ++j)
                if (j != me)
                    copy_bytes(r.out + (part(r.count, k, j).begin + at) * es, g.slot(int(j)),
                               clip_count(j, at, length) * es);
        });
}

}  // namespace cohort::comm::shm
