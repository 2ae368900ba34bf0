// The memory-bandwidth limit of an all-reduce among ranks of one machine,
// measured by bench_allreduce in the same run as the all-reduces themselves.
//
// What bounds it: whatever the transport, every rank must at least read its
// input (S bytes) and write its output (S bytes), and in a shared-memory
// all-reduce all n ranks do that at once, sharing the memory bus. The
// cheapest pattern that does exactly that is one streaming copy of S bytes
// per rank, all n ranks copying at the same time. So
//
//     t_min(S) = S / memcpy_rate(n)
//
// where memcpy_rate(n) is the bytes per second one rank copies (counted
// once, not as read plus write) while n ranks copy concurrently. Every row
// then reports t_min / time, the fraction of that limit it reached.
//
// It is a floor, not a target that can always be met: a real all-reduce also
// reads its peers' contributions (n - 1 more reads of S/n per rank in a
// reduce-scatter plus all-gather) and synchronises. It says how far from the
// hardware a result is. For sizes that fit in the caches the limit is loose
// (the copy measured here streams from DRAM), and small sizes are bound by
// latency anyway: read the column for sizes well past the last-level cache.
//
// The read rate (sum of a buffer of uint64, n ranks at once) is printed
// beside it for reference: it is the ceiling of a reduction that only reads.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

namespace membw {

struct Rates {
    double memcpy_gbps = 0;  // bytes copied per second by one rank, n copying at once, / 1e9
    double read_gbps = 0;    // bytes summed per second by one rank, n reading at once, / 1e9
    int ranks = 0;
    std::size_t bytes = 0;  // the buffer each rank copied and read
    int repeats = 0;        // how many rounds the best was taken from
};

// Summed with four independent accumulators so the compiler vectorises it
// and the adds never wait on each other: the loop runs at memory speed.
inline std::uint64_t sum_words(const std::uint64_t* words, std::size_t count) {
    std::uint64_t a = 0, b = 0, c = 0, d = 0;
    std::size_t i = 0;
    for (; i + 4 <= count; i += 4) {
        a += words[i];
        b += words[i + 1];
        c += words[i + 2];
        d += words[i + 3];
    }
    for (; i < count; ++i) a += words[i];
    return a + b + c + d;
}

// One round of `work` on every rank at once, started together after a
// barrier; the slowest rank's seconds (the rate every rank can count on
// while all of them run).
template <typename Work>
double concurrent_seconds(MPI_Comm comm, Work&& work) {
    MPI_Barrier(comm);
    const auto start = std::chrono::steady_clock::now();
    work();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, comm);
    return seconds;
}

// Every rank of `comm` calls it. Best of at most `max_repeats` rounds of
// each kind, stopping earlier once the rounds have taken `max_seconds`
// (every rank agrees, as the times are reduced). Throws when the buffers
// cannot be allocated.
inline Rates measure(MPI_Comm comm, std::size_t bytes, int max_repeats = 5, double max_seconds = 3.0) {
    Rates rates;
    MPI_Comm_size(comm, &rates.ranks);
    rates.bytes = bytes;
    const std::size_t words = bytes / sizeof(std::uint64_t);
    std::unique_ptr<std::uint64_t[]> src(new (std::nothrow) std::uint64_t[words]);
    std::unique_ptr<std::uint64_t[]> dst(new (std::nothrow) std::uint64_t[words]);
    if (!src || !dst)
        throw std::runtime_error("memory bandwidth: cannot allocate two buffers of " + std::to_string(bytes) +
                                 " bytes per rank (use --mem-bytes to shrink them, 0 to skip)");
    // Touch every page first: page faults are not memory bandwidth.
    for (std::size_t i = 0; i < words; ++i) src[i] = i;
    std::memset(dst.get(), 1, words * sizeof(std::uint64_t));

    double best_copy = 1e300;
    double best_read = 1e300;
    volatile std::uint64_t sink = 0;  // keeps the sums from being optimised away
    double spent = 0;
    for (int round = 0; round < max_repeats && (round < 1 || spent < max_seconds); ++round) {
        const double copy = concurrent_seconds(comm, [&] {
            std::memcpy(dst.get(), src.get(), words * sizeof(std::uint64_t));
        });
        const double read = concurrent_seconds(comm, [&] { sink = sink + sum_words(dst.get(), words); });
        best_copy = std::min(best_copy, copy);
        best_read = std::min(best_read, read);
        spent += copy + read;
        rates.repeats = round + 1;
    }
    const double moved = double(words * sizeof(std::uint64_t));
    rates.memcpy_gbps = moved / best_copy / 1e9;
    rates.read_gbps = moved / best_read / 1e9;
    return rates;
}

// t_min(S) / seconds: the fraction of the memory limit a result reached.
inline double fraction_of_limit(const Rates& rates, std::size_t bytes, double seconds) {
    if (rates.memcpy_gbps <= 0 || seconds <= 0) return 0;
    return double(bytes) / (rates.memcpy_gbps * 1e9) / seconds;
}

}  // namespace membw
