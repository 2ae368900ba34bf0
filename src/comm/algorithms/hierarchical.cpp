// Hierarchical all-reduce: ranks on one host reduce to their host's leader
// (its lowest rank) over the fast local links, the leaders run a ring over
// the network, and each leader hands the result back to its host. Only
// leaders cross hosts, so the network carries one copy per host, not per
// rank.
#include "comm/algorithms/algorithms.hpp"

#include "comm/reduce.hpp"

#include <cstring>
#include <map>

namespace cohort::comm {

void allreduce_hierarchical(Engine& engine, const std::vector<std::string>& hosts, const Reduction& r) {
    std::map<std::string, std::vector<int>> by_host;
    for (int rank = 0; rank < engine.size(); ++rank) by_host[hosts[rank]].push_back(rank);
    std::vector<int> leaders;
    for (const auto& [host, ranks] : by_host) leaders.push_back(ranks.front());
    std::sort(leaders.begin(), leaders.end());
    const std::vector<int>& local = by_host[hosts[engine.rank()]];
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

}  // namespace cohort::comm
