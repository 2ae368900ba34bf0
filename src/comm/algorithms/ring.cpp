// Ring algorithms: each rank sends to the next and receives from the
// previous, so every link carries the same load and a rank sends
// 2(n-1)/n of the data for an all-reduce, whatever n is.
#include "comm/algorithms/algorithms.hpp"

#include "comm/reduce.hpp"

#include <cstring>

namespace cohort::comm {

void allreduce_ring(Engine& engine, std::span<const int> members, const Reduction& r, uint32_t tag_base,
                    const std::function<void(const Part& own)>& between) {
    const std::size_t m = members.size();
    std::size_t p = 0;
    while (members[p] != engine.rank()) ++p;
    const int left = members[(p + m - 1) % m], right = members[(p + 1) % m];
    const std::size_t es = r.element;
    if (m == 1) {
        if (r.out != r.in && r.count > 0) std::memcpy(r.out, r.in, r.count * es);
    } else {
        std::byte* stage = engine.scratch(engine.stage_bytes());
        for (std::size_t s = 0; s + 1 < m; ++s) {
            const Part send = part(r.count, m, (p + m - s) % m);
            const Part recv = part(r.count, m, (p + 2 * m - s - 1) % m);
            const std::byte* source = (s == 0 ? r.in : r.out) + send.begin * es;
            std::byte* acc = r.out + recv.begin * es;
            const std::byte* mine = r.in + recv.begin * es;
            engine.run({Transfer::send_to(right, source, send.length * es, tag_base + uint32_t(s)),
                        Transfer::recv_staged(left, stage, recv.length * es, tag_base + uint32_t(s),
                                              [&](std::size_t off, std::size_t len) {
                                                  reduce_to(acc + off, mine + off, stage, len / es, r.dtype, r.op);
                                              })});
        }
    }
    const Part own = part(r.count, m, (p + 1) % m);
    if (between)
        between(own);
    else if (r.op == ReduceOp::avg)
        finish_avg(r.out + own.begin * es, own.length, r.dtype, r.avg_ranks);
    for (std::size_t s = 0; s + 1 < m; ++s) {
        const Part send = part(r.count, m, (p + 1 + m - s) % m);
        const Part recv = part(r.count, m, (p + m - s) % m);
        const uint32_t tag = tag_base + uint32_t(m + s);
        engine.run({Transfer::send_to(right, r.out + send.begin * es, send.length * es, tag),
                    Transfer::recv_from(left, r.out + recv.begin * es, recv.length * es, tag)});
    }
}

void allgather_ring(Engine& engine, const std::byte* in, std::byte* out, std::size_t bytes) {
    const std::size_t n = engine.size(), p = engine.rank();
    if (out + p * bytes != in && bytes > 0) std::memmove(out + p * bytes, in, bytes);
    const int left = int((p + n - 1) % n), right = int((p + 1) % n);
    for (std::size_t s = 0; s + 1 < n; ++s) {
        const std::size_t send = (p + n - s) % n, recv = (p + 2 * n - s - 1) % n;
        engine.run({Transfer::send_to(right, out + send * bytes, bytes, uint32_t(s)),
                    Transfer::recv_from(left, out + recv * bytes, bytes, uint32_t(s))});
    }
}

// Segment i is block i; the indices are shifted by one from the all-reduce
// so that rank p ends owning block p. Partial sums travel in two scratch
// buffers, leaving `in` untouched.
void reduce_scatter_ring(Engine& engine, const Reduction& r) {
    const std::size_t n = engine.size(), p = engine.rank(), es = r.element, block = r.count * es;
    const int left = int((p + n - 1) % n), right = int((p + 1) % n);
    if (n == 1) {
        if (r.out != r.in && block > 0) std::memmove(r.out, r.in, block);
    } else {
        // The partial sums alternate between two buffers: one is being sent
        // while the other takes this step's sums. What arrives lands in the
        // stage, a piece at a time.
        std::byte* buffers[2] = {engine.scratch(block, 0), engine.scratch(block, 1)};
        std::byte* stage = engine.scratch(engine.stage_bytes(), 2);
        for (std::size_t s = 0; s + 1 < n; ++s) {
            const std::size_t send = (p + 2 * n - s - 1) % n, recv = (p + 2 * n - s - 2) % n;
            const std::byte* source = s == 0 ? r.in + send * block : buffers[(s + 1) % 2];
            const std::byte* mine = r.in + recv * block;
            const bool last = s + 2 == n;
            std::byte* acc = last ? r.out : buffers[s % 2];
            engine.run({Transfer::send_to(right, source, block, uint32_t(s)),
                        Transfer::recv_staged(left, stage, block, uint32_t(s), [&](std::size_t off, std::size_t len) {
                            reduce_to(acc + off, mine + off, stage, len / es, r.dtype, r.op);
                        })});
        }
    }
    if (r.op == ReduceOp::avg) finish_avg(r.out, r.count, r.dtype, r.avg_ranks);
}

}  // namespace cohort::comm
