// The collective algorithms. Each one only moves and reduces data through
// the Engine; the Communicator has checked the arguments and opened the
// operation. Ranks below are global ranks.
#pragma once

#include "comm/engine.hpp"

#include <cohort/dtype.hpp>
#include <cohort/reduce_op.hpp>

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace cohort::comm {

struct Reduction {
    const std::byte* in = nullptr;
    std::byte* out = nullptr;  // may equal `in`
    std::size_t count = 0;     // elements
    DataType dtype = DataType::float32;
    ReduceOp op = ReduceOp::sum;
    std::size_t element = 4;   // bytes per element
    int avg_ranks = 1;         // the divisor for avg: every rank of the communicator
    // Shared memory's cuts (CommTuning): reduced whole up to `single_round`
    // bytes, else in rounds of `chunk` bytes. Every rank must agree.
    std::size_t single_round = std::size_t(32) << 10;
    std::size_t chunk = std::size_t(128) << 10;
};

// Element range [begin, begin + length) of part `i` of `count` cut into `parts`.
struct Part {
    std::size_t begin;
    std::size_t length;
};
inline Part part(std::size_t count, std::size_t parts, std::size_t i) {
    const std::size_t base = count / parts, extra = count % parts;
    return {i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

// Reduce-scatter then allgather around `members` (in ring order); every
// member ends with the whole reduction in `out`. With `between`, the member
// at position p calls it on the part it owns after the reduce-scatter, part
// (p + 1) % members.size() (its sum, avg not yet divided), and the
// allgather then spreads what it left there; without, avg is divided there.
void allreduce_ring(Engine& engine, std::span<const int> members, const Reduction& r, uint32_t tag_base = 0,
                    const std::function<void(const Part& own)>& between = {});
void allreduce_star(Engine& engine, const Reduction& r);
void allreduce_doubling(Engine& engine, const Reduction& r);
// hosts[rank] is the host label of each rank.
void allreduce_hierarchical(Engine& engine, const std::vector<std::string>& hosts, const Reduction& r);

void broadcast(Engine& engine, std::byte* data, std::size_t bytes, int root, std::size_t chunk);
void allgather_ring(Engine& engine, const std::byte* in, std::byte* out, std::size_t bytes);
// `r.in` holds size() blocks of r.count elements; `r.out` gets this rank's.
void reduce_scatter_ring(Engine& engine, const Reduction& r);
void barrier(Engine& engine);

}  // namespace cohort::comm
