// Broadcast: a binomial tree for small messages (log2(n) hops), a
// pipelined chain for large ones (each rank forwards chunk k while it
// receives chunk k+1, so the root sends the data once).
#include "comm/algorithms/algorithms.hpp"

namespace cohort::comm {
namespace {

void binomial(Engine& engine, std::byte* data, std::size_t bytes, int root) {
    const int n = engine.size();
    const int v = (engine.rank() - root + n) % n;
    int mask = 1;
    while (mask < n) {
        if (v & mask) {
            engine.run({Transfer::recv_from((v - mask + root) % n, data, bytes, 0)});
            break;
        }
        mask <<= 1;
    }
    std::vector<Transfer> sends;
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (v + mask < n) sends.push_back(Transfer::send_to((v + mask + root) % n, data, bytes, 0));
    if (!sends.empty()) engine.run(sends);
}

void chain(Engine& engine, std::byte* data, std::size_t bytes, int root, std::size_t chunk) {
    const int n = engine.size();
    const int v = (engine.rank() - root + n) % n;
    const int prev = (engine.rank() - 1 + n) % n, next = (engine.rank() + 1) % n;
    const std::size_t chunks = (bytes + chunk - 1) / chunk;
    auto piece = [&](std::size_t k) { return std::pair{data + k * chunk, std::min(chunk, bytes - k * chunk)}; };
    for (std::size_t k = 0; k <= chunks; ++k) {
        std::vector<Transfer> step;
        if (v > 0 && k < chunks) {
            auto [at, len] = piece(k);
            step.push_back(Transfer::recv_from(prev, at, len, uint32_t(k)));
        }
        // The root sends chunk k at step k; the others forward what they got
        // one step earlier.
        const std::size_t forward = v == 0 ? k : k - 1;
        if (v + 1 < n && (v == 0 ? k < chunks : k >= 1)) {
            auto [at, len] = piece(forward);
            step.push_back(Transfer::send_to(next, at, len, uint32_t(forward)));
        }
        if (!step.empty()) engine.run(step);
    }
}

}  // namespace

void broadcast(Engine& engine, std::byte* data, std::size_t bytes, int root, std::size_t chunk) {
    if (engine.size() == 1) return;
    if (bytes <= (std::size_t(256) << 10) || engine.size() == 2)
        binomial(engine, data, bytes, root);
    else
        chain(engine, data, bytes, root, chunk);
}

}  // namespace cohort::comm
