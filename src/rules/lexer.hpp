// Tokens of the condition language.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::detail {

enum class Tok : uint8_t {
    end, integer, number, string, identifier, kw_true, kw_false,
    kw_and, kw_or, kw_not, kw_in, kw_matches, kw_contains, kw_startswith, kw_endswith,
    eq, ne, lt, le, gt, ge, plus, minus, star, slash, percent,
    lparen, rparen, lbracket, rbracket, comma,
};

struct Token {
    Tok kind = Tok::end;
    uint32_t begin = 0, end = 0;  // byte offsets into the text
    int64_t integer = 0;          // integer literals and sizes (bytes)
    double number = 0;            // number literals and durations (seconds)
    std::string text;             // string contents (unescaped) or identifier
};

// Throws Error(parse) (via the caller's fail) on a bad character, an
// unterminated string or an unknown unit.
std::vector<Token> tokenize(std::string_view text, std::string_view source);

// A number with a size unit ("100MB", "1.5GiB": bytes) or a duration unit
// ("250ms", "5m", "2h": seconds). Empty if the text is not one.
std::optional<int64_t> parse_size_literal(std::string_view text);
std::optional<double> parse_duration_literal(std::string_view text);

// The offset in `text` of byte `decoded` of the string literal that starts
// (with its quote) at `literal`: where a pattern's error is in the source.
uint32_t string_source_offset(std::string_view text, uint32_t literal, std::size_t decoded);

// "1:12: message" with the line of `text` and a caret under `offset`,
// prefixed by `source` when given.
[[noreturn]] void fail_at(std::string_view text, std::string_view source, uint32_t offset, std::string_view message);

}  // namespace cohort::detail
