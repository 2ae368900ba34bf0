// Dataset: text listings and YAML/JSON file lists, and their errors.
#include "support.hpp"

#include <cohort/dataset.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;

void expect_sample(const Dataset& d) {
    ASSERT_EQ(d.size(), 4u);
    EXPECT_EQ(d.files()[0].path, "train/part-000.rec");
    EXPECT_EQ(d.files()[0].bytes, 1000u);
    EXPECT_EQ(d.files()[0].records, 10u);
    EXPECT_EQ(d.files()[1].bytes, 2048u);
    EXPECT_EQ(d.files()[1].records, 20u);
    EXPECT_EQ(d.files()[2].path, "train/part-002.rec");
    EXPECT_EQ(d.files()[2].bytes, 1500u);
    EXPECT_EQ(d.files()[2].records, std::nullopt);
    EXPECT_EQ(d.files()[3].path, "val/part-000.rec");
    EXPECT_EQ(d.files()[3].records, 7u);
    EXPECT_EQ(d.total_bytes(), 1000u + 2048u + 1500u + 700u);
    EXPECT_EQ(d.find("val/part-000.rec"), 3u);
    EXPECT_EQ(d.find("val/part-001.rec"), std::nullopt);
}

TEST(Dataset, ListingFile) { expect_sample(Dataset::from_file(data_path("dataset.txt"))); }
TEST(Dataset, YamlFile) { expect_sample(Dataset::from_file(data_path("dataset.yaml"))); }
TEST(Dataset, JsonFile) { expect_sample(Dataset::from_file(data_path("dataset.json"))); }

TEST(Dataset, YamlTextIsRecognisedWithoutAnExtension) {
    expect_sample(Dataset::from_string(
        "files:\n  - {path: train/part-000.rec, bytes: 1000, records: 10}\n"
        "  - {path: train/part-001.rec, bytes: 2KiB, records: 20}\n  - {path: train/part-002.rec, bytes: 1500}\n"
        "  - {path: val/part-000.rec, bytes: 700, records: 7}\n"));
}

TEST(Dataset, TabSeparatedPathsMayHoldSpaces) {
    const Dataset d = Dataset::from_file(data_path("dataset_tabs.txt"));
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(d.files()[0].path, "my data/part 0.rec");
    EXPECT_EQ(d.files()[0].bytes, 1000u);
    EXPECT_EQ(d.files()[0].records, 10u);
    EXPECT_EQ(d.files()[1].path, "my data/part 1.rec");
    EXPECT_EQ(d.files()[1].bytes, 65536u);
    EXPECT_EQ(d.files()[1].records, std::nullopt);
}

TEST(Dataset, ListingUnitsCommentsAndLineEndings) {
    const Dataset d = Dataset::from_string("# header\r\n\r\na 1.5KiB\r\n  b   2GB   5  \n\n# c 1\nc\t64k\n d 0 0",
                                           Format::listing);
    ASSERT_EQ(d.size(), 4u);
    EXPECT_EQ(d.files()[0].bytes, 1536u);
    EXPECT_EQ(d.files()[1].path, "b");
    EXPECT_EQ(d.files()[1].bytes, 2'000'000'000u);
    EXPECT_EQ(d.files()[1].records, 5u);
    EXPECT_EQ(d.files()[2].path, "c");
    EXPECT_EQ(d.files()[2].bytes, 65536u);
    EXPECT_EQ(d.files()[3].path, "d");  // last line without a newline
    EXPECT_EQ(d.files()[3].bytes, 0u);
    EXPECT_EQ(d.files()[3].records, 0u);
}

TEST(Dataset, ListingErrorsNameLineAndColumn) {
    struct Case {
        const char* text;
        const char* message;
    } cases[] = {
        {"a.rec 100\nb.rec lots\n", "l.txt:2:7: expected a size in bytes such as 1024 or 64MiB, got 'lots'"},
        {"a.rec 100\n  b.rec -20\n", "l.txt:2:9: size must not be negative, got -20"},
        {"a.rec 1 2 3\n", "l.txt:1:1: expected 'PATH BYTES [RECORDS]', got 4 fields"},
        {"# x\n   lonely\n", "l.txt:2:4: expected 'PATH BYTES [RECORDS]', got 1 field"},
        {"a 1\nb 2\na 3\n", "l.txt:3:1: duplicate file 'a'"},
        {"a 1 many\n", "l.txt:1:5: expected a record count (a non-negative integer), got 'many'"},
        {"a 1 -4\n", "l.txt:1:5: expected a record count (a non-negative integer), got '-4'"},
        {"a 1 99999999999999999999999\n", "l.txt:1:5: expected a record count (a non-negative integer), got "
                                          "'99999999999999999999999'"},
        {"a 8192PiB\nb 1\n", "l.txt:2:1: dataset file 'b': total size would pass 2^63 bytes"},
        {"a 99999999999999999999\n", "l.txt:1:3: expected a size in bytes such as 1024 or 64MiB, got "
                                     "'99999999999999999999'"},
        {"", "l.txt: empty dataset: no 'PATH BYTES' lines"},
        {"# nothing\n\n   \n", "l.txt: empty dataset: no 'PATH BYTES' lines"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.text);
        EXPECT_EQ(error_message(Errc::parse, [&] { Dataset::from_string(c.text, Format::listing, "l.txt"); }),
                  c.message);
    }
}

TEST(Dataset, ListingErrorsInFilesNameTheFile) {
    const auto records = data_path("bad/dataset_records.txt");
    EXPECT_EQ(error_message(Errc::parse, [&] { Dataset::from_file(records); }),
              records.string() + ":2:10: expected a record count (a non-negative integer), got 'monkeys'");
    const auto negative = data_path("bad/dataset_negative.txt");
    EXPECT_EQ(error_message(Errc::parse, [&] { Dataset::from_file(negative); }),
              negative.string() + ":2:9: size must not be negative, got -20");
}

TEST(Dataset, StructuredErrors) {
    struct Case {
        const char* text;
        const char* message;
    } cases[] = {
        {"files: []\n", "d.yaml:1:8: files: empty dataset: 'files' must list at least one file"},
        {"name: x\n", "d.yaml:1:1: missing required field 'files'"},
        {"files:\n  - {path: a, bytes: 1}\n  - {path: a, bytes: 2}\n",
         "d.yaml:3:12: files[1].path: duplicate file 'a' (first listed at files[0])"},
        {"files:\n  - {path: a, bytes: -1}\n", "d.yaml:2:22: files[0].bytes: must not be negative, got -1"},
        {"files:\n  - {path: a, byts: 1}\n",
         "d.yaml:2:15: files[0].byts: unknown field 'byts' (did you mean 'bytes'?)"},
        {"files:\n  - {path: a}\n", "d.yaml:2:5: files[0]: missing required field 'bytes'"},
        {"files:\n  - {bytes: 1}\n", "d.yaml:2:5: files[0]: missing required field 'path'"},
        {"files:\n  - {path: a, bytes: 1, records: [3]}\n",
         "d.yaml:2:34: files[0].records: expected a non-negative integer, got a list"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.text);
        EXPECT_EQ(error_message(Errc::parse, [&] { Dataset::from_string(c.text, Format::yaml, "d.yaml"); }), c.message);
    }
}

TEST(Dataset, MalformedJsonNamesLineAndColumn) {
    const std::string m = error_message(Errc::parse, [] {
        Dataset::from_string("{\"files\": [\n  {\"path\": \"a\", \"bytes\": 1},,\n]}", Format::automatic, "d.json");
    });
    EXPECT_THAT(m, ::testing::StartsWith("d.json:2:"));
    EXPECT_THAT(m, HasSubstr("malformed JSON"));
}

TEST(Dataset, MissingFileIsAnIoError) {
    EXPECT_THAT(error_message(Errc::io, [] { Dataset::from_file(data_path("no-such-dataset.txt")); }),
                HasSubstr("no-such-dataset.txt"));
}

TEST(Dataset, AddChecksPathsAndTotal) {
    Dataset d;
    d.add({"a", 10, 3});
    d.add({"b", 0, {}});
    EXPECT_EQ(d.total_bytes(), 10u);
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { d.add({"a", 1, {}}); }), HasSubstr("'a'"));
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { d.add({"", 1, {}}); }), HasSubstr("empty"));
    d.add({"big", (uint64_t{1} << 63) - 10, {}});
    EXPECT_EQ(d.total_bytes(), uint64_t{1} << 63);
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { d.add({"more", 1, {}}); }), HasSubstr("2^63"));
    EXPECT_EQ(d.size(), 3u);
    EXPECT_EQ(d.total_bytes(), uint64_t{1} << 63);
}

}  // namespace
}  // namespace cohort::test
