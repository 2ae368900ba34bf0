#include <cohort/node.hpp>

#include <cassert>

namespace cohort {

namespace {

constexpr std::string_view kRoleNames[] = {"worker", "chief", "evaluator", "parameter_server",
                                           "coordinator"};
constexpr std::string_view kStatusNames[] = {"ready", "joining", "draining", "down"};
constexpr std::string_view kLevelNames[] = {"host", "switch", "rack", "zone", "region"};

template <typename T, std::size_t N>
std::optional<T> parse_name(const std::string_view (&names)[N], std::string_view text) {
    for (std::size_t i = 0; i < N; ++i)
        if (names[i] == text) return static_cast<T>(i);
    return std::nullopt;
}

}  // namespace

std::string_view to_string(Role role) noexcept { return kRoleNames[static_cast<int>(role)]; }
std::string_view to_string(NodeStatus status) noexcept { return kStatusNames[static_cast<int>(status)]; }
std::string_view to_string(Level level) noexcept { return kLevelNames[static_cast<int>(level)]; }

std::optional<Role> parse_role(std::string_view text) noexcept {
    if (text == "ps") return Role::parameter_server;  // the name TensorFlow uses
    return parse_name<Role>(kRoleNames, text);
}
std::optional<NodeStatus> parse_status(std::string_view text) noexcept {
    return parse_name<NodeStatus>(kStatusNames, text);
}
std::optional<Level> parse_level(std::string_view text) noexcept {
    return parse_name<Level>(kLevelNames, text);
}

const std::string& Node::label(Level level) const {
    assert(level != Level::host);
    return labels[static_cast<int>(level) - 1];
}

void Node::set_label(Level level, std::string value) {
    assert(level != Level::host);
    labels[static_cast<int>(level) - 1] = std::move(value);
}

}  // namespace cohort
