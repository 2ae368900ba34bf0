// The cluster: a set of nodes with unique ids, loaded from YAML/JSON or built
// in code. The file schema is in docs/formats.md.
#pragma once

#include <cohort/export.hpp>

#include <cohort/format.hpp>
#include <cohort/node.hpp>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cohort {

class COHORT_API Topology {
public:
    Topology() = default;

    // Throws Error(parse) naming file:line:column and the field path, or
    // Error(io) when the file cannot be read.
    static Topology from_file(const std::filesystem::path& path);
    static Topology from_string(std::string_view text, Format format = Format::automatic,
                                std::string_view source_name = "<string>");

    // Throws Error(invalid_argument) on an empty or duplicate id.
    void add(Node node);
    std::span<const Node> nodes() const { return nodes_; }
    std::size_t size() const { return nodes_.size(); }
    bool empty() const { return nodes_.empty(); }
    const Node& operator[](std::size_t index) const { return nodes_[index]; }
    std::optional<std::size_t> find(std::string_view id) const;
    // Throws Error(not_found) naming the id.
    Node& at(std::string_view id);

    // The cluster's name, from the file's `name`; may be empty.
    const std::string& name() const { return name_; }
    void set_name(std::string name) { name_ = std::move(name); }

    // The file schema, as JSON text.
    std::string to_json() const;

private:
    std::string name_;
    std::vector<Node> nodes_;
    std::unordered_map<std::string, std::size_t> index_;
};

}  // namespace cohort
