#include "core/text.hpp"

#include <cohort/units.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace cohort::detail {

namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

std::optional<double> unit_multiplier(std::string_view unit) {
    struct Unit {
        std::string_view name;
        double factor;
    };
    static constexpr Unit kUnits[] = {
        {"", 1.0},          {"b", 1.0},          {"k", 1024.0},       {"m", 1048576.0},
        {"g", 1073741824.0}, {"t", 1099511627776.0}, {"kb", 1e3},      {"mb", 1e6},
        {"gb", 1e9},         {"tb", 1e12},        {"pb", 1e15},        {"kib", 1024.0},
        {"mib", 1048576.0},  {"gib", 1073741824.0}, {"tib", 1099511627776.0},
        {"pib", 1125899906842624.0},
    };
    for (const Unit& u : kUnits)
        if (iequals(u.name, unit)) return u.factor;
    return std::nullopt;
}

}  // namespace

std::optional<uint64_t> parse_size(std::string_view text) {
    auto trim = [](std::string_view s) {
        while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
        while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
        return s;
    };
    text = trim(text);
    std::size_t digits = 0;
    while (digits < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.'))
        ++digits;
    if (digits == 0) return std::nullopt;
    const std::string_view number = text.substr(0, digits);
    const std::string_view unit = trim(text.substr(digits));
    const auto factor = unit_multiplier(unit);
    if (!factor) return std::nullopt;
    if (number.find('.') == std::string_view::npos) {
        uint64_t value = 0;
        auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
        if (ec != std::errc() || end != number.data() + number.size()) return std::nullopt;
        const auto f = static_cast<uint64_t>(*factor);
        if (value != 0 && f > (uint64_t{1} << 63) / value) return std::nullopt;
        return value * f;
    }
    double value = 0;
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (ec != std::errc() || end != number.data() + number.size()) return std::nullopt;
    const double bytes = std::round(value * *factor);
    if (!(bytes >= 0) || bytes > 0x1p63) return std::nullopt;
    return static_cast<uint64_t>(bytes);
}

std::optional<double> parse_duration(std::string_view text) {
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
    if (text.empty()) return std::nullopt;
    double total = 0;
    bool first = true;
    while (!text.empty()) {
        std::size_t digits = 0;
        while (digits < text.size() &&
               (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.'))
            ++digits;
        double value = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + digits, value);
        if (digits == 0 || ec != std::errc() || end != text.data() + digits) return std::nullopt;
        text.remove_prefix(digits);
        std::size_t letters = 0;
        while (letters < text.size() && std::isalpha(static_cast<unsigned char>(text[letters]))) ++letters;
        const std::string_view unit = text.substr(0, letters);
        text.remove_prefix(letters);
        // A bare number means seconds, but only on its own: "1h30" is a typo.
        if (unit.empty() && !(first && text.empty())) return std::nullopt;
        double factor = 1;
        if (unit == "ms") factor = 1e-3;
        else if (unit.empty() || unit == "s") factor = 1;
        else if (unit == "m") factor = 60;
        else if (unit == "h") factor = 3600;
        else if (unit == "d") factor = 86400;
        else return std::nullopt;
        total += value * factor;
        first = false;
    }
    if (!std::isfinite(total)) return std::nullopt;
    return total;
}

std::string format_size(uint64_t bytes) {
    static constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int unit = 0;
    double value = static_cast<double>(bytes);
    while (value >= 1024.0 && unit < 6) {
        value /= 1024.0;
        ++unit;
    }
    if (unit == 0) return fmt::format("{}B", bytes);
    std::string text = fmt::format("{:.2f}", value);
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
    return text + kNames[unit];
}

bool natural_less(std::string_view a, std::string_view b) {
    std::size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        const bool da = std::isdigit(static_cast<unsigned char>(a[i]));
        const bool db = std::isdigit(static_cast<unsigned char>(b[j]));
        if (da && db) {
            std::size_t ei = i, ej = j;
            while (ei < a.size() && std::isdigit(static_cast<unsigned char>(a[ei]))) ++ei;
            while (ej < b.size() && std::isdigit(static_cast<unsigned char>(b[ej]))) ++ej;
            // Compare numerically without overflow: skip leading zeros, then
            // the longer run is larger, then digit by digit.
            std::size_t zi = i, zj = j;
            while (zi + 1 < ei && a[zi] == '0') ++zi;
            while (zj + 1 < ej && b[zj] == '0') ++zj;
            if (ei - zi != ej - zj) return ei - zi < ej - zj;
            const int c = a.substr(zi, ei - zi).compare(b.substr(zj, ej - zj));
            if (c != 0) return c < 0;
            if (ei - i != ej - j) return ei - i < ej - j;  // fewer leading zeros first
            i = ei;
            j = ej;
        } else {
            if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
            ++i;
            ++j;
        }
    }
    return a.size() - i < b.size() - j;
}

std::optional<std::string_view> closest_word(std::string_view word, std::span<const std::string_view> candidates) {
    // A word cut short ("gpu_mem" for "gpu_memory") is the likeliest typo.
    if (word.size() >= 3) {
        for (std::string_view candidate : candidates)
            if (candidate.size() > word.size() && candidate.substr(0, word.size()) == word) return candidate;
        // ...or run on past the end of the word ("lenght" for "len").
        for (std::string_view candidate : candidates)
            if (candidate.size() >= 3 && candidate.size() < word.size() && word.substr(0, candidate.size()) == candidate)
                return candidate;
    }
    std::optional<std::string_view> best;
    std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
    std::vector<std::size_t> row;
    for (std::string_view candidate : candidates) {
        row.resize(candidate.size() + 1);
        for (std::size_t j = 0; j <= candidate.size(); ++j) row[j] = j;
        for (std::size_t i = 1; i <= word.size(); ++i) {
            std::size_t diagonal = row[0];
            row[0] = i;
            for (std::size_t j = 1; j <= candidate.size(); ++j) {
                const std::size_t above = row[j];
                const std::size_t cost = lower(word[i - 1]) == lower(candidate[j - 1]) ? 0 : 1;
                row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + cost});
                diagonal = above;
            }
        }
        if (row[candidate.size()] < best_distance) {
            best_distance = row[candidate.size()];
            best = candidate;
        }
    }
    return best;
}

std::string escape_bytes(std::string_view bytes, std::size_t max_bytes) {
    const std::string_view shown = bytes.substr(0, max_bytes);
    std::string out;
    out.reserve(shown.size() + 3);
    for (const char c : shown) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '\\')
            out += "\\\\";
        else if (byte >= 0x20 && byte <= 0x7e)
            out += c;
        else
            out += fmt::format("\\x{:02x}", byte);
    }
    if (shown.size() < bytes.size()) out += "...";
    return out;
}

std::string quote(std::string_view bytes) {
    constexpr std::size_t kShown = 80;
    std::string out = fmt::format("'{}'", escape_bytes(bytes, kShown));
    if (bytes.size() > kShown) out += fmt::format(" ({} bytes)", bytes.size());
    return out;
}

std::string quote_keys(std::span<const std::string> keys) {
    constexpr std::size_t kShown = 8;
    std::string out;
    for (std::size_t i = 0; i < keys.size() && i < kShown; ++i) {
        if (i > 0) out += ", ";
        out += quote(keys[i]);
    }
    if (keys.size() > kShown) out += fmt::format(" and {} more", keys.size() - kShown);
    return out;
}

}  // namespace cohort::detail

namespace cohort {

std::optional<uint64_t> parse_size(std::string_view text) { return detail::parse_size(text); }
std::string format_size(uint64_t bytes) { return detail::format_size(bytes); }

}  // namespace cohort
