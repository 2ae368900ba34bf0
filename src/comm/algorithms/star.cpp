// Star all-reduce: rank 0 receives every contribution in rank order,
// reduces, and sends the result back. Simple and deterministic; the root's
// link carries everything, so it suits small worlds.
#include "comm/algorithms/algorithms.hpp"

#include "comm/reduce.hpp"

#include <cstring>

namespace cohort::comm {

void allreduce_star(Engine& engine, const Reduction& r) {
    const int n = engine.size();
    const std::size_t bytes = r.count * r.element, es = r.element;
    if (engine.rank() != 0) {
        engine.run({Transfer::send_to(0, r.in, bytes, 0)});
        engine.run({Transfer::recv_from(0, r.out, bytes, 1)});
        return;
    }
    if (r.out != r.in && bytes > 0) std::memcpy(r.out, r.in, bytes);
    std::byte* stage = engine.scratch(engine.stage_bytes());
    for (int peer = 1; peer < n; ++peer)
        engine.run({Transfer::recv_staged(peer, stage, bytes, 0, [&](std::size_t off, std::size_t len) {
            reduce_into(r.out + off, stage, len / es, r.dtype, r.op);
        })});
    if (r.op == ReduceOp::avg) finish_avg(r.out, r.count, r.dtype, r.avg_ranks);
    std::vector<Transfer> sends;
    for (int peer = 1; peer < n; ++peer) sends.push_back(Transfer::send_to(peer, r.out, bytes, 1));
    engine.run(sends);
}

}  // namespace cohort::comm
