// Element types a collective reduces. The values are the C ABI's
// COHORT_DTYPE_* constants (capi/cohort.h), so the conversion is a cast.
#pragma once

#include <cohort/export.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace cohort {

enum class DataType : int32_t {
    float32 = 0,
    float64 = 1,
    float16 = 2,   // IEEE 754 binary16
    bfloat16 = 3,  // the upper half of a float32
    int32 = 4,
    int64 = 5,
    uint8 = 6,
};

// Bytes per element; 0 for a value outside the enumeration.
COHORT_API std::size_t dtype_size(DataType type) noexcept;
// "float32", "bfloat16", ...; "unknown" for a value outside the enumeration.
COHORT_API const char* dtype_name(DataType type) noexcept;
// Accepts the names above and the aliases float, double, half, bf16, int,
// long, byte. Throws Error(invalid_argument) naming the closest name.
COHORT_API DataType parse_dtype(std::string_view name);
// True for a value inside the enumeration (values arrive from C and Python).
COHORT_API bool dtype_valid(DataType type) noexcept;
// The type a number from outside (C, Python) names: Error(invalid_argument)
// "<where>: dtype 9 is not a data type (0 float32 .. 6 uint8)" otherwise.
// The one check of a dtype: the Communicator and the C layer both call it.
COHORT_API DataType dtype_from(int64_t value, std::string_view where);

template <typename T>
struct dtype_of;
template <> struct dtype_of<float> { static constexpr DataType value = DataType::float32; };
template <> struct dtype_of<double> { static constexpr DataType value = DataType::float64; };
template <> struct dtype_of<int32_t> { static constexpr DataType value = DataType::int32; };
template <> struct dtype_of<int64_t> { static constexpr DataType value = DataType::int64; };
template <> struct dtype_of<uint8_t> { static constexpr DataType value = DataType::uint8; };

}  // namespace cohort
