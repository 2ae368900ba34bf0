// Reduction operators. The values are the C ABI's COHORT_OP_* constants.
#pragma once

#include <cohort/export.hpp>

#include <cstdint>
#include <string_view>

namespace cohort {

enum class ReduceOp : int32_t {
    sum = 0,
    prod = 1,
    min = 2,
    max = 3,
    avg = 4,  // the sum divided by the number of ranks (integer division for integer types)
};

COHORT_API const char* reduce_op_name(ReduceOp op) noexcept;
// Throws Error(invalid_argument) naming the closest name.
COHORT_API ReduceOp parse_reduce_op(std::string_view name);
COHORT_API bool reduce_op_valid(ReduceOp op) noexcept;
// The op a number from outside names: Error(invalid_argument) "<where>: op 7
// is not a reduce op (0 sum .. 4 avg)" otherwise.
COHORT_API ReduceOp reduce_op_from(int64_t value, std::string_view where);

}  // namespace cohort
