// config/document.hpp: every error names source:line:column and the field
// path, because that is what a user needs to fix a cluster file.
#include "config/document.hpp"

#include <cohort/error.hpp>

#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace cohort::detail {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// The message of the Error(parse) that `f` throws; fails the test otherwise.
template <typename F>
std::string parse_error(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::parse) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "no error thrown";
    return {};
}

Document yaml(std::string_view text) { return Document(text, Format::yaml, "test.yaml"); }
Document json(std::string_view text) { return Document(text, Format::json, "test.json"); }

TEST(Document, ReadsNestedFields) {
    const Document doc = yaml("nodes:\n  - id: a\n    gpus: 8\n    gpu_memory: 80GiB\n    weight: 0.25\n");
    const Field root = doc.root();
    root.expect_map({"nodes"});
    const auto items = root.get("nodes")->items();
    ASSERT_EQ(items.size(), 1u);
    EXPECT_EQ(items[0].path(), "nodes[0]");
    EXPECT_EQ(items[0].get("id")->as_string(), "a");
    EXPECT_EQ(items[0].get("gpus")->path(), "nodes[0].gpus");
    EXPECT_EQ(items[0].get("gpus")->as_uint(100), 8u);
    EXPECT_EQ(items[0].get("gpu_memory")->as_size(), uint64_t{80} << 30);
    EXPECT_DOUBLE_EQ(items[0].get("weight")->as_double(), 0.25);
    EXPECT_FALSE(items[0].get("host").has_value());
}

TEST(Document, JsonAndYamlGiveTheSameTree) {
    const Document a = yaml("nodes:\n  - {id: a, gpus: 2}\n");
    const Document b = json("{\"nodes\": [{\"id\": \"a\", \"gpus\": 2}]}");
    for (const Document* d : {&a, &b}) {
        const auto items = d->root().get("nodes")->items();
        ASSERT_EQ(items.size(), 1u);
        EXPECT_EQ(items[0].get("id")->as_string(), "a");
        EXPECT_EQ(items[0].get("gpus")->as_uint(10), 2u);
    }
}

TEST(Document, MalformedYamlNamesLineAndColumn) {
    const std::string m = parse_error([] { yaml("nodes:\n  - id: a\n  - id: [b\n"); });
    EXPECT_THAT(m, AllOf(HasSubstr("test.yaml:"), HasSubstr("malformed YAML")));
    EXPECT_THAT(m, ::testing::MatchesRegex("test\\.yaml:[34]:[0-9]+: .*"));
}

TEST(Document, MalformedJsonNamesLineAndColumn) {
    const std::string m = parse_error([] { json("{\n  \"nodes\": [\n    {\"id\": \"a\",}\n  ]\n}\n"); });
    EXPECT_THAT(m, AllOf(HasSubstr("test.json:3:"), HasSubstr("malformed JSON")));
    // The column points at the stray '}' (column 16) or just before it.
    EXPECT_THAT(m, ::testing::MatchesRegex("test\\.json:3:1[56]: .*"));
}

TEST(Document, JsonTrailingGarbage) {
    const std::string m = parse_error([] { json("{\"nodes\": []}\n  oops\n"); });
    EXPECT_THAT(m, AllOf(HasSubstr("test.json:2:3:"), HasSubstr("after the document")));
}

TEST(Document, JsonTruncated) {
    const std::string m = parse_error([] { json("{\"nodes\": [\n"); });
    EXPECT_THAT(m, AllOf(HasSubstr("test.json:"), HasSubstr("malformed JSON")));
}

TEST(Document, JsonIsStrict) {
    // Valid YAML, but not JSON: single quotes and comments.
    EXPECT_THAT(parse_error([] { json("{'nodes': []}"); }), HasSubstr("test.json:1:2:"));
    EXPECT_THAT(parse_error([] { json("{\"nodes\": [] # x\n}"); }), HasSubstr("malformed JSON"));
}

TEST(Field, UnknownFieldSuggestsTheClosestName) {
    const Document doc = yaml("nodes:\n  - id: a\n    hots: h1\n");
    const auto item = doc.root().get("nodes")->items().at(0);
    const std::string m = parse_error([&] { item.expect_map({"id", "host", "address"}); });
    EXPECT_EQ(m, "test.yaml:3:5: nodes[0].hots: unknown field 'hots' (did you mean 'host'?)");
}

TEST(Field, UnknownFieldWithoutCloseNameListsTheAllowedOnes) {
    const Document doc = yaml("id: a\nzzzzzz: 1\n");
    const std::string m = parse_error([&] { doc.root().expect_map({"id", "host"}); });
    EXPECT_THAT(m, AllOf(HasSubstr("test.yaml:2:1: zzzzzz: unknown field 'zzzzzz'"), HasSubstr("expected one of: id host")));
}

TEST(Field, DuplicateKey) {
    const Document doc = yaml("id: a\nhost: h\nid: b\n");
    const std::string m = parse_error([&] { doc.root().expect_map({"id", "host"}); });
    EXPECT_EQ(m, "test.yaml:3:1: id: duplicate field 'id'");
}

TEST(Field, DuplicateKeyInJson) {
    const Document doc = json("{\"id\": \"a\",\n \"id\": \"b\"}");
    const std::string m = parse_error([&] { doc.root().expect_map({"id"}); });
    EXPECT_THAT(m, AllOf(HasSubstr("test.json:2:2:"), HasSubstr("duplicate field 'id'")));
}

TEST(Field, ExpectMapOnOtherTypes) {
    const Document doc = yaml("nodes: [1, 2]\nname: x\n");
    EXPECT_THAT(parse_error([&] { doc.root().get("nodes")->expect_map({"id"}); }),
                AllOf(HasSubstr("test.yaml:1:8: nodes: "), HasSubstr("expected a mapping, got a list")));
    EXPECT_EQ(parse_error([&] { doc.root().get("name")->expect_map({"id"}); }),
              "test.yaml:2:7: name: expected a mapping, got 'x'");
}

TEST(Field, WrongTypes) {
    const Document doc = yaml("gpus: [1]\nid: {a: 1}\nnodes: 3\nsize: [2]\nratio: [0.5]\n");
    const Field root = doc.root();
    EXPECT_EQ(parse_error([&] { root.get("gpus")->as_uint(10); }),
              "test.yaml:1:7: gpus: expected a non-negative integer, got a list");
    EXPECT_EQ(parse_error([&] { root.get("id")->as_string(); }), "test.yaml:2:5: id: expected text, got a mapping");
    EXPECT_EQ(parse_error([&] { root.get("nodes")->items(); }), "test.yaml:3:8: nodes: expected a list, got '3'");
    EXPECT_THAT(parse_error([&] { root.get("size")->as_size(); }), HasSubstr("size: expected a size in bytes"));
    EXPECT_THAT(parse_error([&] { root.get("ratio")->as_double(); }), HasSubstr("ratio: expected a number"));
}

TEST(Field, BadScalars) {
    const Document doc = yaml("a: 1.5\nb: lots\nc: 12abc\nd: \"\"\ne: 70000\nf: 99999999999999999999999\n");
    const Field root = doc.root();
    EXPECT_EQ(parse_error([&] { root.get("a")->as_uint(10); }),
              "test.yaml:1:4: a: expected a non-negative integer, got '1.5'");
    EXPECT_THAT(parse_error([&] { root.get("b")->as_size(); }),
                HasSubstr("test.yaml:2:4: b: expected a size in bytes such as 1024 or 80GiB, got 'lots'"));
    EXPECT_THAT(parse_error([&] { root.get("c")->as_double(); }), HasSubstr("c: expected a number, got '12abc'"));
    EXPECT_EQ(parse_error([&] { root.get("d")->as_string(); }), "test.yaml:4:4: d: must not be empty");
    EXPECT_EQ(parse_error([&] { root.get("e")->as_uint(65536); }),
              "test.yaml:5:4: e: 70000 is too large (at most 65536)");
    EXPECT_THAT(parse_error([&] { root.get("f")->as_uint(UINT64_MAX); }), HasSubstr("is too large"));
    EXPECT_EQ(root.get("e")->as_uint(70000), 70000u);
}

// A file's own bytes (control characters, bytes that are not UTF-8, very
// long values) reach a message escaped and cut, so it stays one readable,
// JSON-safe line (issue 19, defect 5).
TEST(Field, ErrorsEscapeTheFilesBytes) {
    const Document doc = json(std::string("{\"n\": \"1\\u0007\", \"s\": \"\\u00ff\", \"bad\\tname\": 1, \"long\": \"") +
                              std::string(500, 'x') + "\"}");
    const Field root = doc.root();
    EXPECT_EQ(parse_error([&] { root.get("n")->as_uint(10); }), "test.json:1:7: n: expected a non-negative integer, got '1\\x07'");
    EXPECT_THAT(parse_error([&] { root.get("s")->as_double(); }), HasSubstr("s: expected a number, got '\\xc3\\xbf'"));
    const std::string unknown = parse_error([&] { root.expect_map({"n", "s", "long"}); });
    EXPECT_THAT(unknown, HasSubstr("bad\\x09name: unknown field 'bad\\x09name'")) << unknown;
    const std::string long_value = parse_error([&] { root.get("long")->as_size(); });
    EXPECT_THAT(long_value, HasSubstr("...' (500 bytes)")) << long_value;
    EXPECT_LT(long_value.size(), 250u) << long_value;
    for (const std::string& message : {unknown, long_value})
        for (const char c : message) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << message;
}

TEST(Field, NegativeNumbers) {
    const Document doc = yaml("gpus: -1\ngpu_memory: -5\nother: -5GiB\n");
    const Field root = doc.root();
    EXPECT_EQ(parse_error([&] { root.get("gpus")->as_uint(10); }), "test.yaml:1:7: gpus: must not be negative, got -1");
    EXPECT_EQ(parse_error([&] { root.get("gpu_memory")->as_size(); }),
              "test.yaml:2:13: gpu_memory: must not be negative, got -5");
    EXPECT_THAT(parse_error([&] { root.get("other")->as_size(); }), HasSubstr("must not be negative"));
}

TEST(Field, ErrorsInJsonPointIntoTheJsonText) {
    const Document doc = json("{\n  \"nodes\": [\n    {\"id\": \"a\", \"gpus\": -2}\n  ]\n}");
    const auto item = doc.root().get("nodes")->items().at(0);
    EXPECT_EQ(parse_error([&] { item.get("gpus")->as_uint(10); }),
              "test.json:3:25: nodes[0].gpus: must not be negative, got -2");
}

TEST(Field, FailWithoutPathOmitsIt) {
    const Document doc = yaml("[1, 2]\n");
    EXPECT_EQ(parse_error([&] { doc.root().expect_map({"nodes"}); }), "test.yaml:1:1: expected a mapping, got a list");
}

TEST(ReadTextFile, MissingFileIsAnIoError) {
    const std::filesystem::path path = std::filesystem::temp_directory_path() / "cohort-unit-no-such-file.yaml";
    try {
        read_text_file(path);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::io);
        EXPECT_THAT(e.what(), HasSubstr("cohort-unit-no-such-file.yaml"));
    }
    try {
        read_text_file(std::filesystem::temp_directory_path());
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::io);
        EXPECT_THAT(e.what(), HasSubstr("directory"));
    }
}

TEST(ReadTextFile, ReadsBytesExactly) {
    const std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("cohort-unit-read-" + std::to_string(::getpid()) + ".txt");
    const std::string text = std::string("a\r\nb\0c\n", 7);
    std::ofstream(path, std::ios::binary) << text;
    EXPECT_EQ(read_text_file(path), text);
    std::filesystem::remove(path);
}

TEST(Formats, FromExtensionAndSniffing) {
    EXPECT_EQ(format_from_extension("a/b.json", Format::listing), Format::json);
    EXPECT_EQ(format_from_extension("a/b.YAML", Format::listing), Format::yaml);
    EXPECT_EQ(format_from_extension("b.yml", Format::listing), Format::yaml);
    EXPECT_EQ(format_from_extension("b.txt", Format::listing), Format::listing);
    EXPECT_EQ(format_from_extension("json", Format::automatic), Format::automatic);
    EXPECT_EQ(sniff_format("  \n {\"a\": 1}"), Format::json);
    EXPECT_EQ(sniff_format("[1]"), Format::json);
    EXPECT_EQ(sniff_format("a: 1"), Format::yaml);
    EXPECT_EQ(sniff_format(""), Format::yaml);
}

}  // namespace
}  // namespace cohort::detail
