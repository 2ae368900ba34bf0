// Element-wise reduction kernels for every DataType and ReduceOp. Each
// kernel is commutative bit for bit (reduce(a, b) == reduce(b, a)), which is
// what lets every algorithm hand every rank identical bytes.
#pragma once

#include <cohort/dtype.hpp>
#include <cohort/reduce_op.hpp>

#include <cstddef>

namespace cohort::comm {

// dst[i] = dst[i] OP src[i] for `count` elements. avg reduces as sum; call
// finish_avg once at the end. float16 and bfloat16 compute in float32 and
// round to nearest even.
void reduce_into(void* dst, const void* src, std::size_t count, DataType dtype, ReduceOp op) noexcept;

// out[i] = a[i] OP b[i]; `out` may alias `a` or `b`.
void reduce_to(void* out, const void* a, const void* b, std::size_t count, DataType dtype, ReduceOp op) noexcept;

// Divides each element by `ranks` (integer division for integer types).
void finish_avg(void* data, std::size_t count, DataType dtype, int ranks) noexcept;

}  // namespace cohort::comm
