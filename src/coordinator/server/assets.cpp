// Looking up an embedded dashboard file and its content type.
#include "coordinator/server/assets.hpp"

namespace cohort::coord::server {

namespace {

std::string_view content_type(std::string_view name) {
    if (name.ends_with(".html")) return "text/html; charset=utf-8";
    if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
    if (name.ends_with(".css")) return "text/css; charset=utf-8";
    return "application/octet-stream";
}

}  // namespace

std::optional<Asset> find_asset(std::string_view name) {
    for (std::size_t i = 0; i < kEmbeddedFileCount; ++i) {
        const EmbeddedFile& f = kEmbeddedFiles[i];
        if (f.name == name) {
            return Asset{std::string_view(reinterpret_cast<const char*>(f.data), f.size), content_type(name)};
        }
    }
    return std::nullopt;
}

}  // namespace cohort::coord::server
