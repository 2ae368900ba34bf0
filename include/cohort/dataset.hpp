// A dataset: the files training reads, with their sizes in bytes and, when
// known, their record counts. Formats are in docs/formats.md.
#pragma once

#include <cohort/export.hpp>
#include <cohort/format.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cohort {

struct DataFile {
    std::string path;
    uint64_t bytes = 0;
    std::optional<uint64_t> records;
};

class COHORT_API Dataset {
public:
    Dataset() = default;

    // .yaml/.yml/.json by extension, otherwise a text listing
    // ("PATH BYTES [RECORDS]" per line). Errors name file:line:column.
    static Dataset from_file(const std::filesystem::path& path);
    static Dataset from_string(std::string_view text, Format format = Format::automatic,
                               std::string_view source_name = "<string>");

    // Throws Error(invalid_argument) on an empty or duplicate path, or a
    // total size past 2^63 bytes.
    void add(DataFile file);
    std::span<const DataFile> files() const { return files_; }
    std::size_t size() const { return files_.size(); }
    uint64_t total_bytes() const { return total_bytes_; }
    std::optional<std::size_t> find(std::string_view path) const;

private:
    std::vector<DataFile> files_;
    std::unordered_map<std::string, std::size_t> index_;
    uint64_t total_bytes_ = 0;
};

}  // namespace cohort
