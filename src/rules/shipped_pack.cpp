#include "rules/shipped_pack.hpp"

#include <cohort/error.hpp>

#include <cstdlib>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace cohort::detail {
namespace {

// The directory of the file this code was loaded from: libcohort.so, or
// the program when linked statically.
std::filesystem::path library_directory() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&library_directory), &info) == 0 || info.dli_fname == nullptr) return {};
    std::error_code ec;
    auto path = std::filesystem::canonical(info.dli_fname, ec);
    return ec ? std::filesystem::path(info.dli_fname).parent_path() : path.parent_path();
}

}  // namespace

std::filesystem::path find_shipped_pack(std::string_view file, std::string_view what, std::string_view advice) {
    std::vector<std::string> looked;
    auto try_dir = [&](const std::filesystem::path& dir) -> std::optional<std::filesystem::path> {
        const auto path = dir / file;
        std::error_code ec;
        if (std::filesystem::is_regular_file(path, ec)) return path;
        looked.push_back(path.string());
        return std::nullopt;
    };
    if (const char* env = std::getenv("COHORT_RULES_DIR"); env != nullptr && *env != '\0') {
        if (auto found = try_dir(env)) return *found;
    } else {
        looked.push_back("$COHORT_RULES_DIR (not set)");
    }
    if (auto dir = library_directory(); !dir.empty())
        if (auto found = try_dir((dir / ".." / "share" / "cohort" / "rules").lexically_normal())) return *found;
#ifdef COHORT_SOURCE_RULES_DIR
    if (auto found = try_dir(COHORT_SOURCE_RULES_DIR)) return *found;
#endif
    throw Error(Errc::not_found,
                fmt::format("{} {} was not found; looked in: {}. {}", what, file, fmt::join(looked, ", "), advice));
}

}  // namespace cohort::detail
