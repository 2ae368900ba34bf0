// comm/reduce.hpp kernels against a scalar reference, comm/half.hpp
// conversions, and the dtype / reduce op names and parsers.
#include "comm/reduce.hpp"
#include "comm/half.hpp"

#include <cohort/dtype.hpp>
#include <cohort/error.hpp>
#include <cohort/reduce_op.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace cohort::comm {
namespace {

constexpr DataType all_types[] = {DataType::float32, DataType::float64, DataType::float16, DataType::bfloat16,
                                  DataType::int32,   DataType::int64,   DataType::uint8};
constexpr ReduceOp all_ops[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg};

uint64_t test_seed() {
    static const uint64_t seed = [] {
        const char* fixed = std::getenv("COHORT_TEST_SEED");
        const uint64_t s = fixed ? std::strtoull(fixed, nullptr, 10) : std::random_device{}();
        std::cout << "reduce_test seed " << s << " (set COHORT_TEST_SEED to repeat)\n";
        return s;
    }();
    return seed;
}

// Rounds `d` to nearest-even in a binary format with `digits` significand
// bits, smallest subnormal 2^min_exp and largest finite `max_finite`, by
// scaling instead of bit manipulation so that it checks half.hpp
// independently. The result is exact in float, where half.hpp's exact
// conversions encode it.
float round_to_format(double d, int digits, int min_exp, double max_finite) {
    if (std::isnan(d) || std::isinf(d) || d == 0) return static_cast<float>(d);
    const int scale = std::max(std::ilogb(std::fabs(d)) - (digits - 1), min_exp);
    const double rounded = std::ldexp(std::nearbyint(std::ldexp(d, -scale)), scale);
    if (std::fabs(rounded) > max_finite) return std::copysign(std::numeric_limits<float>::infinity(), d);
    return static_cast<float>(rounded);
}
uint16_t ref_half(double d) { return float_to_half(round_to_format(d, 11, -24, 65504.0)); }
uint16_t ref_bfloat16(double d) {
    return float_to_bfloat16(round_to_format(d, 8, -133, std::ldexp(255.0, 120)));
}

bool is_nan(DataType t, uint64_t bits) {
    switch (t) {
        case DataType::float32: return std::isnan(std::bit_cast<float>(static_cast<uint32_t>(bits)));
        case DataType::float64: return std::isnan(std::bit_cast<double>(bits));
        case DataType::float16: return (bits & 0x7fff) > 0x7c00;
        case DataType::bfloat16: return (bits & 0x7fff) > 0x7f80;
        default: return false;
    }
}

double to_double(DataType t, uint64_t bits) {
    switch (t) {
        case DataType::float32: return std::bit_cast<float>(static_cast<uint32_t>(bits));
        case DataType::float64: return std::bit_cast<double>(bits);
        case DataType::float16: return half_to_float(static_cast<uint16_t>(bits));
        default: return bfloat16_to_float(static_cast<uint16_t>(bits));
    }
}

// Exact for every op and type except float64 sum and prod, which are a
// single IEEE operation anyway; narrower types round once from double.
uint64_t ref_float(DataType t, ReduceOp op, uint64_t a_bits, uint64_t b_bits) {
    const double a = to_double(t, a_bits), b = to_double(t, b_bits);
    if (op == ReduceOp::min || op == ReduceOp::max) {
        if (std::isnan(a) || std::isnan(b)) return is_nan(t, a_bits) ? a_bits : b_bits;
        if (a == b) return (std::signbit(a) == (op == ReduceOp::min)) ? a_bits : b_bits;
        return ((a < b) == (op == ReduceOp::min)) ? a_bits : b_bits;
    }
    const double r = op == ReduceOp::prod ? a * b : a + b;
    switch (t) {
        case DataType::float32: return std::bit_cast<uint32_t>(static_cast<float>(r));
        case DataType::float64: return std::bit_cast<uint64_t>(r);
        case DataType::float16: return ref_half(r);
        default: return ref_bfloat16(r);
    }
}

template <typename T>
T ref_int(ReduceOp op, T a, T b) {
    switch (op) {
        case ReduceOp::prod: return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
        case ReduceOp::min: return std::min(a, b);
        case ReduceOp::max: return std::max(a, b);
        default: return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    }
}

uint64_t ref(DataType t, ReduceOp op, uint64_t a, uint64_t b) {
    switch (t) {
        case DataType::int32:
            return static_cast<uint32_t>(ref_int<int32_t>(op, static_cast<int32_t>(a), static_cast<int32_t>(b)));
        case DataType::int64:
            return static_cast<uint64_t>(ref_int<int64_t>(op, static_cast<int64_t>(a), static_cast<int64_t>(b)));
        case DataType::uint8: return ref_int<uint8_t>(op, static_cast<uint8_t>(a), static_cast<uint8_t>(b));
        default: return ref_float(t, op, a, b);
    }
}

uint64_t get(const std::vector<std::byte>& buf, std::size_t offset, DataType t, std::size_t i) {
    uint64_t bits = 0;  // little-endian: the low bytes hold the element
    std::memcpy(&bits, buf.data() + offset + i * dtype_size(t), dtype_size(t));
    return bits;
}

// Random bit patterns for the 16-bit floats and integers; float32 and
// float64 mix ordinary values with zeros, infinities, NaNs and subnormals.
std::vector<std::byte> random_buffer(std::mt19937_64& rng, DataType t, std::size_t count, std::size_t offset) {
    std::vector<std::byte> buf(offset + count * dtype_size(t));
    for (std::size_t i = 0; i < count; ++i) {
        uint64_t bits = rng();
        if (t == DataType::float32 || t == DataType::float64) {
            const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, 1e-310, 1.0, -1.0, 1e300};
            const double v = rng() % 5 == 0 ? specials[rng() % 10] : std::ldexp(double(int64_t(rng())), -60);
            bits = t == DataType::float32 ? std::bit_cast<uint32_t>(static_cast<float>(v)) : std::bit_cast<uint64_t>(v);
            if (rng() % 97 == 0) bits = rng();  // NaNs with payloads, extreme exponents
        }
        std::memcpy(buf.data() + offset + i * dtype_size(t), &bits, dtype_size(t));
    }
    return buf;
}

TEST(Reduce, EveryTypeAndOpMatchesScalarReference) {
    std::mt19937_64 rng(test_seed());
    for (DataType t : all_types)
        for (ReduceOp op : all_ops)
            for (std::size_t count : {1u, 7u, 64u, 1037u}) {
                SCOPED_TRACE(::testing::Message() << dtype_name(t) << " " << reduce_op_name(op) << " count " << count
                                                  << " seed " << test_seed());
                const auto a = random_buffer(rng, t, count, 0);
                const auto b = random_buffer(rng, t, count, 0);
                auto into = a;
                reduce_into(into.data(), b.data(), count, t, op);
                for (std::size_t i = 0; i < count; ++i) {
                    const uint64_t want = ref(t, op, get(a, 0, t, i), get(b, 0, t, i)), got = get(into, 0, t, i);
                    if (is_nan(t, want))
                        ASSERT_TRUE(is_nan(t, got)) << "element " << i;
                    else
                        ASSERT_EQ(got, want) << "element " << i << ": " << get(a, 0, t, i) << " op " << get(b, 0, t, i);
                }
                // Commutative bit for bit, NaNs included, whichever entry point.
                std::vector<std::byte> to(a.size());
                reduce_to(to.data(), b.data(), a.data(), count, t, op);
                ASSERT_EQ(to, into);
                auto swapped = b;
                reduce_into(swapped.data(), a.data(), count, t, op);
                ASSERT_EQ(swapped, into);
                auto aliased = b;
                reduce_to(aliased.data(), a.data(), aliased.data(), count, t, op);
                ASSERT_EQ(aliased, into);
            }
}

TEST(Reduce, UnalignedBuffersGiveTheSameBytes) {
    std::mt19937_64 rng(test_seed() + 1);
    constexpr std::size_t count = 300;
    for (DataType t : all_types)
        for (ReduceOp op : all_ops) {
            SCOPED_TRACE(::testing::Message() << dtype_name(t) << " " << reduce_op_name(op));
            const auto a = random_buffer(rng, t, count, 0), b = random_buffer(rng, t, count, 0);
            auto aligned = a;
            reduce_into(aligned.data(), b.data(), count, t, op);
            for (std::size_t offset : {1u, 3u, 5u}) {
                std::vector<std::byte> ua(offset), ub(offset + 2);
                ua.insert(ua.end(), a.begin(), a.end());
                ub.insert(ub.end(), b.begin(), b.end());
                reduce_into(ua.data() + offset, ub.data() + offset + 2, count, t, op);
                ASSERT_TRUE(std::equal(aligned.begin(), aligned.end(), ua.begin() + offset)) << "offset " << offset;
                std::vector<std::byte> out(offset + a.size());
                reduce_to(out.data() + offset, a.data(), ub.data() + offset + 2, count, t, op);
                ASSERT_TRUE(std::equal(aligned.begin(), aligned.end(), out.begin() + offset)) << "offset " << offset;
            }
        }
}

TEST(Reduce, CountZeroTouchesNothing) {
    for (DataType t : all_types)
        for (ReduceOp op : all_ops) {
            reduce_into(nullptr, nullptr, 0, t, op);
            reduce_to(nullptr, nullptr, nullptr, 0, t, op);
            finish_avg(nullptr, 0, t, 4);
        }
}

// Reduces two arrays and returns the result, to keep small cases on a line.
template <typename T, std::size_t N>
std::vector<T> reduced(std::array<T, N> a, const std::array<T, N>& b, ReduceOp op) {
    reduce_into(a.data(), b.data(), N, dtype_of<T>::value, op);
    return {a.begin(), a.end()};
}

TEST(Reduce, IntegersWrapAround) {
    using V32 = std::vector<int32_t>;
    using V64 = std::vector<int64_t>;
    using V8 = std::vector<uint8_t>;
    constexpr int64_t two32 = int64_t{1} << 32;
    EXPECT_EQ((reduced<int32_t, 2>({INT32_MAX, INT32_MIN}, {1, -1}, ReduceOp::sum)), (V32{INT32_MIN, INT32_MAX}));
    EXPECT_EQ((reduced<int32_t, 2>({65536, INT32_MIN}, {65536, -1}, ReduceOp::prod)), (V32{0, INT32_MIN}));
    EXPECT_EQ((reduced<int64_t, 2>({INT64_MAX, INT64_MIN}, {1, -1}, ReduceOp::sum)), (V64{INT64_MIN, INT64_MAX}));
    EXPECT_EQ((reduced<int64_t, 2>({two32, INT64_MIN}, {two32, -1}, ReduceOp::prod)), (V64{0, INT64_MIN}));
    EXPECT_EQ((reduced<uint8_t, 3>({255, 200, 9}, {1, 100, 9}, ReduceOp::sum)), (V8{0, 44, 18}));
    EXPECT_EQ((reduced<uint8_t, 2>({16, 15}, {16, 17}, ReduceOp::prod)), (V8{0, 255}));
    EXPECT_EQ((reduced<uint8_t, 2>({0, 255}, {255, 0}, ReduceOp::avg)), (V8{255, 255}));
}

TEST(Reduce, MinMaxOfSignedZerosAndNaN) {
    const float a[] = {0.0f, -0.0f, NAN, 1.0f, -INFINITY};
    const float b[] = {-0.0f, 0.0f, 1.0f, NAN, 2.0f};
    float lo[5], hi[5];
    reduce_to(lo, a, b, 5, DataType::float32, ReduceOp::min);
    reduce_to(hi, a, b, 5, DataType::float32, ReduceOp::max);
    EXPECT_TRUE(std::signbit(lo[0]) && std::signbit(lo[1]));
    EXPECT_TRUE(!std::signbit(hi[0]) && !std::signbit(hi[1]));
    EXPECT_TRUE(std::isnan(lo[2]) && std::isnan(lo[3]) && std::isnan(hi[2]) && std::isnan(hi[3]));
    EXPECT_EQ(lo[4], -INFINITY);
    EXPECT_EQ(hi[4], 2.0f);
}

template <typename T, std::size_t N>
std::vector<T> averaged(std::array<T, N> sums, int ranks) {
    finish_avg(sums.data(), N, dtype_of<T>::value, ranks);
    return {sums.begin(), sums.end()};
}

TEST(FinishAvg, IntegersTruncateTowardZero) {
    EXPECT_EQ((averaged<int32_t, 4>({7, -7, INT32_MIN, 5}, 2)), (std::vector<int32_t>{3, -3, INT32_MIN / 2, 2}));
    EXPECT_EQ((averaged<int64_t, 2>({-10, INT64_MAX}, 3)), (std::vector<int64_t>{-3, INT64_MAX / 3}));
    EXPECT_EQ((averaged<uint8_t, 2>({255, 3}, 2)), (std::vector<uint8_t>{127, 1}));
    EXPECT_EQ((averaged<uint8_t, 1>({255}, 300)), std::vector<uint8_t>{0});  // more ranks than a uint8 holds
    EXPECT_EQ((averaged<int32_t, 1>({-9}, 1)), std::vector<int32_t>{-9});
}

TEST(FinishAvg, FloatsDivideAndRound) {
    const auto f32 = averaged<float, 3>({1.0f, 3.0f, -0.0f}, 3);
    EXPECT_EQ(f32[0], 1.0f / 3.0f);
    EXPECT_EQ(f32[1], 1.0f);
    EXPECT_TRUE(std::signbit(f32[2]));
    EXPECT_EQ((averaged<double, 1>({1.0}, 3)[0]), 1.0 / 3.0);
    // Every float16 and bfloat16 value against a once-rounded quotient.
    for (DataType t : {DataType::float16, DataType::bfloat16})
        for (int ranks : {3, 7}) {
            std::vector<uint16_t> values(65536);
            for (uint32_t h = 0; h < 65536; ++h) values[h] = static_cast<uint16_t>(h);
            finish_avg(values.data(), values.size(), t, ranks);
            for (uint32_t h = 0; h < 65536; ++h) {
                const double quotient = to_double(t, h) / ranks;
                if (std::isnan(quotient))
                    ASSERT_TRUE(is_nan(t, values[h])) << dtype_name(t) << " " << h;
                else
                    ASSERT_EQ(values[h], t == DataType::float16 ? ref_half(quotient) : ref_bfloat16(quotient))
                        << dtype_name(t) << " " << h << " / " << ranks;
            }
        }
}

TEST(Half, EveryBitPatternRoundTrips) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const auto x = static_cast<uint16_t>(h);
        const float f = half_to_float(x), g = bfloat16_to_float(x);
        const uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
        if (exponent == 31 && mantissa != 0) {
            ASSERT_TRUE(std::isnan(f)) << h;
            ASSERT_EQ(float_to_half(f), h | 0x200) << "NaNs are quieted and keep their payload: " << h;
        } else {
            const double value = exponent == 31 ? INFINITY
                                 : exponent == 0 ? std::ldexp(mantissa, -24)
                                                 : std::ldexp(mantissa + 1024, int(exponent) - 25);
            ASSERT_EQ(f, (h & 0x8000) ? -value : value) << h;
            ASSERT_EQ(float_to_half(f), h) << h;
        }
        if (std::isnan(g)) {
            ASSERT_TRUE(is_nan(DataType::bfloat16, float_to_bfloat16(g))) << h;
        } else {
            ASSERT_EQ(float_to_bfloat16(g), h) << h;
        }
    }
}

// Between each pair of neighbouring finite values: the midpoint goes to the
// even one, anything nearer to a neighbour goes to it.
template <typename ToFloat, typename FromFloat>
void check_rounding(uint16_t largest_finite, ToFloat to_float, FromFloat from_float) {
    for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
        for (uint32_t h = 0; h < largest_finite; ++h) {
            const auto lo = static_cast<uint16_t>(sign | h), hi = static_cast<uint16_t>(sign | (h + 1));
            // Exact: one bit more than the format, and no overflow at the top.
            const float mid = to_float(lo) + (to_float(hi) - to_float(lo)) / 2;
            ASSERT_EQ(from_float(mid), (h & 1) ? hi : lo) << "tie above " << h;
            ASSERT_EQ(from_float(std::nextafter(mid, to_float(lo))), lo) << "below the tie above " << h;
            ASSERT_EQ(from_float(std::nextafter(mid, to_float(hi))), hi) << "above the tie above " << h;
        }
        // Past the largest finite value, the tie and beyond go to infinity.
        const float top = to_float(static_cast<uint16_t>(sign | largest_finite));
        const float step = top - to_float(static_cast<uint16_t>(sign | (largest_finite - 1)));
        const auto inf = static_cast<uint16_t>(sign | (largest_finite + 1));
        ASSERT_EQ(from_float(std::nextafter(top + step / 2, top)), sign | largest_finite);
        ASSERT_EQ(from_float(top + step / 2), inf);
        ASSERT_EQ(from_float(std::nextafter(top + step / 2, 2 * top)), inf);
    }
}

TEST(Half, RoundsToNearestEven) {
    check_rounding(0x7bff, half_to_float, float_to_half);
    EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0);  // half the smallest subnormal: tie to zero
    EXPECT_EQ(float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 1);
    EXPECT_EQ(float_to_half(std::ldexp(1.5f, -24)), 2);
    EXPECT_EQ(float_to_half(-std::ldexp(1.0f, -30)), 0x8000);
    EXPECT_EQ(float_to_half(std::numeric_limits<float>::denorm_min()), 0);
    EXPECT_EQ(float_to_half(std::bit_cast<float>(0xff800001u)), 0xfe00);  // a signalling NaN stays NaN
}

TEST(BFloat16, RoundsToNearestEven) {
    check_rounding(0x7f7f, bfloat16_to_float, float_to_bfloat16);
    EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::denorm_min()), 0);
    EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x7f800001u)) & 0x7fc0, 0x7fc0);  // stays NaN
}

TEST(DataType, NamesSizesAndAliases) {
    const std::pair<const char*, std::size_t> expected[] = {
        {"float32", 4}, {"float64", 8}, {"float16", 2}, {"bfloat16", 2}, {"int32", 4}, {"int64", 8}, {"uint8", 1}};
    for (DataType t : all_types) {
        const auto& [name, size] = expected[static_cast<int>(t)];
        EXPECT_STREQ(dtype_name(t), name);
        EXPECT_EQ(dtype_size(t), size);
        EXPECT_TRUE(dtype_valid(t));
        EXPECT_EQ(parse_dtype(name), t);
    }
    EXPECT_EQ(parse_dtype("float"), DataType::float32);
    EXPECT_EQ(parse_dtype("double"), DataType::float64);
    EXPECT_EQ(parse_dtype("half"), DataType::float16);
    EXPECT_EQ(parse_dtype("bf16"), DataType::bfloat16);
    EXPECT_EQ(parse_dtype("int"), DataType::int32);
    EXPECT_EQ(parse_dtype("long"), DataType::int64);
    EXPECT_EQ(parse_dtype("byte"), DataType::uint8);
    for (int bad : {-1, 7, 1000}) {
        EXPECT_FALSE(dtype_valid(static_cast<DataType>(bad)));
        EXPECT_STREQ(dtype_name(static_cast<DataType>(bad)), "unknown");
        EXPECT_EQ(dtype_size(static_cast<DataType>(bad)), 0u);
    }
}

TEST(ReduceOp, NamesAndValidity) {
    const char* names[] = {"sum", "prod", "min", "max", "avg"};
    for (ReduceOp op : all_ops) {
        EXPECT_STREQ(reduce_op_name(op), names[static_cast<int>(op)]);
        EXPECT_TRUE(reduce_op_valid(op));
        EXPECT_EQ(parse_reduce_op(names[static_cast<int>(op)]), op);
    }
    EXPECT_FALSE(reduce_op_valid(static_cast<ReduceOp>(5)));
    EXPECT_FALSE(reduce_op_valid(static_cast<ReduceOp>(-1)));
    EXPECT_STREQ(reduce_op_name(static_cast<ReduceOp>(5)), "unknown");
}

template <typename Parse>
std::string parse_error(Parse parse, std::string_view text) {
    try {
        parse(text);
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::invalid_argument);
        return e.what();
    }
    ADD_FAILURE() << "'" << text << "' parsed";
    return {};
}

TEST(Parse, UnknownNamesSuggestTheClosest) {
    const std::string dtypes = "; expected one of float32, float64, float16, bfloat16, int32, int64, uint8";
    EXPECT_EQ(parse_error(parse_dtype, "flaot32"), "unknown dtype 'flaot32' (did you mean 'float32'?)" + dtypes);
    EXPECT_EQ(parse_error(parse_dtype, "Float32"), "unknown dtype 'Float32' (did you mean 'float32'?)" + dtypes);
    EXPECT_EQ(parse_error(parse_dtype, "doubel"), "unknown dtype 'doubel' (did you mean 'double'?)" + dtypes);
    EXPECT_EQ(parse_error(parse_dtype, "complex"), "unknown dtype 'complex'" + dtypes);
    EXPECT_EQ(parse_error(parse_dtype, ""), "unknown dtype ''" + dtypes);
    const std::string ops = "; expected one of sum, prod, min, max, avg";
    EXPECT_EQ(parse_error(parse_reduce_op, "summ"), "unknown reduce op 'summ' (did you mean 'sum'?)" + ops);
    EXPECT_EQ(parse_error(parse_reduce_op, "mx"), "unknown reduce op 'mx' (did you mean 'max'?)" + ops);
    EXPECT_EQ(parse_error(parse_reduce_op, "SUM"), "unknown reduce op 'SUM' (did you mean 'sum'?)" + ops);
    EXPECT_EQ(parse_error(parse_reduce_op, "median"), "unknown reduce op 'median'" + ops);
}

}  // namespace
}  // namespace cohort::comm
