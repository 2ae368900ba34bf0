// The patterns of the `matches` operator, compiled with RE2: a match takes
// time linear in the value and memory bounded per pattern, whatever the
// pattern (std::regex overflowed the stack and backtracked exponentially).
#pragma once

#include <re2/re2.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace cohort::detail {

// The most memory one compiled pattern may use (its program and its DFA
// cache); a pattern that needs more is a compile error.
inline constexpr int64_t kPatternMaxMemory = 2 << 20;

// Why a pattern did not compile, and the byte offset in the pattern that
// the message is about.
struct PatternError {
    std::string message;
    std::size_t offset = 0;
};

// The compiled pattern, or null with `error` set. Bytes are matched as
// bytes (Latin-1), as the language compares strings.
std::unique_ptr<const RE2> compile_pattern(std::string_view pattern, PatternError& error);

// Whether the pattern is found anywhere in `text`.
inline bool pattern_found(const RE2& pattern, std::string_view text) {
    return RE2::PartialMatch(re2::StringPiece(text.data(), text.size()), pattern);
}

}  // namespace cohort::detail
