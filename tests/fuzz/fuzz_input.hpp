// What every harness does with libFuzzer's bytes: takes them apart piece by
// piece (a selector byte, a line, the rest), and turns an escaped exception
// that is not cohort::Error into a crash, since the library promises a
// named error for bad input.
#pragma once

#include <cohort/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>

#include <unistd.h>

namespace cohort::fuzz {

class Input {
public:
    Input(const uint8_t* data, std::size_t size) : rest_(reinterpret_cast<const char*>(data), size) {}

    bool empty() const { return rest_.empty(); }
    std::string_view rest() const { return rest_; }
    // The next byte, or 0 once the input is used up.
    uint8_t byte() {
        if (rest_.empty()) return 0;
        const auto b = static_cast<uint8_t>(rest_.front());
        rest_.remove_prefix(1);
        return b;
    }
    // Up to the next '\n' (not included), or the rest.
    std::string_view line() { return until('\n'); }
    std::string_view until(char end) {
        const std::size_t at = rest_.find(end);
        const std::string_view piece = rest_.substr(0, at);
        rest_.remove_prefix(at == std::string_view::npos ? rest_.size() : at + 1);
        return piece;
    }
    std::string_view take(std::size_t n) {
        const std::string_view piece = rest_.substr(0, n);
        rest_.remove_prefix(piece.size());
        return piece;
    }

private:
    std::string_view rest_;
};

// Runs `f`; cohort::Error is the expected answer to bad input, anything
// else escaping is a defect.
template <class F>
void expect_named_errors(const char* what, F&& f) {
    try {
        f();
    } catch (const Error&) {
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: an exception other than cohort::Error escaped: %s\n", what, e.what());
        std::abort();
    }
}

[[noreturn]] inline void defect(const char* what, std::string_view detail) {
    std::fprintf(stderr, "%s: %.*s\n", what, static_cast<int>(detail.size()), detail.data());
    std::abort();
}

// A directory of this process's own, for harnesses whose parser reads
// files: in /dev/shm where there is one, since recovery fsyncs.
inline const std::filesystem::path& scratch_directory() {
    static const std::filesystem::path dir = [] {
        std::error_code ec;
        const std::filesystem::path base =
            std::filesystem::is_directory("/dev/shm", ec) ? "/dev/shm" : std::filesystem::temp_directory_path();
        auto d = base / ("cohort-fuzz-" + std::to_string(::getpid()));
        std::filesystem::create_directories(d);
        std::atexit([] {
            std::error_code ignored;
            std::filesystem::remove_all(scratch_directory(), ignored);
        });
        return d;
    }();
    return dir;
}

}  // namespace cohort::fuzz
