#include "rules/lexer.hpp"

#include <cohort/error.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace cohort::detail {

namespace {

bool ieq(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
    return true;
}

struct Keyword {
    std::string_view word;
    Tok tok;
};
constexpr Keyword kKeywords[] = {
    {"and", Tok::kw_and},           {"or", Tok::kw_or},       {"not", Tok::kw_not},
    {"in", Tok::kw_in},             {"true", Tok::kw_true},   {"false", Tok::kw_false},
    {"matches", Tok::kw_matches},   {"contains", Tok::kw_contains},
    {"startswith", Tok::kw_startswith}, {"endswith", Tok::kw_endswith},
};

struct Unit {
    std::string_view name;
    double factor;
};
// Sizes, case-insensitive: decimal and binary.
constexpr Unit kSizeUnits[] = {{"b", 1},         {"kb", 1e3},          {"mb", 1e6},
                               {"gb", 1e9},      {"tb", 1e12},         {"pb", 1e15},
                               {"kib", 1024.0},  {"mib", 1048576.0},   {"gib", 1073741824.0},
                               {"tib", 1099511627776.0}, {"pib", 1125899906842624.0}};
// Durations, lower case only ("5m" is five minutes; "5M" is not a size).
constexpr Unit kDurationUnits[] = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1},
                                   {"m", 60},    {"h", 3600},  {"d", 86400}};

// Splits "1.5GiB" into 1.5 and "GiB"; false if there is no leading number.
bool split_number(std::string_view text, double& value, std::string_view& unit, bool& integral) {
    std::size_t i = 0;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    if (i == 0) return false;
    auto [end, ec] = std::from_chars(text.data(), text.data() + i, value);
    if (ec != std::errc() || end != text.data() + i) return false;
    integral = text.substr(0, i).find('.') == std::string_view::npos;
    unit = text.substr(i);
    return true;
}

}  // namespace

std::optional<int64_t> parse_size_literal(std::string_view text) {
    double value = 0;
    std::string_view unit;
    bool integral = false;
    if (!split_number(text, value, unit, integral) || unit.empty()) return std::nullopt;
    for (const Unit& u : kSizeUnits) {
        if (ieq(u.name, unit)) {
            const double bytes = std::round(value * u.factor);
            if (bytes > 9.2e18) return std::nullopt;
            return static_cast<int64_t>(bytes);
        }
    }
    return std::nullopt;
}

std::optional<double> parse_duration_literal(std::string_view text) {
    double value = 0;
    std::string_view unit;
    bool integral = false;
    if (!split_number(text, value, unit, integral) || unit.empty()) return std::nullopt;
    for (const Unit& u : kDurationUnits)
        if (u.name == unit) return value * u.factor;
    return std::nullopt;
}

uint32_t string_source_offset(std::string_view text, uint32_t literal, std::size_t decoded) {
    // The lexer's escapes: \xNN is four characters, any other escape two.
    std::size_t j = literal + 1;
    for (std::size_t n = 0; n < decoded && j < text.size(); ++n) {
        if (text[j] != '\\')
            ++j;
        else
            j += j + 1 < text.size() && text[j + 1] == 'x' ? 4 : 2;
    }
    return static_cast<uint32_t>(std::min(j, text.size()));
}

void fail_at(std::string_view text, std::string_view source, uint32_t offset, std::string_view message) {
    // Line and column of the offset, and the line it is on.
    std::size_t line = 1, line_start = 0;
    for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++line;
            line_start = i + 1;
        }
    }
    std::size_t line_end = text.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = text.size();
    const std::size_t column = offset - line_start + 1;
    std::string out;
    if (!source.empty()) out = fmt::format("{}: ", source);
    out += fmt::format("{}:{}: {}\n    {}\n    {}^", line, column, message, text.substr(line_start, line_end - line_start),
                       std::string(column - 1, ' '));
    throw Error(Errc::parse, std::move(out));
}

std::vector<Token> tokenize(std::string_view text, std::string_view source) {
    std::vector<Token> tokens;
    std::size_t i = 0;
    auto two = [&](char a, char b) { return i + 1 < text.size() && text[i] == a && text[i + 1] == b; };
    while (true) {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
        Token t;
        t.begin = static_cast<uint32_t>(i);
        if (i >= text.size()) {
            t.kind = Tok::end;
            t.end = t.begin;
            tokens.push_back(std::move(t));
            return tokens;
        }
        const char c = text[i];
        if (std::isdigit(static_cast<unsigned char>(c)) ||
            (c == '.' && i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i + 1])))) {
            std::size_t j = i;
            while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '.' || text[j] == '_'))
                ++j;
            const std::string_view word = text.substr(i, j - i);
            double value = 0;
            std::string_view unit;
            bool integral = false;
            if (!split_number(word, value, unit, integral)) fail_at(text, source, t.begin, fmt::format("bad number '{}'", word));
            if (unit.empty()) {
                if (integral) {
                    t.kind = Tok::integer;
                    auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), t.integer);
                    if (ec != std::errc()) fail_at(text, source, t.begin, fmt::format("integer '{}' is too large", word));
                } else {
                    t.kind = Tok::number;
                    t.number = value;
                }
            } else if (auto bytes = parse_size_literal(word)) {
                t.kind = Tok::integer;
                t.integer = *bytes;
            } else if (auto seconds = parse_duration_literal(word)) {
                t.kind = Tok::number;
                t.number = *seconds;
            } else {
                fail_at(text, source, static_cast<uint32_t>(i + (word.size() - unit.size())),
                        fmt::format("unknown unit '{}' (sizes: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB; "
                                    "durations: ns, us, ms, s, m, h, d)",
                                    unit));
            }
            i = j;
        } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
            std::size_t j = i;
            while (j < text.size() &&
                   (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_' ||
                    (text[j] == '.' && j + 1 < text.size() &&
                     (std::isalpha(static_cast<unsigned char>(text[j + 1])) || text[j + 1] == '_'))))
                ++j;
            t.text = std::string(text.substr(i, j - i));
            t.kind = Tok::identifier;
            for (const Keyword& k : kKeywords)
                if (ieq(k.word, t.text)) t.kind = k.tok;
            i = j;
        } else if (c == '\'' || c == '"') {
            std::size_t j = i + 1;
            std::string value;
            while (j < text.size() && text[j] != c) {
                if (text[j] == '\\' && j + 1 < text.size()) {
                    const char e = text[++j];
                    switch (e) {
                        case 'n': value += '\n'; break;
                        case 't': value += '\t'; break;
                        case 'r': value += '\r'; break;
                        case '0': value += '\0'; break;
                        case 'x': {
                            if (j + 2 >= text.size() || !std::isxdigit(static_cast<unsigned char>(text[j + 1])) ||
                                !std::isxdigit(static_cast<unsigned char>(text[j + 2])))
                                fail_at(text, source, static_cast<uint32_t>(j - 1), "\\x needs two hex digits");
                            value += static_cast<char>(std::stoi(std::string(text.substr(j + 1, 2)), nullptr, 16));
                            j += 2;
                            break;
                        }
                        default: value += e; break;  // \\ \' \" and anything else literally
                    }
                    ++j;
                    continue;
                }
                value += text[j++];
            }
            if (j >= text.size()) fail_at(text, source, t.begin, "unterminated string");
            t.kind = Tok::string;
            t.text = std::move(value);
            i = j + 1;
        } else {
            Tok kind;
            std::size_t width = 1;
            if (two('=', '=')) kind = Tok::eq, width = 2;
            else if (two('!', '=')) kind = Tok::ne, width = 2;
            else if (two('<', '=')) kind = Tok::le, width = 2;
            else if (two('>', '=')) kind = Tok::ge, width = 2;
            else if (two('&', '&')) kind = Tok::kw_and, width = 2;
            else if (two('|', '|')) kind = Tok::kw_or, width = 2;
            else {
                switch (c) {
                    case '<': kind = Tok::lt; break;
                    case '>': kind = Tok::gt; break;
                    case '!': kind = Tok::kw_not; break;
                    case '+': kind = Tok::plus; break;
                    case '-': kind = Tok::minus; break;
                    case '*': kind = Tok::star; break;
                    case '/': kind = Tok::slash; break;
                    case '%': kind = Tok::percent; break;
                    case '(': kind = Tok::lparen; break;
                    case ')': kind = Tok::rparen; break;
                    case '[': kind = Tok::lbracket; break;
                    case ']': kind = Tok::rbracket; break;
                    case ',': kind = Tok::comma; break;
                    case '=':
                        fail_at(text, source, t.begin, "'=' is not an operator (did you mean '=='?)");
                    default: fail_at(text, source, t.begin, fmt::format("unexpected character '{}'", c));
                }
            }
            t.kind = kind;
            i += width;
        }
        t.end = static_cast<uint32_t>(i);
        tokens.push_back(std::move(t));
    }
}

}  // namespace cohort::detail
