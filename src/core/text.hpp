// Small text helpers shared by the file loaders and the CLI.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace cohort::detail {

// "80GiB", "1.5 GB", "4096", "64k" -> bytes. Decimal (kB, MB, GB, TB, PB) and
// binary (KiB, MiB, GiB, TiB, PiB) units, case-insensitive; "k"/"m"/"g"/"t"
// alone are binary. Empty on anything else, negative or past 2^63.
std::optional<uint64_t> parse_size(std::string_view text);
// "250ms", "30s", "5m", "2h", "1d", "1h30m", "1.5h" -> seconds; a plain
// number is seconds. Empty on anything else or a negative value.
std::optional<double> parse_duration(std::string_view text);
// 1610612736 -> "1.5GiB".
std::string format_size(uint64_t bytes);
// Orders "node-2" before "node-10": digit runs compare as numbers.
bool natural_less(std::string_view a, std::string_view b);
// The closest of `candidates` to `word` by edit distance, if close enough to
// be a likely typo ("did you mean ...?").
std::optional<std::string_view> closest_word(std::string_view word, std::span<const std::string_view> candidates);
inline std::optional<std::string_view> closest_word(std::string_view word,
                                                    std::initializer_list<std::string_view> candidates) {
    return closest_word(word, std::span<const std::string_view>(candidates.begin(), candidates.size()));
}

// Bytes from a request, a file or a peer as they may sit in a message:
// printable ASCII as is, a backslash as "\\", every other byte (NUL, control
// characters, anything past 0x7e, so UTF-8 too) as "\xNN". The message then
// stays whole through a C string and is valid UTF-8 and JSON-safe. Past
// `max_bytes` input bytes the rest is cut and "..." follows.
std::string escape_bytes(std::string_view bytes, std::size_t max_bytes = 80);
// escape_bytes in single quotes, with the length when cut: 'a\x00b',
// 'aaaa...' (300 bytes). For names, keys and paths that a caller supplied.
std::string quote(std::string_view bytes);
// "'a', 'b'", each as quote shows it (at most a handful, then "and N more").
std::string quote_keys(std::span<const std::string> keys);

}  // namespace cohort::detail
