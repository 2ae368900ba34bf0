// Checkpoint files (checkpoint.hpp). The format is text, one item a line:
//
//   cohort-train checkpoint 1
//   job NAME
//   created_at SECONDS
//   fingerprint N
//   values COUNT
//   VALUE            (COUNT lines)
//
// Every double is written as the shortest text that reads back exactly.
#include "checkpoint.hpp"

#include "../common/files.hpp"

#include <cohort/error.hpp>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <system_error>
#include <unistd.h>

#include <fmt/format.h>

namespace cohort_train {

namespace {

constexpr std::string_view kMagic = "cohort-train checkpoint 1";

// "KEY VALUE" on the next line; false when the line is not that.
bool read_field(std::istream& in, std::string_view key, std::string& value) {
    std::string line;
    if (!std::getline(in, line) || line.size() <= key.size() || line.compare(0, key.size(), key) != 0 ||
        line[key.size()] != ' ')
        return false;
    value = line.substr(key.size() + 1);
    return true;
}

template <typename T>
bool parse(const std::string& text, T& value) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

Checkpoint::Checkpoint(std::filesystem::path file, CheckpointOwner owner)
    : file_(std::move(file)), owner_(std::move(owner)) {}

std::optional<std::vector<double>> Checkpoint::load(std::size_t size, std::string& note) const {
    note.clear();
    std::string bytes;
    if (const int error = cohort_examples::read_file(file_.string(), bytes); error != 0) {
        if (error != ENOENT) note = fmt::format("cannot read checkpoint '{}': {}", file_.string(), std::strerror(error));
        return std::nullopt;
    }
    std::istringstream in(std::move(bytes));
    const std::string where = fmt::format("checkpoint '{}'", file_.string());
    std::string line, job, created, fingerprint, count;
    if (!std::getline(in, line) || line != kMagic) {
        note = fmt::format("{}: not a cohort-train checkpoint (first line '{}'); ignored", where, line.substr(0, 60));
        return std::nullopt;
    }
    double created_at = 0;
    uint64_t print = 0, n = 0;
    if (!read_field(in, "job", job) || !read_field(in, "created_at", created) || !parse(created, created_at) ||
        !read_field(in, "fingerprint", fingerprint) || !parse(fingerprint, print) ||
        !read_field(in, "values", count) || !parse(count, n)) {
        note = fmt::format("{}: damaged header; ignored", where);
        return std::nullopt;
    }
    if (job != owner_.job || created_at != owner_.created_at) {
        note = fmt::format("{}: written for job '{}' created at {}, not this job '{}' created at {}; ignored", where,
                           job, created_at, owner_.job, owner_.created_at);
        return std::nullopt;
    }
    if (print != owner_.fingerprint || n != size) {
        note = fmt::format("{}: written with other model or data flags; ignored", where);
        return std::nullopt;
    }
    std::vector<double> values(size);
    for (std::size_t i = 0; i < size; ++i) {
        if (!std::getline(in, line) || !parse(line, values[i])) {
            note = fmt::format("{}: value {} of {} is missing or not a number (a cut-off file?); ignored", where,
                               i + 1, size);
            return std::nullopt;
        }
    }
    return values;
}

void Checkpoint::save(std::span<const double> state) const {
    std::string text = fmt::format("{}\njob {}\ncreated_at {}\nfingerprint {}\nvalues {}\n", kMagic, owner_.job,
                                   owner_.created_at, owner_.fingerprint, state.size());
    for (const double v : state) fmt::format_to(std::back_inserter(text), "{}\n", v);
    std::filesystem::path tmp = file_;
    tmp += fmt::format(".tmp{}", ::getpid());
    {
        if (const int err = cohort_examples::write_file(tmp.string(), text); err != 0) {
            std::error_code ignored;
            std::filesystem::remove(tmp, ignored);
            throw cohort::Error(cohort::Errc::io,
                                fmt::format("cannot write checkpoint '{}': {}", tmp.string(), std::strerror(err)));
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, file_, ec);
    if (ec) {
        std::error_code ignored;
        std::filesystem::remove(tmp, ignored);
        throw cohort::Error(cohort::Errc::io, fmt::format("cannot move checkpoint '{}' to '{}': {}", tmp.string(),
                                                          file_.string(), ec.message()));
    }
}

std::filesystem::path checkpoint_file(const std::string& flag, const std::string& member) {
    if (!flag.empty()) return flag;
    const char* dir = std::getenv("COHORT_CHECKPOINT_DIR");
    if (dir == nullptr || *dir == '\0') return {};
    const char* local_rank = std::getenv("LOCAL_RANK");
    std::string who = local_rank != nullptr && *local_rank != '\0' ? local_rank : member;
    // A name, not a path, whatever the variables hold.
    for (char& c : who) {
        const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                           c == '_' || c == '.';
        if (!plain) c = '_';
    }
    return std::filesystem::path(dir) / fmt::format("cohort-train-{}.ckpt", who);
}

}  // namespace cohort_train
