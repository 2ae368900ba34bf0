// Locality maps on disk: {NODE_ID: {FILE_PATH: SCORE}} in YAML or JSON.
#include "config/document.hpp"

#include <cohort/error.hpp>
#include <cohort/sharding.hpp>

#include <set>

#include <fmt/format.h>

namespace cohort {

std::vector<LocalityEntry> load_locality(const std::filesystem::path& path) {
    const std::string text = detail::read_text_file(path);
    const detail::Document document(text, detail::format_from_extension(path, Format::automatic), path.string());
    const detail::Field root = document.root();
    if (!root.node().IsMap()) root.fail("expected a mapping of node id to {file path: score}");
    std::vector<LocalityEntry> entries;
    std::set<std::string> nodes;
    for (const auto& node_entry : root.node()) {
        if (!node_entry.first.IsScalar()) detail::Field(document, node_entry.first, "").fail("node ids must be plain text");
        const std::string node_id = node_entry.first.Scalar();
        if (!nodes.insert(node_id).second)
            detail::Field(document, node_entry.first, node_id).fail(fmt::format("duplicate node '{}'", node_id));
        std::set<std::string> files_seen;
        const detail::Field files(document, node_entry.second, node_id);
        if (!files.node().IsMap()) files.fail("expected a mapping of file path to score in [0, 1]");
        for (const auto& file_entry : files.node()) {
            if (!file_entry.first.IsScalar()) files.fail("file paths must be plain text");
            const std::string file = file_entry.first.Scalar();
            if (!files_seen.insert(file).second) {
                detail::Field(document, file_entry.first, fmt::format("{}.{}", node_id, file))
                    .fail(fmt::format("duplicate file '{}'", file));
            }
            const detail::Field score(document, file_entry.second, fmt::format("{}.{}", node_id, file));
            const double value = score.as_double();
            if (!(value >= 0.0 && value <= 1.0)) score.fail(fmt::format("score must be in [0, 1], got {}", value));
            entries.push_back({node_id, file, value});
        }
    }
    return entries;
}

}  // namespace cohort
