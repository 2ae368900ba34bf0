// Reading YAML and JSON files with errors that point at the place:
// "cluster.yaml:14:9: nodes[2].gpus: expected a non-negative integer".
// JSON is checked strictly by Boost.JSON, then both go through yaml-cpp
// (YAML 1.2 reads JSON) so one tree type carries line and column marks.
#pragma once

#include <cohort/format.hpp>

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace cohort::detail {

// Reads a whole file; throws Error(io) naming the path and the reason.
std::string read_text_file(const std::filesystem::path& path);
// yaml/json from the extension (.yaml, .yml, .json), else `otherwise`.
Format format_from_extension(const std::filesystem::path& path, Format otherwise);
// json if the first significant character opens an object or array, else yaml.
Format sniff_format(std::string_view text);

class Field;

class Document {
public:
    // Throws Error(parse) with source:line:column for malformed text.
    Document(std::string_view text, Format format, std::string source);
    Field root() const;
    const std::string& source() const { return source_; }

private:
    std::string source_;
    YAML::Node root_;
};

// A node of a document together with its field path, so that every check
// can say exactly where it failed.
class Field {
public:
    Field(const Document& document, YAML::Node node, std::string path);

    [[noreturn]] void fail(std::string_view what) const;
    const std::string& path() const { return path_; }
    const YAML::Node& node() const { return node_; }
    bool is_null() const { return node_.IsNull(); }

    // A mapping whose keys are all in `allowed` and unique; unknown keys fail
    // with a suggestion for likely typos.
    void expect_map(std::initializer_list<std::string_view> allowed) const;
    std::optional<Field> get(std::string_view key) const;
    // The entries of a sequence, in order.
    std::vector<Field> items() const;

    std::string as_string() const;          // a scalar, non-empty
    uint64_t as_size() const;               // integer bytes or "80GiB"; never negative
    uint64_t as_uint(uint64_t max) const;   // a non-negative integer <= max
    double as_double() const;

private:
    const Document* document_;
    YAML::Node node_;
    std::string path_;
};

}  // namespace cohort::detail
