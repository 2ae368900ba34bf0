// Whole-file reads and writes for the example programs, opened with
// close-on-exec (fopen's "e"), which std::ifstream and std::ofstream cannot
// ask for: a program that starts others must not hand them its files.
// Copy it along with the program you start from.
#pragma once

#include <cerrno>
#include <cstdio>
#include <string>

namespace cohort_examples {

// The file's bytes into `text`. Returns 0, or the errno that stopped it.
inline int read_file(const std::string& path, std::string& text) {
    std::FILE* f = std::fopen(path.c_str(), "rbe");
    if (f == nullptr) return errno;
    text.clear();
    char buffer[65536];
    std::size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) text.append(buffer, n);
    const int error = std::ferror(f) ? (errno != 0 ? errno : EIO) : 0;
    std::fclose(f);
    return error;
}

// `text` as the file's whole content (created or truncated). Returns 0, or
// the errno that stopped it.
inline int write_file(const std::string& path, const std::string& text) {
    std::FILE* f = std::fopen(path.c_str(), "wbe");
    if (f == nullptr) return errno;
    int error = std::fwrite(text.data(), 1, text.size(), f) == text.size() ? 0 : (errno != 0 ? errno : EIO);
    if (std::fclose(f) != 0 && error == 0) error = errno != 0 ? errno : EIO;
    return error;
}

}  // namespace cohort_examples
