#include <cohort/dataset.hpp>
#include <cohort/error.hpp>

#include <fmt/format.h>

namespace cohort {

void Dataset::add(DataFile file) {
    if (file.path.empty()) throw Error(Errc::invalid_argument, "dataset file path must not be empty");
    if (index_.count(file.path) != 0)
        throw Error(Errc::invalid_argument, fmt::format("duplicate dataset file '{}'", file.path));
    if (file.bytes == 0 && file.records.value_or(0) != 0) {
        throw Error(Errc::invalid_argument,
                    fmt::format("dataset file '{}' has 0 bytes but {} records", file.path, *file.records));
    }
    constexpr uint64_t kMaxTotal = uint64_t{1} << 63;
    if (file.bytes > kMaxTotal - total_bytes_) {
        throw Error(Errc::invalid_argument,
                    fmt::format("dataset file '{}': total size would pass 2^63 bytes", file.path));
    }
    total_bytes_ += file.bytes;
    index_.emplace(file.path, files_.size());
    files_.push_back(std::move(file));
}

std::optional<std::size_t> Dataset::find(std::string_view path) const {
    auto it = index_.find(std::string(path));
    if (it == index_.end()) return std::nullopt;
    return it->second;
}

}  // namespace cohort
