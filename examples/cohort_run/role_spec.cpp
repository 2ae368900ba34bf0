#include "role_spec.hpp"

#include <cohort/error.hpp>
#include <cohort/role_group.hpp>

#include <charconv>

#include <fmt/format.h>

namespace cohort_run {

using cohort::Errc;
using cohort::Error;

std::vector<std::string> split_command(std::string_view text, std::string_view where) {
    std::vector<std::string> words;
    std::string word;
    bool in_word = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == ' ' || c == '\t' || c == '\n') {
            if (in_word) words.push_back(std::move(word));
            word.clear();
            in_word = false;
        } else if (c == '\'') {
            const std::size_t end = text.find('\'', i + 1);
            if (end == std::string_view::npos)
                throw Error(Errc::invalid_argument, fmt::format("{}: a ' at offset {} is never closed", where, i));
            word.append(text.substr(i + 1, end - i - 1));
            in_word = true;
            i = end;
        } else if (c == '"') {
            std::size_t j = i + 1;
            for (; j < text.size() && text[j] != '"'; ++j) {
                if (text[j] == '\\' && j + 1 < text.size() && (text[j + 1] == '"' || text[j + 1] == '\\')) ++j;
                word.push_back(text[j]);
            }
            if (j >= text.size())
                throw Error(Errc::invalid_argument, fmt::format("{}: a \" at offset {} is never closed", where, i));
            in_word = true;
            i = j;
        } else if (c == '\\') {
            if (i + 1 >= text.size())
                throw Error(Errc::invalid_argument, fmt::format("{}: a \\ ends the command", where));
            word.push_back(text[++i]);
            in_word = true;
        } else {
            word.push_back(c);
            in_word = true;
        }
    }
    if (in_word) words.push_back(std::move(word));
    return words;
}

std::string place_name(std::string_view node, std::string_view role, int local_rank) {
    if (cohort::is_default_role(role)) return fmt::format("{}-{}", node, local_rank);
    return fmt::format("{}-{}-{}", node, role, local_rank);
}

RoleSpec parse_role_spec(std::string_view text) {
    const std::string where = fmt::format("--role '{}'", text);
    RoleSpec spec;
    const std::size_t colon = text.find(':');
    spec.name = std::string(text.substr(0, colon));
    try {
        cohort::check_role_name(spec.name, where);
    } catch (const Error& e) {
        throw Error(Errc::invalid_argument, fmt::format("{} (say NAME, NAME:NPROC or NAME:NPROC:COMMAND)", e.what()));
    }
    if (colon == std::string_view::npos) return spec;
    const std::string_view rest = text.substr(colon + 1);
    const std::size_t second = rest.find(':');
    const std::string_view count = rest.substr(0, second);
    const auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), spec.nproc);
    if (ec != std::errc() || end != count.data() + count.size() || spec.nproc < 1 || spec.nproc > 1024) {
        throw Error(Errc::invalid_argument,
                    fmt::format("{}: '{}' is not a number of workers from 1 to 1024 (say NAME:NPROC or "
                                "NAME:NPROC:COMMAND)",
                                where, count));
    }
    if (second == std::string_view::npos) return spec;
    spec.command = split_command(rest.substr(second + 1), where);
    if (spec.command.empty()) {
        throw Error(Errc::invalid_argument,
                    fmt::format("{}: the command after NAME:NPROC: is empty (leave out the last ':' to run the "
                                "program after '--')",
                                where));
    }
    return spec;
}

}  // namespace cohort_run
