#include "config/document.hpp"

#include "core/text.hpp"

#include <cohort/error.hpp>

#include <cctype>
#include <charconv>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <system_error>

#include <boost/json/stream_parser.hpp>
#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

namespace cohort::detail {

namespace {

// 1-based line and column of a byte offset.
std::pair<std::size_t, std::size_t> line_column(std::string_view text, std::size_t offset) {
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++line;
            column = 1;
        } else {
            ++column;
        }
    }
    return {line, column};
}

void check_json_syntax(std::string_view text, const std::string& source) {
    boost::json::stream_parser parser;
    boost::system::error_code ec;
    const std::size_t used = parser.write_some(text.data(), text.size(), ec);
    if (!ec) {
        if (used < text.size()) {
            // Trailing characters after the document.
            const auto [line, column] = line_column(text, used);
            throw Error(Errc::parse, fmt::format("{}:{}:{}: malformed JSON: unexpected text after the document",
                                                 source, line, column));
        }
        parser.finish(ec);
    }
    if (ec) {
        const auto [line, column] = line_column(text, used);
        throw Error(Errc::parse,
                    fmt::format("{}:{}:{}: malformed JSON: {}", source, line, column, ec.message()));
    }
}

std::string describe(const YAML::Node& node) {
    switch (node.Type()) {
        case YAML::NodeType::Map: return "a mapping";
        case YAML::NodeType::Sequence: return "a list";
        case YAML::NodeType::Null: return "nothing";
        case YAML::NodeType::Scalar: return quote(node.Scalar());
        default: return "an undefined value";
    }
}

}  // namespace

// open(O_CLOEXEC) rather than std::ifstream, whose fopen has no "e": a
// worker started on another thread meanwhile must not inherit the file.
std::string read_text_file(const std::filesystem::path& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw Error(Errc::io, fmt::format("{}: is a directory, expected a file", path.string()));
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        throw Error(Errc::io, fmt::format("{}: cannot open: {}", path.string(), std::generic_category().message(errno)));
    std::string text;
    char buffer[65536];
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n > 0) {
            text.append(buffer, static_cast<std::size_t>(n));
        } else if (n == 0) {
            break;
        } else if (errno != EINTR) {
            const int error = errno;
            ::close(fd);
            throw Error(Errc::io, fmt::format("{}: read failed: {}", path.string(),
                                              std::generic_category().message(error)));
        }
    }
    ::close(fd);
    return text;
}

Format format_from_extension(const std::filesystem::path& path, Format otherwise) {
    std::string ext = path.extension().string();
    for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (ext == ".json") return Format::json;
    if (ext == ".yaml" || ext == ".yml") return Format::yaml;
    return otherwise;
}

Format sniff_format(std::string_view text) {
    for (char c : text) {
        if (std::isspace(static_cast<unsigned char>(c))) continue;
        return (c == '{' || c == '[') ? Format::json : Format::yaml;
    }
    return Format::yaml;
}

Document::Document(std::string_view text, Format format, std::string source) : source_(std::move(source)) {
    if (format == Format::automatic) format = sniff_format(text);
    if (format == Format::json) check_json_syntax(text, source_);
    try {
        root_ = YAML::Load(std::string(text));
    } catch (const YAML::Exception& e) {
        throw Error(Errc::parse, fmt::format("{}:{}:{}: malformed {}: {}", source_, e.mark.line + 1,
                                             e.mark.column + 1, format == Format::json ? "JSON" : "YAML",
                                             e.msg));
    }
}

Field Document::root() const { return Field(*this, root_, ""); }

Field::Field(const Document& document, YAML::Node node, std::string path)
    : document_(&document), node_(std::move(node)), path_(std::move(path)) {}

void Field::fail(std::string_view what) const {
    const YAML::Mark mark = node_.Mark();
    std::string where = document_->source();
    if (!mark.is_null()) where += fmt::format(":{}:{}", mark.line + 1, mark.column + 1);
    if (path_.empty()) throw Error(Errc::parse, fmt::format("{}: {}", where, what));
    // The path holds the file's own field names, which may be any bytes.
    throw Error(Errc::parse, fmt::format("{}: {}: {}", where, escape_bytes(path_, 200), what));
}

void Field::expect_map(std::initializer_list<std::string_view> allowed) const {
    if (!node_.IsMap()) fail(fmt::format("expected a mapping, got {}", describe(node_)));
    std::set<std::string> seen;
    for (const auto& entry : node_) {
        const YAML::Node& key = entry.first;
        const std::string name = key.IsScalar() ? key.Scalar() : std::string();
        Field key_field(*document_, key, path_.empty() ? name : path_ + "." + name);
        if (!key.IsScalar()) Field(*document_, key, path_).fail("field names must be plain text");
        bool known = false;
        for (std::string_view a : allowed) known = known || a == name;
        if (!known) {
            std::string message = fmt::format("unknown field {}", quote(name));
            if (auto near = closest_word(name, allowed)) message += fmt::format(" (did you mean '{}'?)", *near);
            else {
                message += " (expected one of:";
                for (std::string_view a : allowed) message += fmt::format(" {}", a);
                message += ")";
            }
            key_field.fail(message);
        }
        if (!seen.insert(name).second) key_field.fail(fmt::format("duplicate field {}", quote(name)));
    }
}

std::optional<Field> Field::get(std::string_view key) const {
    for (const auto& entry : node_) {
        if (entry.first.IsScalar() && entry.first.Scalar() == key) {
            std::string sub = path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
            return Field(*document_, entry.second, std::move(sub));
        }
    }
    return std::nullopt;
}

std::vector<Field> Field::items() const {
    if (!node_.IsSequence()) fail(fmt::format("expected a list, got {}", describe(node_)));
    std::vector<Field> out;
    out.reserve(node_.size());
    std::size_t i = 0;
    for (const auto& item : node_) out.emplace_back(*document_, item, fmt::format("{}[{}]", path_, i++));
    return out;
}

std::string Field::as_string() const {
    if (!node_.IsScalar()) fail(fmt::format("expected text, got {}", describe(node_)));
    if (node_.Scalar().empty()) fail("must not be empty");
    return node_.Scalar();
}

uint64_t Field::as_uint(uint64_t max) const {
    if (!node_.IsScalar()) fail(fmt::format("expected a non-negative integer, got {}", describe(node_)));
    const std::string& text = node_.Scalar();
    if (!text.empty() && text[0] == '-') fail(fmt::format("must not be negative, got {}", escape_bytes(text)));
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc::result_out_of_range || (ec == std::errc() && value > max))
        fail(fmt::format("{} is too large (at most {})", escape_bytes(text), max));
    if (ec != std::errc() || end != text.data() + text.size())
        fail(fmt::format("expected a non-negative integer, got {}", quote(text)));
    return value;
}

uint64_t Field::as_size() const {
    if (!node_.IsScalar()) fail(fmt::format("expected a size in bytes, got {}", describe(node_)));
    const std::string& text = node_.Scalar();
    if (!text.empty() && text[0] == '-') fail(fmt::format("must not be negative, got {}", escape_bytes(text)));
    const auto bytes = parse_size(text);
    if (!bytes) fail(fmt::format("expected a size in bytes such as 1024 or 80GiB, got {}", quote(text)));
    return *bytes;
}

double Field::as_double() const {
    if (!node_.IsScalar()) fail(fmt::format("expected a number, got {}", describe(node_)));
    const std::string& text = node_.Scalar();
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size())
        fail(fmt::format("expected a number, got {}", quote(text)));
    return value;
}

}  // namespace cohort::detail
