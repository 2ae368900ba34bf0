// core/text.hpp: sizes with units, natural ordering, typo suggestions and
// untrusted bytes in messages.
#include "core/text.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <random>
#include <string>
#include <vector>

namespace cohort::detail {
namespace {

constexpr uint64_t KiB = uint64_t{1} << 10;
constexpr uint64_t MiB = uint64_t{1} << 20;
constexpr uint64_t GiB = uint64_t{1} << 30;
constexpr uint64_t TiB = uint64_t{1} << 40;
constexpr uint64_t PiB = uint64_t{1} << 50;

TEST(ParseSize, PlainBytes) {
    EXPECT_EQ(parse_size("0"), 0u);
    EXPECT_EQ(parse_size("4096"), 4096u);
    EXPECT_EQ(parse_size("12B"), 12u);
    EXPECT_EQ(parse_size("  12 b  "), 12u);
}

TEST(ParseSize, DecimalUnits) {
    EXPECT_EQ(parse_size("1kB"), 1000u);
    EXPECT_EQ(parse_size("1KB"), 1000u);
    EXPECT_EQ(parse_size("3MB"), 3'000'000u);
    EXPECT_EQ(parse_size("1.5 GB"), 1'500'000'000u);
    EXPECT_EQ(parse_size("2TB"), 2'000'000'000'000u);
    EXPECT_EQ(parse_size("1pb"), 1'000'000'000'000'000u);
}

TEST(ParseSize, BinaryUnits) {
    EXPECT_EQ(parse_size("1KiB"), KiB);
    EXPECT_EQ(parse_size("64MiB"), 64 * MiB);
    EXPECT_EQ(parse_size("80GiB"), 80 * GiB);
    EXPECT_EQ(parse_size("80gib"), 80 * GiB);
    EXPECT_EQ(parse_size("3TiB"), 3 * TiB);
    EXPECT_EQ(parse_size("2PiB"), 2 * PiB);
    EXPECT_EQ(parse_size("1.5GiB"), 3 * GiB / 2);
    EXPECT_EQ(parse_size("0.5 KiB"), 512u);
}

TEST(ParseSize, SingleLetterUnitsAreBinary) {
    EXPECT_EQ(parse_size("64k"), 64 * KiB);
    EXPECT_EQ(parse_size("64K"), 64 * KiB);
    EXPECT_EQ(parse_size("3m"), 3 * MiB);
    EXPECT_EQ(parse_size("2g"), 2 * GiB);
    EXPECT_EQ(parse_size("1t"), TiB);
}

TEST(ParseSize, RejectsNegativeNumbers) {
    EXPECT_EQ(parse_size("-1"), std::nullopt);
    EXPECT_EQ(parse_size("-5GiB"), std::nullopt);
    EXPECT_EQ(parse_size(" -0.5"), std::nullopt);
}

TEST(ParseSize, RejectsGarbage) {
    for (const char* text : {"", "   ", "GiB", "abc", "12 apples", "1e3", "1.2.3", ".", "0x10", "12 GiB extra",
                             "1 2", "+5", "5 iB", "NaN", "inf"}) {
        EXPECT_EQ(parse_size(text), std::nullopt) << "'" << text << "'";
    }
}

TEST(ParseSize, LimitIsTwoToTheSixtyThree) {
    EXPECT_EQ(parse_size("9223372036854775808"), uint64_t{1} << 63);
    EXPECT_EQ(parse_size("8192PiB"), uint64_t{1} << 63);
    EXPECT_EQ(parse_size("9223372036854775809"), std::nullopt);
    EXPECT_EQ(parse_size("8193PiB"), std::nullopt);
    EXPECT_EQ(parse_size("18446744073709551615"), std::nullopt);
    EXPECT_EQ(parse_size("18446744073709551616"), std::nullopt);     // 2^64: past uint64_t
    EXPECT_EQ(parse_size("99999999999999999999999"), std::nullopt);  // far past
    EXPECT_EQ(parse_size("10000000TiB"), std::nullopt);
    EXPECT_EQ(parse_size("8192.5PiB"), std::nullopt);
    EXPECT_EQ(parse_size("1e300"), std::nullopt);
}

TEST(ParseSize, FractionsUpToTheLimitToo) {
    // "past 2^63" holds for fractions as for integers: 8191.5 PiB is below
    // 2^63 (16383 * 2^49, exact in a double), as "8191PiB" is.
    EXPECT_EQ(parse_size("8191PiB"), uint64_t{8191} << 50);
    EXPECT_EQ(parse_size("8191.5PiB"), uint64_t{16383} << 49);
}

TEST(FormatSize, PicksTheLargestBinaryUnit) {
    EXPECT_EQ(format_size(0), "0B");
    EXPECT_EQ(format_size(1023), "1023B");
    EXPECT_EQ(format_size(1024), "1KiB");
    EXPECT_EQ(format_size(1536), "1.5KiB");
    EXPECT_EQ(format_size(1610612736), "1.5GiB");
    EXPECT_EQ(format_size(80 * GiB), "80GiB");
    EXPECT_EQ(format_size(uint64_t{1} << 63), "8EiB");
}

TEST(FormatSize, RoundTripsThroughParseSizeForWholeUnits) {
    for (uint64_t unit : {uint64_t{1}, KiB, MiB, GiB, TiB, PiB}) {
        for (uint64_t k : {1u, 3u, 17u, 1000u}) {
            const uint64_t bytes = k * unit;
            EXPECT_EQ(parse_size(format_size(bytes)), bytes) << format_size(bytes);
        }
    }
}

TEST(NaturalLess, DigitRunsCompareAsNumbers) {
    EXPECT_TRUE(natural_less("node-2", "node-10"));
    EXPECT_FALSE(natural_less("node-10", "node-2"));
    EXPECT_TRUE(natural_less("rack9-host3", "rack10-host1"));
    EXPECT_TRUE(natural_less("a1b2", "a1b10"));
    EXPECT_TRUE(natural_less("x99999999999999999999998", "x99999999999999999999999"));  // no overflow
    EXPECT_TRUE(natural_less("x9", "x100000000000000000000000000"));
}

TEST(NaturalLess, TextAndPrefixes) {
    EXPECT_TRUE(natural_less("abc", "abd"));
    EXPECT_TRUE(natural_less("ab", "abc"));
    EXPECT_TRUE(natural_less("", "a"));
    EXPECT_FALSE(natural_less("", ""));
    EXPECT_FALSE(natural_less("node-3", "node-3"));
    // Leading zeros: equal values still get a strict, fixed order.
    EXPECT_NE(natural_less("n01", "n1"), natural_less("n1", "n01"));
}

TEST(NaturalLess, SortsHostNames) {
    std::vector<std::string> names = {"node-10", "node-2", "node-1", "node-20", "node-3"};
    std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) { return natural_less(a, b); });
    EXPECT_EQ(names, (std::vector<std::string>{"node-1", "node-2", "node-3", "node-10", "node-20"}));
}

// Strings over an alphabet that mixes digits (with zeros), letters and the
// characters just below and above '0'..'9'.
std::string random_name(std::mt19937_64& rng) {
    static constexpr char kAlphabet[] = "0001239abZ/:-";
    const std::size_t length = rng() % 7;
    std::string s;
    for (std::size_t i = 0; i < length; ++i) s += kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
    return s;
}

TEST(NaturalLess, IsAStrictWeakOrderOnRandomStrings) {
    const uint64_t seed = std::random_device{}();
    std::cout << "natural_less seed: " << seed << "\n";
    RecordProperty("seed", std::to_string(seed));
    std::mt19937_64 rng(seed);
    std::vector<std::string> names(120);
    for (auto& s : names) s = random_name(rng);
    auto less = [](const std::string& a, const std::string& b) { return natural_less(a, b); };
    auto equiv = [&](const std::string& a, const std::string& b) { return !less(a, b) && !less(b, a); };
    for (const auto& a : names) {
        ASSERT_FALSE(less(a, a)) << "irreflexive: '" << a << "' (seed " << seed << ")";
        for (const auto& b : names) {
            ASSERT_FALSE(less(a, b) && less(b, a)) << "asymmetric: '" << a << "' '" << b << "' (seed " << seed << ")";
            // Only identical strings are equivalent: a total order.
            ASSERT_EQ(equiv(a, b), a == b) << "'" << a << "' '" << b << "' (seed " << seed << ")";
            for (const auto& c : names) {
                if (less(a, b) && less(b, c)) {
                    ASSERT_TRUE(less(a, c)) << "transitive: '" << a << "' '" << b << "' '" << c << "' (seed "
                                            << seed << ")";
                }
            }
        }
    }
    // And std::sort agrees with a check of adjacent pairs.
    std::sort(names.begin(), names.end(), less);
    for (std::size_t i = 1; i < names.size(); ++i) EXPECT_FALSE(less(names[i], names[i - 1]));
}

TEST(ClosestWord, SuggestsLikelyTypos) {
    EXPECT_EQ(closest_word("hots", {"id", "host", "address"}), "host");
    EXPECT_EQ(closest_word("gpu_memroy", {"gpus", "gpu_memory"}), "gpu_memory");
    EXPECT_EQ(closest_word("GPUS", {"gpus", "gpu_memory"}), "gpus");  // case-insensitive
    EXPECT_EQ(closest_word("adress", {"id", "host", "address"}), "address");
}

TEST(ClosestWord, NothingWhenFarFromEveryCandidate) {
    EXPECT_EQ(closest_word("zzzzzzzz", {"id", "host", "address"}), std::nullopt);
    EXPECT_EQ(closest_word("foo", {"locality", "gpu_memory"}), std::nullopt);
    EXPECT_EQ(closest_word("anything", {}), std::nullopt);
}

TEST(EscapeBytes, PrintableAsciiStaysAsItIs) {
    EXPECT_EQ(escape_bytes("job-1_a.b:c ~{}'\""), "job-1_a.b:c ~{}'\"");
    EXPECT_EQ(escape_bytes(""), "");
}

TEST(EscapeBytes, EveryOtherByteIsHexAndNulDoesNotEndIt) {
    EXPECT_EQ(escape_bytes(std::string("a\0b", 3)), "a\\x00b");
    EXPECT_EQ(escape_bytes("\xff\x80\x7f\x1f\n\t\r"), "\\xff\\x80\\x7f\\x1f\\x0a\\x09\\x0d");
    EXPECT_EQ(escape_bytes("h\xc3\xa9"), "h\\xc3\\xa9");  // UTF-8 too: the message stays ASCII
    EXPECT_EQ(escape_bytes("a\\x00"), "a\\\\x00");        // a backslash cannot pass for an escape
    std::string all;
    for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
    for (const char c : escape_bytes(all, all.size())) EXPECT_TRUE(c >= 0x20 && c <= 0x7e) << int(c);
}

TEST(EscapeBytes, LongInputIsCutAtTheLimit) {
    EXPECT_EQ(escape_bytes(std::string(100, 'a')), std::string(80, 'a') + "...");
    EXPECT_EQ(escape_bytes("abcdef", 3), "abc...");
    EXPECT_EQ(escape_bytes("abc", 3), "abc");
    // The limit counts input bytes; each may grow to four characters.
    EXPECT_EQ(escape_bytes(std::string(10, '\0'), 2), "\\x00\\x00...");
}

TEST(Quote, QuotesEscapesAndGivesTheLengthWhenCut) {
    EXPECT_EQ(quote("key"), "'key'");
    EXPECT_EQ(quote(std::string("k\0y", 3)), "'k\\x00y'");
    EXPECT_EQ(quote(std::string(81, 'k')), "'" + std::string(80, 'k') + "...' (81 bytes)");
    const std::vector<std::string> keys = {"a", "b\xff"};
    EXPECT_EQ(quote_keys(keys), "'a', 'b\\xff'");
    const std::vector<std::string> many(10, "k");
    EXPECT_EQ(quote_keys(many), "'k', 'k', 'k', 'k', 'k', 'k', 'k', 'k' and 2 more");
}

}  // namespace
}  // namespace cohort::detail
