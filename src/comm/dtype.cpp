// Names, sizes and parsing for DataType and ReduceOp.
#include <cohort/dtype.hpp>
#include <cohort/error.hpp>
#include <cohort/reduce_op.hpp>

#include "core/text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <span>
#include <string>
#include <utility>

namespace cohort {
namespace {

// Builds "unknown dtype 'flaot32' (did you mean 'float32'?); expected one of
// float32, float64, ...". Suggestions may be aliases, since those parse too.
[[noreturn]] void throw_unknown(std::string_view what, std::string_view name,
                                std::span<const std::string_view> canonical,
                                std::span<const std::string_view> accepted) {
    std::string message = fmt::format("unknown {} '{}'", what, name);
    if (auto near = detail::closest_word(name, accepted)) message += fmt::format(" (did you mean '{}'?)", *near);
    message += fmt::format("; expected one of {}", fmt::join(canonical, ", "));
    throw Error(Errc::invalid_argument, std::move(message));
}

// Indexed by the enumerators' values.
constexpr std::array<std::string_view, 7> dtype_names = {"float32", "float64", "float16", "bfloat16",
                                                         "int32",   "int64",   "uint8"};
static_assert(static_cast<int>(DataType::uint8) == 6);

struct Alias {
    std::string_view name;
    DataType type;
};
constexpr std::array<Alias, 7> dtype_aliases = {{{"float", DataType::float32},
                                                 {"double", DataType::float64},
                                                 {"half", DataType::float16},
                                                 {"bf16", DataType::bfloat16},
                                                 {"int", DataType::int32},
                                                 {"long", DataType::int64},
                                                 {"byte", DataType::uint8}}};

constexpr std::array<std::string_view, 5> op_names = {"sum", "prod", "min", "max", "avg"};
static_assert(static_cast<int>(ReduceOp::avg) == 4);

}  // namespace

bool dtype_valid(DataType type) noexcept {
    const auto value = static_cast<int32_t>(type);
    return value >= 0 && value < static_cast<int32_t>(dtype_names.size());
}

std::size_t dtype_size(DataType type) noexcept {
    switch (type) {
        case DataType::float32: return 4;
        case DataType::float64: return 8;
        case DataType::float16: return 2;
        case DataType::bfloat16: return 2;
        case DataType::int32: return 4;
        case DataType::int64: return 8;
        case DataType::uint8: return 1;
    }
    return 0;
}

const char* dtype_name(DataType type) noexcept {
    // The array's views point at string literals, so data() is terminated.
    return dtype_valid(type) ? dtype_names[static_cast<std::size_t>(type)].data() : "unknown";
}

DataType parse_dtype(std::string_view name) {
    for (std::size_t i = 0; i < dtype_names.size(); ++i)
        if (name == dtype_names[i]) return static_cast<DataType>(i);
    for (const Alias& alias : dtype_aliases)
        if (name == alias.name) return alias.type;
    std::array<std::string_view, dtype_names.size() + dtype_aliases.size()> accepted{};
    std::size_t n = 0;
    for (std::string_view canonical : dtype_names) accepted[n++] = canonical;
    for (const Alias& alias : dtype_aliases) accepted[n++] = alias.name;
    throw_unknown("dtype", name, dtype_names, accepted);
}

bool reduce_op_valid(ReduceOp op) noexcept {
    const auto value = static_cast<int32_t>(op);
    return value >= 0 && value < static_cast<int32_t>(op_names.size());
}

const char* reduce_op_name(ReduceOp op) noexcept {
    return reduce_op_valid(op) ? op_names[static_cast<std::size_t>(op)].data() : "unknown";
}

namespace {

// "<where>: dtype 9 is not a data type (0 float32 .. 6 uint8)".
template <std::size_t N>
int64_t checked_index(int64_t value, std::string_view where, std::string_view what, std::string_view kind,
                      const std::array<std::string_view, N>& names) {
    if (value < 0 || value >= static_cast<int64_t>(N)) {
        throw Error(Errc::invalid_argument, fmt::format("{}: {} {} is not {} (0 {} .. {} {})", where, what, value, kind,
                                                        names.front(), N - 1, names.back()));
    }
    return value;
}

}  // namespace

DataType dtype_from(int64_t value, std::string_view where) {
    return static_cast<DataType>(checked_index(value, where, "dtype", "a data type", dtype_names));
}

ReduceOp reduce_op_from(int64_t value, std::string_view where) {
    return static_cast<ReduceOp>(checked_index(value, where, "op", "a reduce op", op_names));
}

ReduceOp parse_reduce_op(std::string_view name) {
    for (std::size_t i = 0; i < op_names.size(); ++i)
        if (name == op_names[i]) return static_cast<ReduceOp>(i);
    throw_unknown("reduce op", name, op_names, op_names);
}

}  // namespace cohort
