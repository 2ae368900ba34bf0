#include <cohort/error.hpp>
#include <cohort/topology.hpp>

#include <fmt/format.h>

namespace cohort {

void Topology::add(Node node) {
    if (node.id.empty()) throw Error(Errc::invalid_argument, "node id must not be empty");
    if (index_.count(node.id) != 0)
        throw Error(Errc::invalid_argument, fmt::format("duplicate node id '{}'", node.id));
    index_.emplace(node.id, nodes_.size());
    nodes_.push_back(std::move(node));
}

std::optional<std::size_t> Topology::find(std::string_view id) const {
    auto it = index_.find(std::string(id));
    if (it == index_.end()) return std::nullopt;
    return it->second;
}

Node& Topology::at(std::string_view id) {
    auto index = find(id);
    if (!index) throw Error(Errc::not_found, fmt::format("no node with id '{}' in the topology", id));
    return nodes_[*index];
}

}  // namespace cohort
