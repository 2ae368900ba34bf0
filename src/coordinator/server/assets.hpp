// The dashboard's files (src/coordinator/server/dashboard/ and Debian's
// Chart.js), compiled into the library by cmake/embed_assets.cmake so the
// coordinator serves them with nothing to install and nothing fetched from
// elsewhere.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace cohort::coord::server {

struct EmbeddedFile {
    std::string_view name;
    const unsigned char* data;
    std::size_t size;
};

// Defined in the generated dashboard_assets.cpp.
extern const EmbeddedFile kEmbeddedFiles[];
extern const std::size_t kEmbeddedFileCount;

struct Asset {
    std::string_view body;
    std::string_view content_type;
};

// The file served at /dashboard/<name> (index.html is served at /).
std::optional<Asset> find_asset(std::string_view name);

}  // namespace cohort::coord::server
