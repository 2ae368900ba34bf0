// Slurm host list expansion. Names are split on the commas outside
// brackets; each bracket group is a comma list of numbers or ranges.
#include "elastic/slurm/hostlist.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>

namespace cohort::detail {
namespace {

constexpr std::size_t kMostNames = 100000;

[[noreturn]] void bad(std::string_view list, std::size_t at, std::string_view why) {
    throw Error(Errc::parse, fmt::format("host list '{}', at character {}: {} (a Slurm host list looks like "
                                         "'node[01-04,07],login1')",
                                         list, at + 1, why));
}

uint64_t number(std::string_view list, std::size_t at, std::string_view text) {
    uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value > 1'000'000'000)
        bad(list, at, fmt::format("'{}' is not a node number", text));
    return value;
}

// The numbers of one bracket group ("0-2,05"), formatted.
std::vector<std::string> numbers(std::string_view list, std::size_t at, std::string_view group) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= group.size()) {
        std::size_t comma = group.find(',', start);
        if (comma == std::string_view::npos) comma = group.size();
        const std::string_view item = group.substr(start, comma - start);
        const std::size_t dash = item.find('-');
        if (dash == std::string_view::npos) {
            number(list, at + start, item);
            out.emplace_back(item);
        } else {
            const std::string_view low_text = item.substr(0, dash);
            const uint64_t low = number(list, at + start, low_text);
            const uint64_t high = number(list, at + start + dash + 1, item.substr(dash + 1));
            if (high < low) bad(list, at + start, fmt::format("the range '{}' runs backwards", item));
            if (high - low >= kMostNames) bad(list, at + start, fmt::format("the range '{}' is too long", item));
            for (uint64_t n = low; n <= high; ++n) out.push_back(fmt::format("{:0{}}", n, low_text.size()));
        }
        start = comma + 1;
    }
    return out;
}

// One name with its bracket groups, expanded.
void expand_one(std::string_view list, std::size_t at, std::string_view name, std::vector<std::string>& out) {
    if (name.empty()) bad(list, at, "an empty node name");
    std::vector<std::string> partial{""};
    std::size_t i = 0;
    while (i < name.size()) {
        const std::size_t open = name.find('[', i);
        const std::string_view text = name.substr(i, open == std::string_view::npos ? name.npos : open - i);
        if (text.find(']') != std::string_view::npos) bad(list, at + i, "a ']' without its '['");
        for (std::string& p : partial) p += text;
        if (open == std::string_view::npos) break;
        const std::size_t close = name.find(']', open);
        if (close == std::string_view::npos) bad(list, at + open, "a '[' without its ']'");
        const std::vector<std::string> group = numbers(list, at + open + 1, name.substr(open + 1, close - open - 1));
        if (partial.size() * group.size() > kMostNames) bad(list, at, "more than 100000 node names");
        std::vector<std::string> next;
        next.reserve(partial.size() * group.size());
        for (const std::string& p : partial)
            for (const std::string& g : group) next.push_back(p + g);
        partial = std::move(next);
        i = close + 1;
    }
    for (std::string& p : partial) out.push_back(std::move(p));
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view list) {
    std::vector<std::string> names;
    std::size_t start = 0, depth = 0, open_at = 0;
    for (std::size_t i = 0; i <= list.size(); ++i) {
        const char c = i < list.size() ? list[i] : ',';
        if (c == '[') {
            if (depth++ > 0) bad(list, i, "a '[' inside brackets");
            open_at = i;
        } else if (c == ']') {
            if (depth == 0) bad(list, i, "a ']' without its '['");
            --depth;
        } else if (c == ',' && depth == 0) {
            expand_one(list, start, list.substr(start, i - start), names);
            if (names.size() > kMostNames) bad(list, start, "more than 100000 node names");
            start = i + 1;
        } else if (c == ' ' || c == '\t' || c == '\n') {
            bad(list, i, "a space inside the list");
        }
    }
    if (depth != 0) bad(list, open_at, "a '[' without its ']'");
    // Each once, in the order given.
    std::vector<std::string> out;
    std::set<std::string> seen;
    for (std::string& n : names)
        if (seen.insert(n).second) out.push_back(std::move(n));
    return out;
}

}  // namespace cohort::detail
