#include "data/file_glob.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

namespace cohort::detail {

namespace {

// The end of the class starting at pattern[i] == '[', or npos when open.
std::size_t class_end(std::string_view pattern, std::size_t i) {
    std::size_t j = i + 1;
    if (j < pattern.size() && pattern[j] == '!') ++j;
    if (j < pattern.size() && pattern[j] == ']') ++j;  // a leading ] is a member
    while (j < pattern.size() && pattern[j] != ']') ++j;
    return j < pattern.size() ? j : std::string_view::npos;
}

bool class_matches(std::string_view body, char c) {
    bool negate = false;
    if (!body.empty() && body[0] == '!') {
        negate = true;
        body.remove_prefix(1);
    }
    bool found = false;
    for (std::size_t k = 0; k < body.size(); ++k) {
        if (k + 2 < body.size() && body[k + 1] == '-') {
            if (c >= body[k] && c <= body[k + 2]) found = true;
            k += 2;
        } else if (body[k] == c) {
            found = true;
        }
    }
    return found != negate && c != '/';
}

// Backtracking over the pattern; `**` may swallow '/', `*` may not. The
// patterns are short and the paths are not adversarial, but the recursion
// only branches at stars, so a path of n characters costs O(n^stars) at worst.
bool match(std::string_view p, std::string_view s) {
    while (!p.empty()) {
        const char c = p[0];
        if (c == '*') {
            const bool deep = p.size() > 1 && p[1] == '*';
            std::string_view rest = p.substr(deep ? 2 : 1);
            // "**/" also matches no directory at all: "a/**/b" matches "a/b".
            if (deep && !rest.empty() && rest[0] == '/' && match(rest.substr(1), s)) return true;
            for (std::size_t k = 0;; ++k) {
                if (match(rest, s.substr(k))) return true;
                if (k == s.size() || (!deep && s[k] == '/')) return false;
            }
        }
        if (s.empty()) return false;
        if (c == '?') {
            if (s[0] == '/') return false;
            p.remove_prefix(1);
        } else if (c == '[') {
            const std::size_t end = class_end(p, 0);
            if (!class_matches(p.substr(1, end - 1), s[0])) return false;
            p.remove_prefix(end + 1);
        } else if (c == '\\' && p.size() > 1) {
            if (p[1] != s[0]) return false;
            p.remove_prefix(2);
        } else {
            if (c != s[0]) return false;
            p.remove_prefix(1);
        }
        s.remove_prefix(1);
    }
    return s.empty();
}

}  // namespace

void check_glob(std::string_view pattern) {
    if (pattern.empty()) throw Error(Errc::invalid_argument, "file pattern: must not be empty");
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] == '\\') {
            ++i;
        } else if (pattern[i] == '[') {
            const std::size_t end = class_end(pattern, i);
            if (end == std::string_view::npos) {
                throw Error(Errc::invalid_argument,
                            fmt::format("file pattern '{}': the class opened at character {} is not closed with ']'",
                                        pattern, i + 1));
            }
            i = end;
        }
    }
}

bool glob_match(std::string_view pattern, std::string_view path) {
    return match(pattern, path);
}

}  // namespace cohort::detail
