// Incremental snapshots: writing the changed jobs' parts and the snapshot
// that names them, and reading them back.
#include "coordinator/journal/snapshot_parts.hpp"

#include "coordinator/journal/data_dir.hpp"
#include "coordinator/journal/record.hpp"
#include "core/json_fields.hpp"
#include "core/overloaded.hpp"

#include <cohort/error.hpp>

#include <charconv>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>

namespace cohort::coord::journal {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

constexpr std::string_view kJobParts = "job_parts";

// "job_parts" of a version-2 snapshot's state, each file name checked: the
// snapshot's text decides which files are opened.
std::vector<PartRef> read_refs(const json::value& state) {
    detail::FieldReader reader(state, "snapshot: state", Errc::parse);
    const json::array& entries = reader.array(kJobParts);
    if (reader.find("jobs")) reader.fail("jobs", "is not expected beside job_parts (version 2 keeps jobs in parts)");
    std::vector<PartRef> out;
    out.reserve(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
        detail::FieldReader entry(entries[i], fmt::format("snapshot: state: job_parts[{}]", i), Errc::parse);
        entry.allow({"job", "file", "crc32"});
        PartRef ref{entry.string("job"), entry.string("file"), 0};
        if (!part_sequence(ref.file)) {
            entry.fail("file",
                       fmt::format("'{}' is not a part file name (part-<20 digits>-<6 digits>.json)", ref.file));
        }
        const std::string hex = entry.string("crc32");
        const auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), ref.crc32, 16);
        if (hex.size() != 8 || ec != std::errc() || end != hex.data() + hex.size()) {
            entry.fail("crc32", fmt::format("'{}' is not 8 hex digits", hex));
        }
        out.push_back(std::move(ref));
    }
    return out;
}

// One part, checked against the snapshot's reference to it.
json::value read_part_for(const fs::path& snapshot_file, uint64_t seq, const PartRef& ref, std::string_view advice) {
    const fs::path file = snapshot_file.parent_path() / ref.file;
    const auto fail = [&](const std::string& what) {
        return Error(Errc::parse, fmt::format("{}: {} (the part of job '{}' that {} names); {}", file.string(), what,
                                              ref.job, snapshot_file.string(), advice));
    };
    std::error_code ec;
    if (!fs::exists(file, ec) && !ec) throw fail("the part file is missing");
    std::string text;
    try {
        text = read_file(file);
    } catch (const Error& e) {
        throw fail(e.what());
    }
    std::string_view record = text;
    if (record.ends_with('\n')) record.remove_suffix(1);
    if (const auto problem = checksum_problem(record)) {
        throw fail(fmt::format("byte 0: the part ({} bytes) is damaged: {}", text.size(), *problem));
    }
    if (*stored_checksum(record) != ref.crc32) {
        throw fail(
            fmt::format("byte 0: the part's checksum {:08x} is not the {:08x} the snapshot records: it is "
                        "another job's part or another snapshot's",
                        *stored_checksum(record), ref.crc32));
    }
    try {
        PartRecord part = read_part(record);
        if (part.seq > seq || part_sequence(ref.file) != part.seq) {
            throw Error(Errc::parse, fmt::format("snapshot part: seq {} does not match the file name or comes after "
                                                 "the snapshot's ({})",
                                                 part.seq, seq));
        }
        return std::move(part.job);
    } catch (const Error& e) {
        throw fail(fmt::format("byte 0: {}", e.what()));
    }
}

}  // namespace

void IncrementalSnapshots::changed(const Event& event) {
    std::visit(detail::Overloaded{[&](const event::Resumed&) { all_changed_ = true; },  // every job's clocks restart
                          [&](const event::AnswerKept&) {},  // the snapshot file itself holds the answers
                          [&](const auto& e) { changed_.insert(e.job); }},
               event);
}

SnapshotWrite IncrementalSnapshots::write(const fs::path& dir, uint64_t seq, const CoordinatorState& state) {
    SnapshotWrite out;
    std::map<std::string, PartRef, std::less<>> parts;
    json::array refs;
    std::size_t index = 0;
    for (const auto& [name, job] : state.jobs()) {
        const auto old = parts_.find(name);
        PartRef ref;
        if (!all_changed_ && old != parts_.end() && !changed_.contains(name)) {
            ref = old->second;
            ++out.parts_reused;
        } else {
            const fs::path file = part_path(dir, seq, index);
            const std::string text = part_text(seq, job.snapshot());
            write_file_synced(file, text);
            ref = PartRef{name, file.filename().string(),
                          *stored_checksum(std::string_view(text).substr(0, text.size() - 1))};
            ++out.parts_written;
            out.bytes += text.size();
        }
        ++index;
        refs.push_back(json::object{{"job", ref.job}, {"file", ref.file}, {"crc32", fmt::format("{:08x}", ref.crc32)}});
        parts.emplace(name, std::move(ref));
    }
    if (out.parts_written > 0) sync_directory(dir);
    json::object head = state.snapshot_without_jobs();
    head[kJobParts] = std::move(refs);
    const std::string text = incremental_snapshot_text(seq, head);
    replace_file_durably(snapshot_path(dir, seq), text);
    out.bytes += text.size();
    // Only now: a failure above leaves the previous snapshot's parts named.
    parts_ = std::move(parts);
    changed_.clear();
    all_changed_ = false;
    return out;
}

json::value with_parts(const fs::path& dir, uint64_t seq, json::value state, std::string_view advice) {
    const fs::path snapshot_file = snapshot_path(dir, seq);
    std::vector<PartRef> refs;
    try {
        refs = read_refs(state);
    } catch (const Error& e) {
        throw Error(Errc::parse, fmt::format("{}: byte 0: {}; {}", snapshot_file.string(), e.what(), advice));
    }
    json::array jobs;
    jobs.reserve(refs.size());
    for (const PartRef& ref : refs) {
        json::value job = read_part_for(snapshot_file, seq, ref, advice);
        // The job a part holds is the one the snapshot names for it.
        const json::object* object = job.if_object();
        const json::value* name = object ? object->if_contains("name") : nullptr;
        if (!name || !name->is_string() || name->get_string() != ref.job) {
            throw Error(Errc::parse,
                        fmt::format("{}: byte 0: the part does not hold job '{}', which {} names it for; {}",
                                    (snapshot_file.parent_path() / ref.file).string(), ref.job, snapshot_file.string(),
                                    advice));
        }
        jobs.push_back(std::move(job));
    }
    json::object& object = state.as_object();
    object.erase(kJobParts);
    object["jobs"] = std::move(jobs);
    return state;
}

std::set<std::string> parts_named_by(const fs::path& snapshot_file) {
    const std::string text = read_file(snapshot_file);
    // Version 1, whole (and maybe large): it names no part, so it is not parsed.
    if (text.starts_with("{\"format\":\"cohort-coordinator-snapshot\",\"version\":1,")) return {};
    std::string_view record = text;
    if (record.ends_with('\n')) record.remove_suffix(1);
    if (const auto problem = checksum_problem(record)) {
        throw Error(Errc::parse, fmt::format("{}: the snapshot is damaged: {}", snapshot_file.string(), *problem));
    }
    std::set<std::string> out;
    try {
        const SnapshotRecord snapshot = read_snapshot(record);
        if (snapshot.version == 1) return out;
        for (PartRef& ref : read_refs(snapshot.state)) out.insert(std::move(ref.file));
    } catch (const Error& e) {
        throw Error(Errc::parse, fmt::format("{}: {}", snapshot_file.string(), e.what()));
    }
    return out;
}

}  // namespace cohort::coord::journal
