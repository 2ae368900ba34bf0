// data/file_glob.hpp: the DataAdvisor's file patterns over dataset paths.
#include "data/file_glob.hpp"

#include <cohort/error.hpp>

#include <gtest/gtest.h>

namespace cohort::detail {
namespace {

TEST(FileGlob, StarsQuestionMarksAndClasses) {
    EXPECT_TRUE(glob_match("train/*.rec", "train/a.rec"));
    EXPECT_FALSE(glob_match("train/*.rec", "train/x/a.rec"));  // * stays in its component
    EXPECT_FALSE(glob_match("*", "train/a.rec"));
    EXPECT_TRUE(glob_match("**", "train/x/a.rec"));
    EXPECT_TRUE(glob_match("train/**/a.rec", "train/x/y/a.rec"));
    EXPECT_TRUE(glob_match("train/**/a.rec", "train/a.rec"));  // **/ may be no directory
    EXPECT_TRUE(glob_match("**.rec", "a/b.rec"));
    EXPECT_TRUE(glob_match("part-0000?", "part-00003"));
    EXPECT_FALSE(glob_match("part-0000?", "part-000031"));
    EXPECT_FALSE(glob_match("a?b", "a/b"));
    EXPECT_TRUE(glob_match("part-[0-3]", "part-2"));
    EXPECT_FALSE(glob_match("part-[0-3]", "part-7"));
    EXPECT_TRUE(glob_match("part-[!0-3]", "part-7"));
    EXPECT_TRUE(glob_match("x[]]", "x]"));
    EXPECT_TRUE(glob_match("a\\*b", "a*b"));
    EXPECT_FALSE(glob_match("a\\*b", "axb"));
    EXPECT_TRUE(glob_match("exact.rec", "exact.rec"));
    EXPECT_FALSE(glob_match("exact.rec", "exact.rec2"));
    EXPECT_TRUE(glob_match("*a*a*a*", "aaaa"));
    EXPECT_FALSE(glob_match("*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
}

TEST(FileGlob, MalformedPatternsAreNamed) {
    EXPECT_NO_THROW(check_glob("train/[ab]*"));
    EXPECT_NO_THROW(check_glob("a\\[b"));
    try {
        check_glob("train/[ab");
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::invalid_argument);
        EXPECT_STREQ(e.what(), "file pattern 'train/[ab': the class opened at character 7 is not closed with ']'");
    }
    EXPECT_THROW(check_glob(""), Error);
}

}  // namespace
}  // namespace cohort::detail
