// Recursive doubling: in round k each rank swaps its whole partial result
// with the rank 2^k away, so small messages finish in log2(n) round trips.
// With n not a power of two, the first 2*(n - 2^k) ranks pair up first and
// the even one of each pair sits out until it receives the result. The
// dissemination barrier uses the same rounds with empty messages.
#include "comm/algorithms/algorithms.hpp"

#include "comm/reduce.hpp"

#include <cstring>

namespace cohort::comm {

void allreduce_doubling(Engine& engine, const Reduction& r) {
    const int n = engine.size(), rank = engine.rank();
    const std::size_t bytes = r.count * r.element;
    if (r.out != r.in && bytes > 0) std::memcpy(r.out, r.in, bytes);
    int pof2 = 1;
    while (pof2 * 2 <= n) pof2 *= 2;
    const int extra = n - pof2;
    std::byte* tmp = engine.scratch(bytes);

    int virtual_rank;  // position among the pof2 ranks that do the rounds, or -1
    if (rank < 2 * extra) {
        if (rank % 2 == 0) {
            engine.run({Transfer::send_to(rank + 1, r.out, bytes, 0)});
            virtual_rank = -1;
        } else {
            engine.run({Transfer::recv_from(rank - 1, tmp, bytes, 0)});
            reduce_into(r.out, tmp, r.count, r.dtype, r.op);
            virtual_rank = rank / 2;
        }
    } else {
        virtual_rank = rank - extra;
    }
    if (virtual_rank >= 0) {
        uint32_t round = 1;
        for (int mask = 1; mask < pof2; mask <<= 1, ++round) {
            const int pv = virtual_rank ^ mask;
            const int partner = pv < extra ? pv * 2 + 1 : pv + extra;
            engine.run({Transfer::send_to(partner, r.out, bytes, round),
                        Transfer::recv_from(partner, tmp, bytes, round)});
            reduce_into(r.out, tmp, r.count, r.dtype, r.op);  // commutative bit for bit
        }
        if (r.op == ReduceOp::avg) finish_avg(r.out, r.count, r.dtype, r.avg_ranks);
    }
    if (rank < 2 * extra) {
        if (rank % 2 == 1)
            engine.run({Transfer::send_to(rank - 1, r.out, bytes, 1000)});
        else
            engine.run({Transfer::recv_from(rank + 1, r.out, bytes, 1000)});
    }
}

void barrier(Engine& engine) {
    const int n = engine.size(), rank = engine.rank();
    uint32_t round = 0;
    for (int distance = 1; distance < n; distance <<= 1, ++round)
        engine.run({Transfer::send_to((rank + distance) % n, nullptr, 0, round),
                    Transfer::recv_from((rank - distance + n) % n, nullptr, 0, round)});
}

}  // namespace cohort::comm
