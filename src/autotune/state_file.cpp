// Reading and writing the autotuner's state file.
#include "autotune/state_file.hpp"

#include "core/json_fields.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <system_error>

namespace cohort::autotune {
namespace {

constexpr std::string_view kFormat = "cohort-autotune 1";

}  // namespace

std::variant<std::monostate, SavedState, std::string> load_state(const std::filesystem::path& path,
                                                                 const std::string& job, int ranks) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return std::monostate{};
    std::ifstream in(path, std::ios::binary);
    if (!in) return fmt::format("state file {} cannot be read", path.string());
    std::stringstream text;
    text << in.rdbuf();
    const std::string where = fmt::format("state file {}", path.string());
    try {
        boost::system::error_code jec;
        const boost::json::value doc = boost::json::parse(text.str(), jec);
        if (jec) return fmt::format("{} is damaged: not JSON ({})", where, jec.message());
        detail::FieldReader r(doc, where, Errc::parse);
        r.allow({"format", "job", "ranks", "search", "frozen", "step", "throughput", "values", "saved_at"});
        if (r.string("format") != kFormat)
            return fmt::format("{} is damaged: format '{}', expected '{}'", where, r.string("format"), kFormat);
        SavedState s;
        s.job = r.string("job");
        if (s.job != job) return fmt::format("{} belongs to job '{}', not '{}'", where, s.job, job);
        s.ranks = static_cast<int>(r.uint("ranks"));
        if (s.ranks != ranks)
            return fmt::format("{} was tuned with {} ranks, this job has {}", where, s.ranks, ranks);
        s.search = r.string_or("search", "");
        s.frozen = r.boolean("frozen");
        s.step = static_cast<int64_t>(r.uint_or("step", 0));
        s.throughput = r.number_or("throughput", 0);
        for (const auto& [name, value] : r.object("values")) {
            const double v = detail::json_number(value, fmt::format("{}: values.{}", where, std::string(name)),
                                                 Errc::parse);
            if (!std::isfinite(v)) return fmt::format("{} is damaged: values.{} is not finite", where, std::string(name));
            s.values[std::string(name)] = v;
        }
        return s;
    } catch (const Error& e) {
        return fmt::format("{} is damaged: {}", where, e.what());
    } catch (const std::exception& e) {
        return fmt::format("{} is damaged: {}", where, e.what());
    }
}

std::optional<std::string> save_state(const std::filesystem::path& path, const SavedState& s) {
    boost::json::object values;
    for (const auto& [name, v] : s.values) values[name] = v;
    boost::json::object o{{"format", kFormat},       {"job", s.job},     {"ranks", s.ranks},
                          {"search", s.search},      {"frozen", s.frozen}, {"step", s.step},
                          {"throughput", s.throughput}, {"values", std::move(values)}};
    std::error_code ec;
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) return fmt::format("cannot create {}: {}", path.parent_path().string(), ec.message());
    const auto tmp = path.string() + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out << boost::json::serialize(o) << "\n";
        out.flush();
        if (!out) return fmt::format("cannot write {}", tmp);
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) return fmt::format("cannot rename {} to {}: {}", tmp, path.string(), ec.message());
    return std::nullopt;
}

}  // namespace cohort::autotune
