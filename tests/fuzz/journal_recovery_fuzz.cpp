// Start-up from a damaged data directory: the input is split into files
// (a manifest, snapshots, their part files, journal segments) written into
// a scratch directory, and the coordinator's recovery reads them. A record line may
// be sealed with a correct CRC-32 by the harness, so the damage reaches
// the JSON and the sequence checks behind the checksums. Recovery must end
// in a state or a named error, never a crash.
#include "fuzz_input.hpp"

#include "coordinator/journal/data_dir.hpp"
#include "coordinator/journal/record.hpp"
#include "coordinator/journal/recovery.hpp"

#include <fstream>

#include <fmt/format.h>

namespace {

using namespace cohort::coord;
namespace fs = std::filesystem;

// Lines starting with '!' are sealed: the '!' dropped, the checksum fixed.
std::string with_seals(std::string_view text) {
    constexpr std::string_view kOpen = ",\"crc32\":\"";
    std::string out;
    cohort::fuzz::Input lines(reinterpret_cast<const uint8_t*>(text.data()), text.size());
    while (!lines.empty()) {
        std::string_view line = lines.line();
        if (line.starts_with('!')) {
            line.remove_prefix(1);
            if (const std::size_t at = line.rfind(kOpen); at != std::string_view::npos) line = line.substr(0, at);
            out += fmt::format("{}{}{:08x}\"}}\n", line, kOpen, journal::crc32(line));
        } else {
            out += line;
            out += '\n';
        }
    }
    if (!text.ends_with('\n') && !out.empty()) out.pop_back();  // a torn last line stays torn
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    const fs::path dir = cohort::fuzz::scratch_directory() / "data";
    fs::remove_all(dir);
    fs::create_directories(dir);
    // Files are separated by a line "=== NAME": manifest, snapshot-N,
    // part-N-I (job I of snapshot N) or journal-N (N its sequence number).
    cohort::fuzz::Input in(data, size);
    std::string name;  // none yet: journal-0, if there is text for it
    std::string text;
    const auto flush = [&] {
        if (name.empty() && text.empty()) return;
        if (name.empty()) name = "journal-0";
        fs::path path;
        const auto number = [](std::string_view digits) {
            uint64_t n = 0;
            for (const char c : digits)
                n = c >= '0' && c <= '9' ? (n % 100000) * 10 + static_cast<uint64_t>(c - '0') : n;
            return n;
        };
        const uint64_t seq = number(name);
        if (name.starts_with("manifest")) {
            path = journal::manifest_path(dir);
        } else if (name.starts_with("part")) {
            const std::size_t dash = name.rfind('-');
            const std::string_view whole = name;
            path = journal::part_path(dir, number(whole.substr(0, dash)),
                                      dash == std::string::npos ? 0 : number(whole.substr(dash + 1)) % 1000000);
        } else if (name.starts_with("snapshot")) {
            path = journal::snapshot_path(dir, seq);
        } else {
            path = journal::journal_path(dir, seq);
        }
        std::ofstream(path, std::ios::binary | std::ios::app) << with_seals(text);
        text.clear();
    };
    while (!in.empty()) {
        const std::string_view line = in.line();
        if (line.starts_with("=== ")) {
            flush();
            name = std::string(line.substr(4));
            continue;
        }
        text += line;
        if (!in.empty() || std::string_view(reinterpret_cast<const char*>(data), size).ends_with('\n')) text += '\n';
    }
    flush();
    cohort::fuzz::expect_named_errors("journal recovery", [&] {
        const journal::Recovered recovered = journal::recover(dir, [](const std::string&) {});
        (void)recovered.state.snapshot();
    });
    return 0;
}
