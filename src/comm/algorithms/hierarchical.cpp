// Hierarchical all-reduce over the engine's links (direct copies or TCP
// inside a host, TCP between hosts), for hosts without shared memory. The
// network carries one copy of the data per host, not one per rank.
//
// With the same number of ranks k on every host, the host's ranks run a
// ring reduce-scatter among themselves, so local rank j holds its host's
// sum of part j of k; local rank j of every host then all-reduce part j in
// a ring across the hosts; and the host's ranks allgather the parts. Every
// rank crosses hosts with 1/k of the data, so the host's link carries the
// same bytes as one leader would, but k ranks share the work, and a local
// step moves 1/k of the data where the leaders' gather moved all of it.
// The parts and the rings across hosts are those of the shared-memory
// version (shm/collectives.cpp), so hosts with and without shared memory
// agree on what crosses between them.
//
// With unequal hosts, the host's ranks reduce to its leader (its lowest
// rank), the leaders run a ring, and each leader hands the result back.
#include "comm/algorithms/algorithms.hpp"

#include "comm/reduce.hpp"

#include <algorithm>
#include <cstring>
#include <map>

namespace cohort::comm {
namespace {

void leaders_ring(Engine& engine, const std::vector<int>& local, const std::vector<int>& leaders,
                  const Reduction& r) {
    const int leader = local.front();
    const std::size_t bytes = r.count * r.element, es = r.element;
    if (engine.rank() != leader) {
        engine.run({Transfer::send_to(leader, r.in, bytes, 0)});
        engine.run({Transfer::recv_from(leader, r.out, bytes, 1)});
        return;
    }
    if (r.out != r.in && bytes > 0) std::memcpy(r.out, r.in, bytes);
    if (local.size() > 1) {
        std::byte* stage = engine.scratch(engine.stage_bytes(), 1);  // the ring below uses slot 0
        for (std::size_t i = 1; i < local.size(); ++i)
            engine.run({Transfer::recv_staged(local[i], stage, bytes, 0, [&](std::size_t off, std::size_t len) {
                reduce_into(r.out + off, stage, len / es, r.dtype, r.op);
            })});
    }
    Reduction across = r;
    across.in = r.out;
    allreduce_ring(engine, leaders, across, 100);
    if (local.size() > 1) {
        std::vector<Transfer> sends;
        for (std::size_t i = 1; i < local.size(); ++i) sends.push_back(Transfer::send_to(local[i], r.out, bytes, 1));
        engine.run(sends);
    }
}

}  // namespace

void allreduce_hierarchical(Engine& engine, const std::vector<std::string>& hosts, const Reduction& r) {
    std::map<std::string, std::vector<int>> by_host;
    for (int rank = 0; rank < engine.size(); ++rank) by_host[hosts[rank]].push_back(rank);
    std::vector<std::vector<int>> host_ranks;  // ordered by each host's lowest rank
    for (const auto& [host, ranks] : by_host) host_ranks.push_back(ranks);
    std::sort(host_ranks.begin(), host_ranks.end());
    const std::vector<int>& local = by_host[hosts[engine.rank()]];
    const std::size_t k = local.size();
    const bool even = std::all_of(host_ranks.begin(), host_ranks.end(),
                                  [k](const std::vector<int>& ranks) { return ranks.size() == k; });
    if (!even || k == 1) {
        std::vector<int> leaders;
        for (const auto& ranks : host_ranks) leaders.push_back(ranks.front());
        leaders_ring(engine, local, leaders, r);
        return;
    }
    const std::size_t me = static_cast<std::size_t>(std::find(local.begin(), local.end(), engine.rank()) - local.begin());
    std::vector<int> peers;  // local rank `me` of every host
    for (const auto& ranks : host_ranks) peers.push_back(ranks[me]);
    // The ring's member at position p owns part p + 1 after its
    // reduce-scatter, so starting the ring at local rank 1 leaves local rank
    // j with part j, as the shared-memory version has it.
    std::vector<int> ring(k);
    for (std::size_t i = 0; i < k; ++i) ring[i] = local[(i + 1) % k];
    const std::size_t es = r.element;
    allreduce_ring(engine, ring, r, 0, [&](const Part& own) {
        Reduction across = r;  // avg is divided once, by this ring
        across.in = across.out = r.out + own.begin * es;
        across.count = own.length;
        allreduce_ring(engine, peers, across, 100);
    });
}

}  // namespace cohort::comm
