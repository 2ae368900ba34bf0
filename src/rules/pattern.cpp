// compile_pattern: RE2 with bounded memory, and messages that say what RE2
// syntax lacks (back-references, lookaround) rather than only what failed.
#include "rules/pattern.hpp"

#include <fmt/format.h>

namespace cohort::detail {
namespace {

// The first back-reference (`\1` to `\9`), or npos. RE2 would read `\12`
// as an octal character code, which silently changes what a pattern
// written for std::regex means, so every `\` and a digit 1-9 is refused.
std::size_t find_back_reference(std::string_view pattern) {
    for (std::size_t i = 0; i + 1 < pattern.size(); ++i) {
        if (pattern[i] != '\\') continue;
        const char next = pattern[i + 1];
        if (next >= '1' && next <= '9') return i;
        if (next == 'Q') {  // \Q...\E is literal text
            const std::size_t end = pattern.find("\\E", i + 2);
            if (end == std::string_view::npos) return std::string_view::npos;
            i = end;
        }
        ++i;  // skip the escaped character
    }
    return std::string_view::npos;
}

std::string hint(const RE2& re) {
    const std::string& arg = re.error_arg();
    switch (re.error_code()) {
        case RE2::ErrorBadPerlOp:
            if (arg.starts_with("(?=") || arg.starts_with("(?!") || arg.starts_with("(?<"))
                return " (lookahead and lookbehind are not supported; a named group is written (?P<name>...))";
            return "";
        case RE2::ErrorPatternTooLarge:
            return fmt::format(" (it needs more than the {} MiB a pattern may use: use smaller counted repetitions)",
                               kPatternMaxMemory >> 20);
        default:
            return "";
    }
}

}  // namespace

std::unique_ptr<const RE2> compile_pattern(std::string_view pattern, PatternError& error) {
    if (const std::size_t at = find_back_reference(pattern); at != std::string_view::npos) {
        error.message = fmt::format("back-reference '{}' is not supported (matches uses RE2 syntax, which has none)",
                                    pattern.substr(at, 2));
        error.offset = at;
        return nullptr;
    }
    RE2::Options options;
    options.set_encoding(RE2::Options::EncodingLatin1);
    options.set_max_mem(kPatternMaxMemory);
    options.set_log_errors(false);
    auto re = std::make_unique<const RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
    if (re->ok()) return re;
    error.message = re->error() + hint(*re);
    // RE2 names the fragment, not where it is: the first occurrence is
    // right for all but patterns that repeat the fragment.
    const std::size_t at = re->error_arg().empty() ? std::string_view::npos : pattern.find(re->error_arg());
    error.offset = at == std::string_view::npos ? 0 : at;
    return nullptr;
}

}  // namespace cohort::detail
