// float16 (IEEE binary16) and bfloat16 <-> float conversions in portable
// code, so the kernels need no F16C or AVX512-BF16 at build time.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace cohort::comm {

// Both half conversions are branch-free so that the float16 kernels
// vectorise: the floating-point unit does the variable shifts and the
// rounding (Maratyszcza's FP16 method), and selects are masks because GCC
// moves a ternary's float arithmetic into branches it cannot if-convert.
// They assume the default round-to-nearest mode; flush-to-zero changes no
// result, as a float subnormal only arises far below a half's smallest one.

// Exact: every binary16 value is a float.
inline float half_to_float(uint16_t h) noexcept {
    const uint32_t w = uint32_t{h} << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t unsigned_w = w + w;  // exponent in the top 5 bits, mantissa below
    // Normal, infinity, NaN: move the fields into place, add 224 to the
    // exponent (half's 31 becomes float's 255), then scale the finite ones
    // back by 2^-112 to undo the difference of the biases.
    const float normal = std::bit_cast<float>((unsigned_w >> 4) + (0xe0u << 23)) * 0x1.0p-112f;
    // Subnormal: 0.5 + m * 2^-24 is exact with 0.5's exponent; subtract 0.5.
    const float subnormal = std::bit_cast<float>((unsigned_w >> 17) | (126u << 23)) - 0.5f;
    const uint32_t is_subnormal = 0u - uint32_t{unsigned_w < (1u << 27)};
    const uint32_t magnitude =
        (std::bit_cast<uint32_t>(subnormal) & is_subnormal) | (std::bit_cast<uint32_t>(normal) & ~is_subnormal);
    return std::bit_cast<float>(sign | magnitude);
}

// Rounds to nearest, ties to even. A NaN stays a NaN: it is quieted and
// keeps the top of its payload.
inline uint16_t float_to_half(float f) noexcept {
    const uint32_t w = std::bit_cast<uint32_t>(f);
    const uint32_t unsigned_w = w + w;
    const auto sign = static_cast<uint16_t>((w >> 16) & 0x8000u);
    // Times 4, but anything from 2^16 up overflows to infinity on the way.
    const float scaled = (std::fabs(f) * 0x1.0p+112f) * 0x1.0p-110f;
    // In 2^(e+15) + 4|f|, e being f's exponent but at least a half's -14,
    // the sum's last bit is worth the last bit of f as a half, so the adder
    // rounds f to a half (subnormals included); the half's exponent and
    // mantissa then sit in the sum's low bits.
    uint32_t bias = unsigned_w & 0xff000000u;
    bias = bias < 0x71000000u ? 0x71000000u : bias;
    const uint32_t sum = std::bit_cast<uint32_t>(std::bit_cast<float>((bias >> 1) + 0x07800000u) + scaled);
    const uint32_t magnitude = ((sum >> 13) & 0x7c00u) + (sum & 0x0fffu);
    const uint32_t nan = 0x7e00u | ((w >> 13) & 0x3ffu);
    const uint32_t is_nan = 0u - uint32_t{unsigned_w > 0xff000000u};
    return static_cast<uint16_t>(sign | (nan & is_nan) | (magnitude & ~is_nan));
}

inline float bfloat16_to_float(uint16_t b) noexcept { return std::bit_cast<float>(uint32_t{b} << 16); }

// Rounds to nearest, ties to even; overflow becomes infinity by the same
// carry. A NaN is quieted so that truncation cannot turn it into infinity.
inline uint16_t float_to_bfloat16(float f) noexcept {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace cohort::comm
