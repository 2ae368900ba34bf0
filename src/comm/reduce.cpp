// Reduction kernels: one loop per (element type, operator), picked once per
// call, so the per-element work is straight-line code the compiler vectorises.
#include "comm/reduce.hpp"

#include "comm/half.hpp"

#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace cohort::comm {
namespace {

// How an element is stored, and the type its arithmetic happens in.
template <typename T>
struct Native {
    using Storage = T;
    using Value = T;
    static T load(T v) noexcept { return v; }
    static T store(T v) noexcept { return v; }
};
struct Half {
    using Storage = uint16_t;
    using Value = float;
    static float load(uint16_t v) noexcept { return half_to_float(v); }
    static uint16_t store(float v) noexcept { return float_to_half(v); }
};
struct BFloat16 {
    using Storage = uint16_t;
    using Value = float;
    static float load(uint16_t v) noexcept { return bfloat16_to_float(v); }
    static uint16_t store(float v) noexcept { return float_to_bfloat16(v); }
};

// Buffers from C and Python may sit at any byte offset, so elements are
// read through 1-aligned types (may_alias: the caller's buffer may hold any
// type). Unlike memcpy, this keeps float64 min/max vectorisable: GCC folds
// such a memcpy into an integer load that the vectoriser then rejects.
template <typename T>
struct Unaligned;
template <> struct Unaligned<float> { typedef float type __attribute__((aligned(1), may_alias)); };
template <> struct Unaligned<double> { typedef double type __attribute__((aligned(1), may_alias)); };
template <> struct Unaligned<uint16_t> { typedef uint16_t type __attribute__((aligned(1), may_alias)); };
template <> struct Unaligned<int32_t> { typedef int32_t type __attribute__((aligned(1), may_alias)); };
template <> struct Unaligned<int64_t> { typedef int64_t type __attribute__((aligned(1), may_alias)); };
template <> struct Unaligned<uint8_t> { typedef uint8_t type __attribute__((aligned(1), may_alias)); };

template <typename E>
typename E::Value load(const std::byte* p, std::size_t i) noexcept {
    using U = typename Unaligned<typename E::Storage>::type;
    return E::load(reinterpret_cast<const U*>(p)[i]);
}
template <typename E>
void store(std::byte* p, std::size_t i, typename E::Value v) noexcept {
    using U = typename Unaligned<typename E::Storage>::type;
    reinterpret_cast<U*>(p)[i] = E::store(v);
}

template <typename T>
using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

// nan ? NaN : r. For float as a mask: given a ternary, GCC threads the NaN
// case past float_to_half into a branch and the float16 and bfloat16 loops
// stop vectorising. double keeps the ternary, since the vectoriser cannot
// widen a comparison into a 64-bit mask with SSE2 alone.
template <typename T>
T nan_if(bool nan, T r) noexcept {
    if constexpr (sizeof(T) == 8) {
        return nan ? std::numeric_limits<T>::quiet_NaN() : r;
    } else {
        const uint32_t mask = 0u - uint32_t{nan};
        const auto quiet = std::bit_cast<uint32_t>(std::numeric_limits<T>::quiet_NaN());
        return std::bit_cast<T>((quiet & mask) | (std::bit_cast<uint32_t>(r) & ~mask));
    }
}
// x86 gives a NaN result the payload of whichever operand comes first, so
// NaNs are replaced by one canonical NaN to keep a OP b == b OP a bit for bit.
template <typename T>
T canonical(T r) noexcept {
    return nan_if(r != r, r);
}

template <typename T>
T bits_or(T a, T b) noexcept {
    return std::bit_cast<T>(std::bit_cast<Bits<T>>(a) | std::bit_cast<Bits<T>>(b));
}
template <typename T>
T bits_and(T a, T b) noexcept {
    return std::bit_cast<T>(std::bit_cast<Bits<T>>(a) & std::bit_cast<Bits<T>>(b));
}

// Integers wrap: the arithmetic happens in the unsigned type, where
// overflow is defined, and converts back modulo 2^N (C++20).
struct Sum {
    template <typename T>
    static T apply(T a, T b) noexcept {
        if constexpr (std::is_floating_point_v<T>) {
            return canonical<T>(a + b);
        } else {
            using U = std::make_unsigned_t<T>;
            return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
        }
    }
};
struct Prod {
    template <typename T>
    static T apply(T a, T b) noexcept {
        if constexpr (std::is_floating_point_v<T>) {
            return canonical<T>(a * b);
        } else {
            using U = std::make_unsigned_t<T>;
            return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
        }
    }
};
// Floats: a NaN on either side gives NaN, and min(+0, -0) is -0 and max
// is +0 whichever side each comes from. Each ternary compiles to one SSE
// minps/maxps, which returns its second operand on a tie; taking both
// orders and combining the bits (OR keeps -0's sign, AND drops it) makes the
// tie symmetric, and ordinary values come out the same either way.
struct Min {
    template <typename T>
    static T apply(T a, T b) noexcept {
        if constexpr (std::is_floating_point_v<T>) {
            const T r = bits_or(a < b ? a : b, b < a ? b : a);
            return nan_if(a != a || b != b, r);
        } else {
            return a < b ? a : b;
        }
    }
};
struct Max {
    template <typename T>
    static T apply(T a, T b) noexcept {
        if constexpr (std::is_floating_point_v<T>) {
            const T r = bits_and(a > b ? a : b, b > a ? b : a);
            return nan_if(a != a || b != b, r);
        } else {
            return b < a ? a : b;
        }
    }
};

// GCC's -O2 vectoriser ("very cheap" cost model) only takes loops that need
// no scalar epilogue, so the bulk runs in blocks of a fixed element count
// and the remainder in a plain loop.
constexpr std::size_t block_bytes = 64;

template <typename E, typename Op>
void combine_into(std::byte* __restrict dst, const std::byte* __restrict src, std::size_t count) noexcept {
    constexpr std::size_t block = block_bytes / sizeof(typename E::Storage);
    std::size_t i = 0;
    for (; i + block <= count; i += block)
        for (std::size_t j = 0; j < block; ++j)
            store<E>(dst, i + j, Op::apply(load<E>(dst, i + j), load<E>(src, i + j)));
    for (; i < count; ++i) store<E>(dst, i, Op::apply(load<E>(dst, i), load<E>(src, i)));
}

template <typename E, typename Op>
void combine_to(std::byte* __restrict out, const std::byte* __restrict a, const std::byte* __restrict b,
                std::size_t count) noexcept {
    constexpr std::size_t block = block_bytes / sizeof(typename E::Storage);
    std::size_t i = 0;
    for (; i + block <= count; i += block)
        for (std::size_t j = 0; j < block; ++j)
            store<E>(out, i + j, Op::apply(load<E>(a, i + j), load<E>(b, i + j)));
    for (; i < count; ++i) store<E>(out, i, Op::apply(load<E>(a, i), load<E>(b, i)));
}

template <typename E>
void divide(std::byte* data, std::size_t count, int ranks) noexcept {
    using V = typename E::Value;
    if constexpr (std::is_floating_point_v<V>) {
        // A true division, not a multiply by 1/ranks, which can round differently.
        const V divisor = static_cast<V>(ranks);
        constexpr std::size_t block = block_bytes / sizeof(typename E::Storage);
        std::size_t i = 0;
        for (; i + block <= count; i += block)
            for (std::size_t j = 0; j < block; ++j) store<E>(data, i + j, load<E>(data, i + j) / divisor);
        for (; i < count; ++i) store<E>(data, i, load<E>(data, i) / divisor);
    } else {
        // uint8 and int32 divide as int, int64 as int64: truncation toward zero.
        using Wide = std::common_type_t<V, int>;
        const auto divisor = static_cast<Wide>(ranks);
        for (std::size_t i = 0; i < count; ++i) store<E>(data, i, static_cast<V>(load<E>(data, i) / divisor));
    }
}

struct IntoCall {
    std::byte* dst;
    const std::byte* src;
    std::size_t count;
    template <typename E, typename Op>
    void run() const noexcept {
        combine_into<E, Op>(dst, src, count);
    }
};
struct ToCall {
    std::byte* out;
    const std::byte* a;
    const std::byte* b;
    std::size_t count;
    template <typename E, typename Op>
    void run() const noexcept {
        combine_to<E, Op>(out, a, b, count);
    }
};

template <typename E, typename Call>
void by_op(ReduceOp op, const Call& call) noexcept {
    switch (op) {
        case ReduceOp::sum:
        case ReduceOp::avg: call.template run<E, Sum>(); break;
        case ReduceOp::prod: call.template run<E, Prod>(); break;
        case ReduceOp::min: call.template run<E, Min>(); break;
        case ReduceOp::max: call.template run<E, Max>(); break;
    }
}

// Values outside the enumerations do nothing: the public entry points
// validate them before any data moves.
template <typename Call>
void by_type(DataType dtype, ReduceOp op, const Call& call) noexcept {
    switch (dtype) {
        case DataType::float32: by_op<Native<float>>(op, call); break;
        case DataType::float64: by_op<Native<double>>(op, call); break;
        case DataType::float16: by_op<Half>(op, call); break;
        case DataType::bfloat16: by_op<BFloat16>(op, call); break;
        case DataType::int32: by_op<Native<int32_t>>(op, call); break;
        case DataType::int64: by_op<Native<int64_t>>(op, call); break;
        case DataType::uint8: by_op<Native<uint8_t>>(op, call); break;
    }
}

}  // namespace

void reduce_into(void* dst, const void* src, std::size_t count, DataType dtype, ReduceOp op) noexcept {
    if (count == 0) return;
    by_type(dtype, op, IntoCall{static_cast<std::byte*>(dst), static_cast<const std::byte*>(src), count});
}

void reduce_to(void* out, const void* a, const void* b, std::size_t count, DataType dtype, ReduceOp op) noexcept {
    if (count == 0) return;
    // The restrict loops must not see `out` twice; since every kernel is
    // commutative, out == b reduces a into it with the same result.
    if (out == a) return reduce_into(out, b, count, dtype, op);
    if (out == b) return reduce_into(out, a, count, dtype, op);
    by_type(dtype, op,
            ToCall{static_cast<std::byte*>(out), static_cast<const std::byte*>(a), static_cast<const std::byte*>(b),
                   count});
}

void finish_avg(void* data, std::size_t count, DataType dtype, int ranks) noexcept {
    if (count == 0 || ranks <= 1) return;
    auto* bytes = static_cast<std::byte*>(data);
    switch (dtype) {
        case DataType::float32: divide<Native<float>>(bytes, count, ranks); break;
        case DataType::float64: divide<Native<double>>(bytes, count, ranks); break;
        case DataType::float16: divide<Half>(bytes, count, ranks); break;
        case DataType::bfloat16: divide<BFloat16>(bytes, count, ranks); break;
        case DataType::int32: divide<Native<int32_t>>(bytes, count, ranks); break;
        case DataType::int64: divide<Native<int64_t>>(bytes, count, ranks); break;
        case DataType::uint8: divide<Native<uint8_t>>(bytes, count, ranks); break;
    }
}

}  // namespace cohort::comm
