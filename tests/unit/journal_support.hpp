// Helpers shared by the data-directory tests (coordinator_journal_test,
// coordinator_snapshot_parts_test): a scratch directory, errors and
// warnings caught, files read and written whole.
#pragma once

#include "coordinator/state/state.hpp"
#include "core/json_text.hpp"

#include <cohort/error.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace cohort::coord::testing {

class TempDir {
public:
    TempDir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "cohort-journal-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        path_ = pattern;
    }
    ~TempDir() { std::filesystem::remove_all(path_); }
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

// The message of the Error(code) that f throws.
template <class F>
std::string error_of(F&& f, Errc code) {
    try {
        f();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), code) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "expected an error";
    return {};
}

inline std::function<void(std::string)> collect(std::vector<std::string>& out) {
    return [&out](std::string message) { out.push_back(std::move(message)); };
}

inline std::string text_of(const CoordinatorState& state) {
    return detail::to_text(state.snapshot());
}

inline std::string read(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

inline void write(const std::filesystem::path& file, const std::string& text) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
}

}  // namespace cohort::coord::testing
