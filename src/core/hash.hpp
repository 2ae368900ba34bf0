// Fixed, platform-independent hashing and random numbers: plans and epoch
// orders must come out the same on every rank, compiler and machine, so
// nothing here may use std::hash or the <random> distributions.
#pragma once

#include <cstdint>
#include <string_view>

namespace cohort::detail {

// 128-bit products for exact fractions of 64-bit sizes (GCC and Clang).
__extension__ typedef unsigned __int128 uint128;

// SplitMix64's finaliser: a bijective 64-bit mix with full avalanche.
constexpr uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

constexpr uint64_t hash_combine(uint64_t a, uint64_t b) {
    return mix64(a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2)));
}

// FNV-1a followed by mix64, for names.
constexpr uint64_t hash_string(std::string_view text, uint64_t seed = 0) {
    uint64_t h = 0xcbf29ce484222325ULL ^ mix64(seed);
    for (unsigned char c : text) {
        h ^= c;
        h *= 0x100000001b3ULL;
    }
    return mix64(h);
}

// SplitMix64 generator with an unbiased bounded draw (Lemire's method).
class Rng {
public:
    explicit constexpr Rng(uint64_t seed) : state_(seed) {}
    constexpr uint64_t next() {
        state_ += 0x9e3779b97f4a7c15ULL;
        return mix64(state_);
    }
    // Uniform in [0, bound), bound > 0.
    uint64_t below(uint64_t bound) {
        uint128 m = static_cast<uint128>(next()) * bound;
        auto low = static_cast<uint64_t>(m);
        if (low < bound) {
            const uint64_t threshold = (0 - bound) % bound;
            while (low < threshold) {
                m = static_cast<uint128>(next()) * bound;
                low = static_cast<uint64_t>(m);
            }
        }
        return static_cast<uint64_t>(m >> 64);
    }
    // Uniform in [0, 1).
    double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
    uint64_t state_;
};

}  // namespace cohort::detail
