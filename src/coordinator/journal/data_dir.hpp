// The coordinator's data directory on POSIX: its file names, and the few
// file operations durability needs (append, fsync, atomic replace,
// truncate). Every failure is Error(io) naming the file and the reason.
// What it creates is private to the coordinator's user whatever the umask:
// the directory 0700, files 0600 (the state holds the store's values).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::coord::journal {

// <dir>/snapshot-00000000000000000012.json: the state after event 12.
std::filesystem::path snapshot_path(const std::filesystem::path& dir, uint64_t seq);
// <dir>/journal-00000000000000000012.jsonl: the events after event 12.
std::filesystem::path journal_path(const std::filesystem::path& dir, uint64_t seq);

// <dir>/part-00000000000000000012-000003.json: job 3 (counting from 0) of
// the snapshot after event 12, written by that snapshot.
std::filesystem::path part_path(const std::filesystem::path& dir, uint64_t seq, std::size_t index);
// The snapshot sequence number in a part file's name, or nothing for any
// other name. Snapshots name their parts, and a snapshot's text is not
// trusted: only a name this accepts is opened (no '/', no "..").
std::optional<uint64_t> part_sequence(std::string_view name);

// <dir>/manifest.json: the newest journal and the last event known durable.
std::filesystem::path manifest_path(const std::filesystem::path& dir);

// Creates the directory (mode 0700) and any missing parents; an existing
// directory keeps its mode.
void create_data_directory(const std::filesystem::path& dir);

// open(2) with O_CLOEXEC; a file it creates gets mode 0600. Error(io)
// saying `what` and naming the file.
int open_private(const std::filesystem::path& path, int flags, std::string_view what);

struct DirectoryListing {
    std::vector<uint64_t> snapshots;                 // sequence numbers, ascending
    std::vector<uint64_t> journals;                  // the same
    std::vector<std::string> parts;                  // part file names, sorted
    std::vector<std::filesystem::path> temporaries;  // *.tmp left by a crash mid-write
    bool manifest = false;                           // manifest.json is there
};

// Creates the directory if it is missing. Other files are left alone.
DirectoryListing list_data_directory(const std::filesystem::path& dir);

// A journal segment open for appending (created if missing).
class AppendFile {
public:
    AppendFile() = default;
    explicit AppendFile(std::filesystem::path path);
    AppendFile(AppendFile&& other) noexcept;
    AppendFile& operator=(AppendFile&& other) noexcept;
    AppendFile(const AppendFile&) = delete;
    AppendFile& operator=(const AppendFile&) = delete;
    ~AppendFile();

    bool is_open() const { return fd_ >= 0; }
    const std::filesystem::path& path() const { return path_; }
    // All of `bytes`, or Error(io).
    void write(std::string_view bytes);
    // The written bytes reach the disk (fdatasync).
    void sync();
    void close() noexcept;

private:
    std::filesystem::path path_;
    int fd_ = -1;
};

std::string read_file(const std::filesystem::path& path);
// Creates (or truncates) `path` and writes `bytes` with one fsync; the
// caller fsyncs the directory.
void write_file_synced(const std::filesystem::path& path, std::string_view bytes);
// <path>.tmp, fsync, rename over `path`, fsync the directory: after a crash
// the file is either the old one or the new one, never a part.
void replace_file_durably(const std::filesystem::path& path, std::string_view bytes);
// Cuts the file to `size` bytes and fsyncs it.
void truncate_file(const std::filesystem::path& path, uint64_t size);
void sync_directory(const std::filesystem::path& dir);
// Removes the file and reports nothing if it is already gone.
void remove_file(const std::filesystem::path& path);

}  // namespace cohort::coord::journal
