// Reading a byte range of a file with pread, into memory or into a staging
// file; every error names the file and the offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace cohort::data {

// Reads `out.size()` bytes at `offset`; Error(io) when the file cannot be
// read or ends first.
void read_range(const std::filesystem::path& path, uint64_t offset, std::span<std::byte> out);

// Copies `length` bytes at `offset` into `target` (written as target.part,
// then renamed, so a reader never sees half a file).
void stage_range(const std::filesystem::path& path, uint64_t offset, uint64_t length,
                 const std::filesystem::path& target);

}  // namespace cohort::data
