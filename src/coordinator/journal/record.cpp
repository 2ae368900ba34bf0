// Journal lines and snapshot files as checksummed JSON records.
#include "coordinator/journal/record.hpp"

#include "coordinator/state/json_parse.hpp"
#include "core/json_fields.hpp"
#include "core/json_text.hpp"

#include <array>

#include <fmt/format.h>

namespace cohort::coord::journal {

namespace json = boost::json;

namespace {

constexpr std::string_view kSnapshotFormat = "cohort-coordinator-snapshot";
constexpr uint64_t kWholeSnapshotVersion = 1;
constexpr uint64_t kIncrementalSnapshotVersion = 2;
constexpr std::string_view kPartFormat = "cohort-coordinator-snapshot-part";
constexpr uint64_t kPartVersion = 1;
constexpr std::string_view kManifestFormat = "cohort-coordinator-manifest";
constexpr uint64_t kManifestVersion = 1;
// ,"crc32":"xxxxxxxx"} : the fixed tail of every record.
constexpr std::string_view kChecksumOpen = ",\"crc32\":\"";
constexpr std::size_t kChecksumTail = kChecksumOpen.size() + 8 + 2;

constexpr std::array<uint32_t, 256> make_crc_table() {
    std::array<uint32_t, 256> table{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) != 0 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    return table;
}

constexpr std::array<uint32_t, 256> kCrcTable = make_crc_table();

// `body` is a JSON object without its closing brace.
std::string seal(std::string body) {
    const uint32_t crc = crc32(body);
    body += fmt::format("{}{:08x}\"}}\n", kChecksumOpen, crc);
    return body;
}

}  // namespace

uint32_t crc32(std::string_view bytes) {
    uint32_t c = 0xFFFFFFFFu;
    for (const char ch : bytes) c = kCrcTable[(c ^ static_cast<unsigned char>(ch)) & 0xFFu] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

std::string journal_line(uint64_t seq, const Event& event) {
    return seal(fmt::format("{{\"seq\":{},\"event\":{}", seq, detail::to_text(to_json(event))));
}

std::string snapshot_text(uint64_t seq, const json::value& state) {
    return seal(fmt::format("{{\"format\":\"{}\",\"version\":{},\"seq\":{},\"state\":{}", kSnapshotFormat,
                            kWholeSnapshotVersion, seq, detail::to_text(state)));
}

std::string incremental_snapshot_text(uint64_t seq, const json::value& state) {
    return seal(fmt::format("{{\"format\":\"{}\",\"version\":{},\"seq\":{},\"state\":{}", kSnapshotFormat,
                            kIncrementalSnapshotVersion, seq, detail::to_text(state)));
}

std::string part_text(uint64_t seq, const json::value& job) {
    return seal(fmt::format("{{\"format\":\"{}\",\"version\":{},\"seq\":{},\"job\":{}", kPartFormat, kPartVersion, seq,
                            detail::to_text(job)));
}

std::optional<uint32_t> stored_checksum(std::string_view record) {
    if (record.size() < kChecksumTail + 1 || !record.ends_with("\"}") ||
        record.substr(record.size() - kChecksumTail, kChecksumOpen.size()) != kChecksumOpen) {
        return std::nullopt;
    }
    uint32_t stored = 0;
    for (const char ch : record.substr(record.size() - 10, 8)) {
        uint32_t digit = 0;
        if (ch >= '0' && ch <= '9') {
            digit = static_cast<uint32_t>(ch - '0');
        } else if (ch >= 'a' && ch <= 'f') {
            digit = static_cast<uint32_t>(ch - 'a' + 10);
        } else {
            return std::nullopt;
        }
        stored = stored << 4 | digit;
    }
    return stored;
}

std::optional<std::string> checksum_problem(std::string_view record) {
    if (record.size() < kChecksumTail + 1 || !record.ends_with("\"}") ||
        record.substr(record.size() - kChecksumTail, kChecksumOpen.size()) != kChecksumOpen) {
        return "no checksum at its end";
    }
    const std::optional<uint32_t> stored = stored_checksum(record);
    if (!stored) return fmt::format("checksum '{}' is not 8 hex digits", record.substr(record.size() - 10, 8));
    const uint32_t actual = crc32(record.substr(0, record.size() - kChecksumTail));
    if (actual != *stored) return fmt::format("checksum mismatch (stored {:08x}, computed {:08x})", *stored, actual);
    return std::nullopt;
}

JournalEntry read_journal_line(std::string_view record) {
    const json::value value = parse_json(record);
    detail::FieldReader reader(value, "journal line", Errc::parse);
    reader.allow({"seq", "event", "crc32"});
    JournalEntry entry{reader.uint("seq"), event_from_json(reader.value("event"))};
    return entry;
}

SnapshotRecord read_snapshot(std::string_view record) {
    json::value value = parse_json(record);
    detail::FieldReader reader(value, "snapshot", Errc::parse);
    reader.allow({"format", "version", "seq", "state", "crc32"});
    if (reader.string("format") != kSnapshotFormat) {
        reader.fail("format", fmt::format("is '{}', expected '{}'", reader.string("format"), kSnapshotFormat));
    }
    const uint64_t version = reader.uint("version");
    if (version != kWholeSnapshotVersion && version != kIncrementalSnapshotVersion) {
        reader.fail("version", fmt::format("{} is not supported (this build reads versions {} and {})", version,
                                           kWholeSnapshotVersion, kIncrementalSnapshotVersion));
    }
    SnapshotRecord out{reader.uint("seq"), version, {}};
    reader.value("state");
    out.state = std::move(value.get_object()["state"]);
    return out;
}

PartRecord read_part(std::string_view record) {
    json::value value = parse_json(record);
    detail::FieldReader reader(value, "snapshot part", Errc::parse);
    reader.allow({"format", "version", "seq", "job", "crc32"});
    if (reader.string("format") != kPartFormat) {
        reader.fail("format", fmt::format("is '{}', expected '{}'", reader.string("format"), kPartFormat));
    }
    if (reader.uint("version") != kPartVersion) {
        reader.fail("version", fmt::format("{} is not supported (this build reads version {})", reader.uint("version"),
                                           kPartVersion));
    }
    PartRecord out{reader.uint("seq"), {}};
    reader.value("job");
    out.job = std::move(value.get_object()["job"]);
    return out;
}

std::string manifest_text(const ManifestRecord& manifest) {
    return seal(fmt::format("{{\"format\":\"{}\",\"version\":{},\"journal\":{},\"durable\":{}", kManifestFormat,
                            kManifestVersion, manifest.journal, manifest.durable));
}

ManifestRecord read_manifest(std::string_view record) {
    json::value value = parse_json(record);
    detail::FieldReader reader(value, "manifest", Errc::parse);
    reader.allow({"format", "version", "journal", "durable", "crc32"});
    if (reader.string("format") != kManifestFormat) {
        reader.fail("format", fmt::format("is '{}', expected '{}'", reader.string("format"), kManifestFormat));
    }
    if (reader.uint("version") != kManifestVersion) {
        reader.fail("version", fmt::format("{} is not supported (this build reads version {})", reader.uint("version"),
                                           kManifestVersion));
    }
    ManifestRecord out{reader.uint("journal"), reader.uint("durable")};
    if (out.durable < out.journal) {
        reader.fail("durable", fmt::format("{} is before the journal's first event ({})", out.durable, out.journal));
    }
    return out;
}

}  // namespace cohort::coord::journal
