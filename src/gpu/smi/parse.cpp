// nvidia-smi output, field by field: a CSV reader that honours quotes, and
// per-field parsers that keep "[N/A]", "[Not Supported]" and bad numbers
// apart from real values.
#include "gpu/smi/parse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

namespace cohort::detail::smi {
namespace {

constexpr uint64_t MiB = uint64_t{1} << 20;

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    return s;
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

// The state a placeholder stands for, or ok when `text` is not one.
// nvidia-smi brackets them; some old drivers did not.
FieldState placeholder(std::string_view text, std::string& problem) {
    std::string_view inner = text;
    const bool bracketed = text.size() >= 2 && text.front() == '[' && text.back() == ']';
    if (bracketed) inner = trim(text.substr(1, text.size() - 2));
    if (iequals(inner, "N/A")) return FieldState::not_available;
    if (iequals(inner, "Not Supported")) return FieldState::not_supported;
    if (bracketed) {
        // "[Unknown Error]", "[GPU is lost]", "[Insufficient Permissions]":
        // the value exists but could not be read this time.
        problem = std::string(inner);
        return FieldState::not_available;
    }
    return FieldState::ok;
}

// The number at the front of `text` and the unit after it, which must be
// empty or one of `units` (case-insensitive). from_chars, not strtod: it
// ignores the locale, which would otherwise read "71.23" as 71 in de_DE.
template <typename T>
bool number_with_unit(std::string_view text, std::initializer_list<std::string_view> units, T& value,
                      std::string_view& unit) {
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc() || ptr == text.data()) return false;
    unit = trim(std::string_view(ptr, static_cast<std::size_t>(end - ptr)));
    if (unit.empty()) return true;
    return std::any_of(units.begin(), units.end(), [&](std::string_view u) { return iequals(unit, u); });
}

template <typename T>
Reading<T> malformed(std::string_view text, std::string& problem) {
    problem = text.empty() ? std::string("empty, expected a number") : fmt::format("'{}' is not a number", text);
    return {};
}

std::string quoted_line(std::string_view line) {
    line = trim(line);
    return line.size() > 120 ? std::string(line.substr(0, 120)) + "..." : std::string(line);
}

// Each line of `output` that is not blank, with its 1-based number.
template <typename F>
void for_each_line(std::string_view output, F&& f) {
    std::size_t pos = 0;
    for (int number = 1; pos < output.size(); ++number) {
        std::size_t end = output.find('\n', pos);
        if (end == std::string_view::npos) end = output.size();
        const std::string_view line = output.substr(pos, end - pos);
        pos = end + 1;
        if (!trim(line).empty()) f(number, line);
    }
}

}  // namespace

std::vector<std::string> split_csv_line(std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::vector<std::string> fields;
    std::string field;
    bool quoted = false;      // inside quotes now
    bool had_quotes = false;  // this field was quoted: keep its inner spaces
    std::size_t i = 0;
    auto finish = [&] {
        fields.push_back(had_quotes ? field : std::string(trim(field)));
        field.clear();
        had_quotes = false;
    };
    for (; i < line.size(); ++i) {
        const char c = line[i];
        if (quoted) {
            if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
                field += '"';
                ++i;
            } else if (c == '"') {
                quoted = false;
            } else {
                field += c;
            }
        } else if (c == '"' && trim(field).empty()) {
            // Opening quote: spaces before it are padding, not content.
            field.clear();
            quoted = had_quotes = true;
        } else if (c == ',') {
            finish();
        } else if (!(had_quotes && (c == ' ' || c == '\t'))) {
            field += c;  // spaces after a closing quote are padding too
        }
    }
    finish();
    return fields;
}

Reading<uint64_t> parse_mib_as_bytes(std::string_view text, std::string& problem) {
    text = trim(text);
    if (const auto state = placeholder(text, problem); state != FieldState::ok) return {state, 0};
    // Whole MiB as printed; a fraction is accepted and rounded to bytes.
    // "MB" is what drivers before R304 printed for MiB.
    double mib = 0;
    std::string_view unit;
    if (!number_with_unit(text, {"MiB", "MB"}, mib, unit) || !std::isfinite(mib) || mib < 0 ||
        mib >= static_cast<double>(std::numeric_limits<uint64_t>::max() / MiB))
        return malformed<uint64_t>(text, problem);
    return Reading<uint64_t>::of(static_cast<uint64_t>(std::llround(mib * static_cast<double>(MiB))));
}

Reading<double> parse_decimal(std::string_view text, std::string_view unit_name, std::string& problem) {
    text = trim(text);
    if (const auto state = placeholder(text, problem); state != FieldState::ok) return {state, 0};
    double value = 0;
    std::string_view unit;
    if (!number_with_unit(text, {unit_name}, value, unit) || !std::isfinite(value) || value < 0)
        return malformed<double>(text, problem);
    return Reading<double>::of(value);
}

Reading<uint32_t> parse_mhz(std::string_view text, std::string& problem) {
    text = trim(text);
    if (const auto state = placeholder(text, problem); state != FieldState::ok) return {state, 0};
    uint32_t value = 0;
    std::string_view unit;
    if (!number_with_unit(text, {"MHz"}, value, unit)) return malformed<uint32_t>(text, problem);
    return Reading<uint32_t>::of(value);
}

Reading<uint64_t> parse_count(std::string_view text, std::string& problem) {
    text = trim(text);
    if (const auto state = placeholder(text, problem); state != FieldState::ok) return {state, 0};
    uint64_t value = 0;
    std::string_view unit;
    if (!number_with_unit(text, {}, value, unit)) return malformed<uint64_t>(text, problem);
    return Reading<uint64_t>::of(value);
}

Reading<bool> parse_enabled(std::string_view text, std::string& problem) {
    text = trim(text);
    if (const auto state = placeholder(text, problem); state != FieldState::ok) return {state, false};
    if (iequals(text, "Enabled")) return Reading<bool>::of(true);
    if (iequals(text, "Disabled")) return Reading<bool>::of(false);
    problem = fmt::format("'{}' is neither Enabled nor Disabled", text);
    return {};
}

GpuTable parse_gpu_query(std::string_view output) {
    GpuTable table;
    uint32_t ordinal = 0;
    for_each_line(output, [&](int number, std::string_view line) {
        const auto f = split_csv_line(line);
        if (f.size() != gpu_query_field_count) {
            table.warnings.push_back(fmt::format("line {}: expected {} fields, found {}; skipped: {}", number,
                                                 gpu_query_field_count, f.size(), quoted_line(line)));
            return;
        }
        // Every field gets its own problem note, so one bad field does not
        // hide another.
        auto note = [&](std::string_view field, const std::string& problem) {
            if (!problem.empty()) table.warnings.push_back(fmt::format("line {}: {}: {}", number, field, problem));
        };
        std::string problem;
        // The parser (an argument) runs first and fills `problem`.
        auto take = [&](std::string_view field, auto reading) {
            note(field, problem);
            problem.clear();
            return reading;
        };
        auto text = [&](std::string_view field, const std::string& value) {
            if (placeholder(value, problem) == FieldState::ok) return value;
            note(field, problem);
            problem.clear();
            return std::string();
        };
        GpuReading gpu;
        const auto index = parse_count(f[0], problem);
        if (index.ok() && index.value <= std::numeric_limits<uint32_t>::max()) {
            gpu.index = static_cast<uint32_t>(index.value);
        } else {
            // Keep the GPU: its other fields are still good. Its place among
            // the lines is the best guess at its index.
            gpu.index = ordinal;
            note("index", fmt::format("'{}' is not an index; using {}", f[0], ordinal));
        }
        problem.clear();
        gpu.uuid = text("uuid", f[1]);
        gpu.name = text("name", f[2]);
        gpu.pci_bus_id = text("pci.bus_id", f[3]);
        gpu.memory_total_bytes = take("memory.total", parse_mib_as_bytes(f[4], problem));
        gpu.memory_used_bytes = take("memory.used", parse_mib_as_bytes(f[5], problem));
        gpu.memory_free_bytes = take("memory.free", parse_mib_as_bytes(f[6], problem));
        gpu.gpu_utilization_percent = take("utilization.gpu", parse_decimal(f[7], "%", problem));
        // Memory *bandwidth* busy: not the share of memory in use.
        gpu.memory_busy_percent = take("utilization.memory", parse_decimal(f[8], "%", problem));
        gpu.temperature_celsius = take("temperature.gpu", parse_decimal(f[9], "C", problem));
        gpu.power_draw_watts = take("power.draw", parse_decimal(f[10], "W", problem));
        gpu.power_limit_watts = take("power.limit", parse_decimal(f[11], "W", problem));
        gpu.sm_clock_mhz = take("clocks.sm", parse_mhz(f[12], problem));
        gpu.memory_clock_mhz = take("clocks.mem", parse_mhz(f[13], problem));
        gpu.fan_percent = take("fan.speed", parse_decimal(f[14], "%", problem));
        gpu.ecc_corrected_errors = take("ecc.errors.corrected.volatile.total", parse_count(f[15], problem));
        gpu.ecc_uncorrected_errors = take("ecc.errors.uncorrected.volatile.total", parse_count(f[16], problem));
        gpu.mig_enabled = take("mig.mode.current", parse_enabled(f[17], problem));
        table.gpus.push_back(std::move(gpu));
        ++ordinal;
    });
    return table;
}

ProcessTable parse_process_query(std::string_view output) {
    ProcessTable table;
    for_each_line(output, [&](int number, std::string_view line) {
        // Some drivers print this instead of an empty table.
        if (iequals(trim(line), "No running processes found")) return;
        const auto f = split_csv_line(line);
        if (f.size() != process_query_field_count) {
            table.warnings.push_back(fmt::format("line {}: expected {} fields, found {}; skipped: {}", number,
                                                 process_query_field_count, f.size(), quoted_line(line)));
            return;
        }
        std::string problem;
        const auto pid = parse_count(f[1], problem);
        if (!pid.ok() || pid.value == 0 || pid.value > std::numeric_limits<uint32_t>::max()) {
            // A process without a pid cannot be told apart from the next one.
            table.warnings.push_back(fmt::format("line {}: pid '{}' is not a process id; skipped", number, f[1]));
            return;
        }
        ProcessRow row;
        row.gpu_uuid = f[0];
        row.process.pid = static_cast<uint32_t>(pid.value);
        std::string name_problem;
        if (placeholder(f[2], name_problem) == FieldState::ok) row.process.name = f[2];
        problem.clear();
        row.process.memory_bytes = parse_mib_as_bytes(f[3], problem);
        if (!problem.empty()) table.warnings.push_back(fmt::format("line {}: used_memory: {}", number, problem));
        table.rows.push_back(std::move(row));
    });
    return table;
}

namespace {

// The text between `open` and the next `close` after it, if both are there.
std::string_view between(std::string_view s, std::string_view open, char close) {
    const auto start = s.find(open);
    if (start == std::string_view::npos) return {};
    const auto from = start + open.size();
    const auto end = s.find(close, from);
    return end == std::string_view::npos ? std::string_view() : trim(s.substr(from, end - from));
}

// "MIG-GPU-<gpu uuid>/<gi>/<ci>": the ids the old MIG uuids carry.
void read_old_mig_ids(MigInstance& mig) {
    if (mig.uuid.rfind("MIG-GPU-", 0) != 0) return;
    const auto last = mig.uuid.rfind('/');
    const auto first = last == std::string::npos || last == 0 ? std::string::npos : mig.uuid.rfind('/', last - 1);
    if (first == std::string::npos) return;
    uint32_t gi = 0, ci = 0;
    const char* gi_begin = mig.uuid.data() + first + 1;
    const char* ci_begin = mig.uuid.data() + last + 1;
    const char* end = mig.uuid.data() + mig.uuid.size();
    if (std::from_chars(gi_begin, ci_begin - 1, gi).ptr != ci_begin - 1) return;
    if (std::from_chars(ci_begin, end, ci).ptr != end) return;
    mig.gpu_instance = gi;
    mig.compute_instance = ci;
}

}  // namespace

std::vector<ListedGpu> parse_gpu_list(std::string_view output) {
    std::vector<ListedGpu> gpus;
    for_each_line(output, [&](int, std::string_view raw) {
        const std::string_view line = trim(raw);
        if (line.rfind("GPU ", 0) == 0) {
            ListedGpu gpu;
            const auto colon = line.find(':');
            if (colon == std::string_view::npos) return;
            const std::string_view number = trim(line.substr(4, colon - 4));
            if (std::from_chars(number.data(), number.data() + number.size(), gpu.index).ptr !=
                number.data() + number.size())
                return;
            const auto uuid_at = line.rfind("(UUID:");
            gpu.name = std::string(trim(line.substr(
                colon + 1, uuid_at == std::string_view::npos ? std::string_view::npos : uuid_at - colon - 1)));
            gpu.uuid = std::string(between(line, "(UUID:", ')'));
            gpus.push_back(std::move(gpu));
        } else if (line.rfind("MIG ", 0) == 0 && !gpus.empty()) {
            MigInstance mig;
            mig.uuid = std::string(between(line, "(UUID:", ')'));
            if (mig.uuid.empty()) return;
            read_old_mig_ids(mig);
            gpus.back().mig.push_back(std::move(mig));
        }
    });
    return gpus;
}

void attach_processes(std::vector<GpuReading>& gpus, const ProcessTable& table, std::vector<std::string>& warnings) {
    for (auto& gpu : gpus) gpu.processes_state = FieldState::ok;
    for (const auto& row : table.rows) {
        auto owner = std::find_if(gpus.begin(), gpus.end(), [&](const GpuReading& gpu) {
            if (gpu.uuid == row.gpu_uuid) return true;
            return std::any_of(gpu.mig_instances.begin(), gpu.mig_instances.end(),
                               [&](const MigInstance& mig) { return mig.uuid == row.gpu_uuid; });
        });
        if (owner == gpus.end()) {
            warnings.push_back(fmt::format("process {} ({}) is on GPU '{}', which the GPU query did not list",
                                           row.process.pid, row.process.name, row.gpu_uuid));
            continue;
        }
        owner->processes.push_back(row.process);
    }
}

void attach_mig(std::vector<GpuReading>& gpus, const std::vector<ListedGpu>& listed) {
    for (const auto& entry : listed) {
        if (entry.mig.empty()) continue;
        for (auto& gpu : gpus)
            if (!gpu.uuid.empty() && gpu.uuid == entry.uuid) gpu.mig_instances = entry.mig;
    }
}

}  // namespace cohort::detail::smi
