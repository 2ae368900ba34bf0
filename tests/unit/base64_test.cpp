// core/base64: the one codec behind the coordinator's {"base64": ...} values
// (canonical) and etcd's gateway keys and values (lenient).
#include "core/base64.hpp"

#include <gtest/gtest.h>

#include <string>

namespace cohort::detail {
namespace {

std::string every_byte() {
    std::string all;
    for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
    return all;
}

TEST(Base64, EncodesTheRfc4648Vectors) {
    EXPECT_EQ(base64_encode(""), "");
    EXPECT_EQ(base64_encode("f"), "Zg==");
    EXPECT_EQ(base64_encode("fo"), "Zm8=");
    EXPECT_EQ(base64_encode("foo"), "Zm9v");
    EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
    EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
    EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
    EXPECT_EQ(base64_encode(std::string("\x00\xff\x80", 3)), "AP+A");
    EXPECT_EQ(base64_encode("\xfb\xff"), "+/8=");
}

TEST(Base64, RoundTripsEveryByteInBothForms) {
    const std::string all = every_byte();
    for (const auto form : {Base64Form::canonical, Base64Form::lenient}) {
        for (std::size_t n = 0; n <= 8; ++n)
            EXPECT_EQ(base64_decode(base64_encode(all.substr(0, n)), form), all.substr(0, n));
        for (std::size_t start = 0; start < 3; ++start)
            EXPECT_EQ(base64_decode(base64_encode(all.substr(start)), form), all.substr(start));
    }
}

TEST(Base64, CanonicalRefusesEveryOtherSpelling) {
    for (const char* text : {
             "AP+",       // no padding
             "AP+B=",     // not a multiple of four
             "QR==",      // non-zero bits under the padding
             "QUI=A===",  // '=' before the end
             "QQ=A",      // data after padding
             "Q===",      // three '='
             "====",      // padding only
             "AP-_",      // URL-safe alphabet
             "a*b=",      // not in any alphabet
             "Zm9v\n",    // white space
         }) {
        EXPECT_FALSE(base64_decode(text).has_value()) << text;
    }
    EXPECT_EQ(base64_decode("QQ=="), "A");
    EXPECT_EQ(base64_decode(""), "");
}

TEST(Base64, LenientReadsWhatOtherProducersWriteAndStillRefusesGarbage) {
    const auto lenient = [](std::string_view text) { return base64_decode(text, Base64Form::lenient); };
    EXPECT_EQ(lenient("AP+A"), std::string("\x00\xff\x80", 3));
    EXPECT_EQ(lenient("AP-A"), std::string("\x00\xff\x80", 3));  // URL-safe
    EXPECT_EQ(lenient("-_8"), "\xfb\xff");                       // and unpadded
    EXPECT_EQ(lenient("Zg"), "f");
    EXPECT_EQ(lenient("Zg==="), "f");  // extra padding
    EXPECT_EQ(lenient("QR=="), "A");   // stray bits under the padding
    EXPECT_FALSE(lenient("a*b=").has_value());
    EXPECT_FALSE(lenient("abcde").has_value());  // 4n+1 characters: not bytes
    EXPECT_FALSE(lenient("QQ=A").has_value());
    EXPECT_FALSE(lenient("Zm9v\n").has_value());
}

}  // namespace
}  // namespace cohort::detail
