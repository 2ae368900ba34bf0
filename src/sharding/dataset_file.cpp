// Dataset listings: YAML/JSON (`files: [{path, bytes, records}]`) or text,
// one "PATH BYTES [RECORDS]" line per file (docs/formats.md).
#include "config/document.hpp"
#include "core/text.hpp"

#include <cohort/dataset.hpp>
#include <cohort/error.hpp>

#include <cctype>
#include <charconv>
#include <vector>

#include <fmt/format.h>

namespace cohort {

namespace {

using detail::Field;

Dataset read_structured(const detail::Document& document) {
    const Field root = document.root();
    if (root.is_null()) root.fail("empty document: expected a mapping with a 'files' list");
    root.expect_map({"name", "files"});
    if (auto name = root.get("name")) name->as_string();
    auto files = root.get("files");
    if (!files) root.fail("missing required field 'files'");
    const auto items = files->items();
    if (items.empty()) files->fail("empty dataset: 'files' must list at least one file");
    Dataset dataset;
    for (const Field& item : items) {
        item.expect_map({"path", "bytes", "records"});
        DataFile file;
        auto path = item.get("path");
        if (!path) item.fail("missing required field 'path'");
        file.path = path->as_string();
        auto bytes = item.get("bytes");
        if (!bytes) item.fail("missing required field 'bytes'");
        file.bytes = bytes->as_size();
        if (auto records = item.get("records")) file.records = records->as_uint(UINT64_MAX - 1);
        if (auto first = dataset.find(file.path))
            path->fail(fmt::format("duplicate file '{}' (first listed at {}[{}])", file.path, files->path(), *first));
        try {
            dataset.add(std::move(file));
        } catch (const Error& e) {
            item.fail(e.what());
        }
    }
    return dataset;
}

std::vector<std::pair<std::string_view, std::size_t>> split_fields(std::string_view line) {
    // TAB-separated when the line has a TAB (paths may then hold spaces),
    // else whitespace-separated. Each field comes with its 0-based column.
    std::vector<std::pair<std::string_view, std::size_t>> fields;
    const bool tabs = line.find('\t') != std::string_view::npos;
    std::size_t i = 0;
    while (i < line.size()) {
        if (tabs ? line[i] == '\t' : std::isspace(static_cast<unsigned char>(line[i])) != 0) {
            ++i;
            continue;
        }
        std::size_t end = i;
        while (end < line.size() && (tabs ? line[end] != '\t' : std::isspace(static_cast<unsigned char>(line[end])) == 0))
            ++end;
        std::string_view field = line.substr(i, end - i);
        while (!field.empty() && std::isspace(static_cast<unsigned char>(field.back()))) field.remove_suffix(1);
        if (!field.empty()) fields.emplace_back(field, i);
        i = end;
    }
    return fields;
}

Dataset read_listing(std::string_view text, const std::string& source) {
    Dataset dataset;
    std::size_t line_number = 0;
    std::size_t start = 0;
    while (start <= text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(start, end - start);
        start = end + 1;
        ++line_number;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        const auto fields = split_fields(line);
        if (fields.empty() || fields[0].first.front() == '#') {
            if (end == text.size()) break;
            continue;
        }
        auto fail = [&](std::size_t column, std::string_view what) {
            throw Error(Errc::parse, fmt::format("{}:{}:{}: {}", source, line_number, column + 1, what));
        };
        if (fields.size() < 2 || fields.size() > 3) {
            fail(fields[0].second, fmt::format("expected 'PATH BYTES [RECORDS]', got {} field{}", fields.size(),
                                               fields.size() == 1 ? "" : "s"));
        }
        DataFile file;
        file.path = std::string(fields[0].first);
        const auto [size_text, size_column] = fields[1];
        if (size_text.front() == '-') fail(size_column, fmt::format("size must not be negative, got {}", size_text));
        auto bytes = detail::parse_size(size_text);
        if (!bytes) fail(size_column, fmt::format("expected a size in bytes such as 1024 or 64MiB, got '{}'", size_text));
        file.bytes = *bytes;
        if (fields.size() == 3) {
            const auto [records_text, records_column] = fields[2];
            uint64_t records = 0;
            auto [p, ec] = std::from_chars(records_text.data(), records_text.data() + records_text.size(), records);
            if (ec != std::errc() || p != records_text.data() + records_text.size() || records == UINT64_MAX)
                fail(records_column, fmt::format("expected a record count (a non-negative integer), got '{}'", records_text));
            file.records = records;
        }
        if (auto first = dataset.find(file.path)) {
            (void)first;
            fail(fields[0].second, fmt::format("duplicate file '{}'", file.path));
        }
        try {
            dataset.add(std::move(file));
        } catch (const Error& e) {
            fail(fields[0].second, e.what());
        }
        if (end == text.size()) break;
    }
    if (dataset.size() == 0)
        throw Error(Errc::parse, fmt::format("{}: empty dataset: no 'PATH BYTES' lines", source));
    return dataset;
}

// A listing unless the text looks like YAML/JSON with a 'files' key.
Format sniff_dataset(std::string_view text) {
    if (detail::sniff_format(text) == Format::json) return Format::json;
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t end = text.find('\n', pos);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(pos, end - pos);
        if (line.rfind("files:", 0) == 0 || line.rfind("name:", 0) == 0) return Format::yaml;
        pos = end + 1;
    }
    return Format::listing;
}

}  // namespace

Dataset Dataset::from_file(const std::filesystem::path& path) {
    const std::string text = detail::read_text_file(path);
    Format format = detail::format_from_extension(path, Format::automatic);
    return from_string(text, format, path.string());
}

Dataset Dataset::from_string(std::string_view text, Format format, std::string_view source_name) {
    if (format == Format::automatic) format = sniff_dataset(text);
    if (format == Format::listing) return read_listing(text, std::string(source_name));
    return read_structured(detail::Document(text, format, std::string(source_name)));
}

}  // namespace cohort
