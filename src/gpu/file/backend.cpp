// The simulated backend: GPUs and a timeline read from a YAML or JSON file
// (docs/gpu.md), for tests, demos and CI machines without GPUs.
#include "config/document.hpp"
#include "core/hash.hpp"
#include "core/text.hpp"
#include "gpu/file/timeline.hpp"

#include <cohort/error.hpp>
#include <cohort/gpu_probe.hpp>

#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <thread>

#include <fmt/format.h>

namespace cohort {

namespace detail {

namespace {

constexpr uint64_t kMaxIndex = std::numeric_limits<uint32_t>::max();

// How a numeric field is written and checked.
enum class Unit { bytes, percent, celsius, watts, mhz, count };

Unit unit_of(SimField f) {
    switch (f) {
        case SimField::memory_total:
        case SimField::memory_used: return Unit::bytes;
        case SimField::utilization:
        case SimField::memory_busy:
        case SimField::fan: return Unit::percent;
        case SimField::temperature: return Unit::celsius;
        case SimField::power_draw:
        case SimField::power_limit: return Unit::watts;
        case SimField::sm_clock:
        case SimField::memory_clock: return Unit::mhz;
        case SimField::ecc_corrected:
        case SimField::ecc_uncorrected: return Unit::count;
    }
    return Unit::count;
}

std::optional<SimField> sim_field(std::string_view name) {
    for (std::size_t i = 0; i < kSimFieldCount; ++i) {
        if (sim_field_name(static_cast<SimField>(i)) == name) return static_cast<SimField>(i);
    }
    return std::nullopt;
}

std::optional<FieldState> state_word(const Field& field) {
    if (!field.node().IsScalar()) return std::nullopt;
    if (field.node().Scalar() == "not_supported") return FieldState::not_supported;
    if (field.node().Scalar() == "not_available") return FieldState::not_available;
    return std::nullopt;
}

double finite_double(const Field& field) {
    const double v = field.as_double();
    if (!std::isfinite(v)) field.fail(fmt::format("expected a finite number, got '{}'", field.node().Scalar()));
    return v;
}

// A value, or the word not_supported / not_available.
SimValue read_value(const Field& field, SimField f) {
    if (auto state = state_word(field)) return {*state, 0};
    double v = 0;
    switch (unit_of(f)) {
        case Unit::bytes: v = static_cast<double>(field.as_size()); break;
        case Unit::percent:
            v = finite_double(field);
            if (v < 0 || v > 100) field.fail(fmt::format("expected a percentage from 0 to 100, got {}", v));
            break;
        case Unit::celsius: v = finite_double(field); break;
        case Unit::watts:
            v = finite_double(field);
            if (v < 0) field.fail(fmt::format("must not be negative, got {}", v));
            break;
        case Unit::mhz: v = static_cast<double>(field.as_uint(std::numeric_limits<uint32_t>::max())); break;
        case Unit::count: v = static_cast<double>(field.as_uint(std::numeric_limits<uint64_t>::max())); break;
    }
    return {FieldState::ok, v};
}

Reading<uint64_t> read_size_reading(const Field& field) {
    if (auto state = state_word(field)) return {*state, 0};
    return Reading<uint64_t>::of(field.as_size());
}

bool read_bool(const Field& field) {
    if (field.node().IsScalar() && field.node().Scalar() == "true") return true;
    if (field.node().IsScalar() && field.node().Scalar() == "false") return false;
    field.fail("expected true or false");
}

double read_duration(const Field& field) {
    if (field.node().IsScalar()) {
        if (auto seconds = parse_duration(field.node().Scalar())) return *seconds;
    }
    field.fail("expected a duration such as 30s, 1.5s or 1m30s");
}

// Real-looking but made up, and the same for the same index in every run.
std::string made_up_uuid(std::string_view prefix, uint64_t a, uint64_t b = 0) {
    const uint64_t hi = hash_combine(hash_string(prefix), hash_combine(a, b));
    const uint64_t lo = mix64(hi ^ 0x5a1cULL);
    return fmt::format("{}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", prefix, hi >> 32, (hi >> 16) & 0xffff, hi & 0xffff,
                       lo >> 48, lo & 0xffffffffffffULL);
}

std::vector<GpuProcess> read_processes(const Field& field) {
    std::vector<GpuProcess> out;
    for (const Field& item : field.items()) {
        item.expect_map({"pid", "name", "memory"});
        GpuProcess p;
        auto pid = item.get("pid");
        if (!pid) item.fail("missing required field 'pid'");
        p.pid = static_cast<uint32_t>(pid->as_uint(std::numeric_limits<uint32_t>::max()));
        if (auto name = item.get("name")) p.name = name->as_string();
        if (auto memory = item.get("memory")) p.memory_bytes = read_size_reading(*memory);
        out.push_back(std::move(p));
    }
    return out;
}

void read_mig(const Field& field, GpuReading& gpu) {
    if (auto state = state_word(field)) {
        gpu.mig_enabled = {*state, false};
        return;
    }
    field.expect_map({"enabled", "instances"});
    auto enabled = field.get("enabled");
    if (!enabled) field.fail("missing required field 'enabled'");
    gpu.mig_enabled = Reading<bool>::of(read_bool(*enabled));
    auto instances = field.get("instances");
    if (!instances) return;
    if (!gpu.mig_enabled.value) instances->fail("MIG instances need enabled: true");
    for (const Field& item : instances->items()) {
        item.expect_map({"gpu_instance", "compute_instance", "uuid", "memory_total", "memory_used"});
        MigInstance m;
        if (auto f = item.get("gpu_instance")) m.gpu_instance = static_cast<uint32_t>(f->as_uint(kMaxIndex));
        if (auto f = item.get("compute_instance")) m.compute_instance = static_cast<uint32_t>(f->as_uint(kMaxIndex));
        m.uuid = made_up_uuid("MIG", gpu.index, (uint64_t{m.gpu_instance} << 32) | m.compute_instance);
        if (auto f = item.get("uuid")) m.uuid = f->as_string();
        if (auto f = item.get("memory_total")) m.memory_total_bytes = read_size_reading(*f);
        if (auto f = item.get("memory_used")) m.memory_used_bytes = read_size_reading(*f);
        gpu.mig_instances.push_back(std::move(m));
    }
}

SimGpu read_gpu(const Field& field, std::size_t position) {
    field.expect_map({"index", "uuid", "name", "pci_bus_id", "memory_total", "memory_used", "utilization",
                      "memory_busy", "temperature", "power_draw", "power_limit", "sm_clock", "memory_clock", "fan",
                      "ecc_corrected", "ecc_uncorrected", "mig", "processes"});
    SimGpu gpu;
    GpuReading& id = gpu.identity;
    id.index = static_cast<uint32_t>(position);
    if (auto f = field.get("index")) id.index = static_cast<uint32_t>(f->as_uint(kMaxIndex));
    id.name = "Simulated GPU";
    if (auto f = field.get("name")) id.name = f->as_string();
    id.uuid = made_up_uuid("GPU", id.index);
    if (auto f = field.get("uuid")) id.uuid = f->as_string();
    id.pci_bus_id = fmt::format("{:08X}:{:02X}:00.0", id.index >> 8, id.index & 0xff);
    if (auto f = field.get("pci_bus_id")) id.pci_bus_id = f->as_string();
    // Fields a file leaves out are ones this simulated GPU cannot report.
    for (std::size_t i = 0; i < kSimFieldCount; ++i) {
        if (auto f = field.get(sim_field_name(static_cast<SimField>(i))))
            gpu.values[i] = read_value(*f, static_cast<SimField>(i));
    }
    const SimValue& total = gpu.values[static_cast<std::size_t>(SimField::memory_total)];
    const SimValue& used = gpu.values[static_cast<std::size_t>(SimField::memory_used)];
    if (total.state == FieldState::ok && used.state == FieldState::ok && used.value > total.value) {
        field.get("memory_used")->fail(fmt::format("{} is more than memory_total ({})",
                                                   format_size(static_cast<uint64_t>(used.value)),
                                                   format_size(static_cast<uint64_t>(total.value))));
    }
    id.mig_enabled = Reading<bool>::unsupported();
    if (auto f = field.get("mig")) read_mig(*f, id);
    // No list means no processes running, not an unknown list.
    id.processes_state = FieldState::ok;
    if (auto f = field.get("processes")) {
        if (auto state = state_word(*f)) id.processes_state = *state;
        else id.processes = read_processes(*f);
    }
    return gpu;
}

std::string seconds_text(double s) { return fmt::format("{:g}s", s); }

std::string gpu_list(const std::vector<SimGpu>& gpus) {
    if (gpus.empty()) return "the file has no GPUs";
    std::string out = "GPUs:";
    for (std::size_t i = 0; i < gpus.size(); ++i)
        out += fmt::format("{}{}", i == 0 ? " " : ", ", gpus[i].identity.index);
    return out;
}

TimelineStep read_step(const Field& field, const std::vector<SimGpu>& gpus, std::optional<double> previous) {
    using Kind = TimelineStep::Kind;
    field.expect_map({"at", "gpu", "set", "ramp", "over", "xid", "detail", "hang", "fail", "recover"});
    TimelineStep step;
    auto at = field.get("at");
    if (!at) field.fail("missing required field 'at'");
    step.at = read_duration(*at);
    if (previous && step.at < *previous) {
        at->fail(fmt::format("{} is before the previous step's {} (steps must be in time order)",
                             seconds_text(step.at), seconds_text(*previous)));
    }
    static constexpr std::pair<std::string_view, Kind> kActions[] = {
        {"set", Kind::set},   {"ramp", Kind::ramp}, {"xid", Kind::xid},
        {"hang", Kind::hang}, {"fail", Kind::fail}, {"recover", Kind::recover}};
    std::optional<Field> action;
    std::string_view action_name;
    for (const auto& [name, kind] : kActions) {
        auto f = field.get(name);
        if (!f) continue;
        if (action) {
            f->fail(fmt::format("a step does one thing: '{}' and '{}' need steps of their own", action_name, name));
        }
        action = f;
        action_name = name;
        step.kind = kind;
    }
    if (!action) field.fail("expected one of set, ramp, xid, hang, fail or recover");

    const bool per_gpu = step.kind == Kind::set || step.kind == Kind::ramp || step.kind == Kind::xid;
    auto gpu = field.get("gpu");
    if (per_gpu && !gpu) field.fail(fmt::format("missing required field 'gpu' (which GPU to {})", action_name));
    if (!per_gpu && gpu) gpu->fail(fmt::format("'{}' applies to the whole backend, not to one GPU", action_name));
    if (gpu) {
        const uint64_t index = gpu->as_uint(kMaxIndex);
        auto it = std::find_if(gpus.begin(), gpus.end(), [&](const SimGpu& g) { return g.identity.index == index; });
        if (it == gpus.end()) gpu->fail(fmt::format("no GPU {} ({})", index, gpu_list(gpus)));
        step.gpu = static_cast<std::size_t>(it - gpus.begin());
    }
    auto over = field.get("over");
    if (step.kind == Kind::ramp && !over) field.fail("missing required field 'over' (how long the ramp takes)");
    if (step.kind != Kind::ramp && over) over->fail("'over' belongs to a ramp");
    auto detail = field.get("detail");
    if (step.kind != Kind::xid && detail) detail->fail("'detail' belongs to an xid");

    switch (step.kind) {
        case Kind::set:
            action->expect_map({"memory_total", "memory_used", "utilization", "memory_busy", "temperature",
                                "power_draw", "power_limit", "sm_clock", "memory_clock", "fan", "ecc_corrected",
                                "ecc_uncorrected", "processes"});
            for (const auto& entry : action->node()) {
                const std::string name = entry.first.Scalar();
                const Field value = *action->get(name);
                if (name == "processes") {
                    step.sets_processes = true;
                    if (auto state = state_word(value)) step.processes_state = *state;
                    else step.processes = read_processes(value);
                } else {
                    step.values.emplace_back(*sim_field(name), read_value(value, *sim_field(name)));
                }
            }
            if (step.values.empty() && !step.sets_processes) action->fail("nothing to set");
            break;
        case Kind::ramp:
            action->expect_map({"memory_total", "memory_used", "utilization", "memory_busy", "temperature",
                                "power_draw", "power_limit", "sm_clock", "memory_clock", "fan", "ecc_corrected",
                                "ecc_uncorrected"});
            for (const auto& entry : action->node()) {
                const std::string name = entry.first.Scalar();
                const Field value = *action->get(name);
                if (state_word(value)) value.fail("a ramp needs a target value, not a state");
                step.values.emplace_back(*sim_field(name), read_value(value, *sim_field(name)));
            }
            if (step.values.empty()) action->fail("nothing to ramp");
            step.over = read_duration(*over);
            break;
        case Kind::xid:
            step.xid = action->as_uint(std::numeric_limits<uint64_t>::max());
            if (detail) step.detail = detail->as_string();
            break;
        case Kind::hang: step.hang_seconds = read_duration(*action); break;
        case Kind::fail: step.message = action->as_string(); break;
        case Kind::recover:
            if (!read_bool(*action)) action->fail("expected true (recover: true ends a fail step)");
            break;
    }
    return step;
}

}  // namespace

Simulation read_simulation(std::string_view text, Format format, const std::string& source) {
    const Document document(text, format, source);
    const Field root = document.root();
    if (root.is_null()) root.fail("empty document: expected a mapping with a 'gpus' list");
    root.expect_map({"version", "gpus", "timeline"});
    if (auto version = root.get("version")) {
        const uint64_t v = version->as_uint(kMaxIndex);
        if (v != 1) version->fail(fmt::format("unsupported version {} (this cohort reads version 1)", v));
    }
    auto gpus = root.get("gpus");
    if (!gpus) root.fail("missing required field 'gpus'");
    Simulation sim;
    const auto items = gpus->items();
    for (std::size_t i = 0; i < items.size(); ++i) {
        SimGpu gpu = read_gpu(items[i], i);
        for (std::size_t j = 0; j < sim.gpus.size(); ++j) {
            if (sim.gpus[j].identity.index == gpu.identity.index) {
                auto where = items[i].get("index") ? *items[i].get("index") : items[i];
                where.fail(fmt::format("duplicate GPU index {} (also {}[{}])", gpu.identity.index, gpus->path(), j));
            }
        }
        sim.gpus.push_back(std::move(gpu));
    }
    if (auto timeline = root.get("timeline")) {
        std::optional<double> previous;
        for (const Field& item : timeline->items()) {
            sim.timeline.push_back(read_step(item, sim.gpus, previous));
            previous = sim.timeline.back().at;
        }
    }
    return sim;
}

}  // namespace detail

namespace {

// Reads are serialised: a hang step blocks the read that meets it, and the
// next read waits behind it as it would behind a stuck driver.
class SimulatedBackend final : public GpuBackend {
public:
    SimulatedBackend(detail::Simulation sim, std::string name, std::function<double()> clock)
        : sim_(std::move(sim)), name_(std::move(name)), clock_(std::move(clock)), start_(now()),
          done_(sim_.timeline.size(), false) {}

    std::string name() const override { return name_; }

    std::vector<GpuReading> read(double /*deadline_seconds*/) override {
        using Kind = detail::TimelineStep::Kind;
        std::lock_guard lock(mutex_);
        double t = now() - start_;
        // Ignores the deadline on purpose: a hang step stands for a driver
        // that does not answer, which is what the probe must survive.
        double hang = 0;
        for (std::size_t i = 0; i < sim_.timeline.size() && sim_.timeline[i].at <= t; ++i) {
            if (sim_.timeline[i].kind == Kind::hang && !done_[i]) {
                done_[i] = true;
                hang += sim_.timeline[i].hang_seconds;
            }
        }
        if (hang > 0) {
            std::this_thread::sleep_for(std::chrono::duration<double>(hang));
            t = now() - start_;
        }
        if (auto failure = sim_.failure_at(t)) throw Error(Errc::unavailable, *failure);
        std::vector<GpuReading> readings = sim_.readings_at(t);
        // Each Xid reaches exactly one successful read: the first at or after it.
        for (std::size_t i = 0; i < sim_.timeline.size() && sim_.timeline[i].at <= t; ++i) {
            const auto& step = sim_.timeline[i];
            if (step.kind != Kind::xid || done_[i]) continue;
            done_[i] = true;
            readings[step.gpu].xid_events.push_back(XidEvent{step.xid, start_ + step.at, step.detail});
        }
        return readings;
    }

private:
    double now() const {
        if (clock_) return clock_();
        return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    }

    std::mutex mutex_;
    const detail::Simulation sim_;
    const std::string name_;
    const std::function<double()> clock_;
    const double start_;
    std::vector<bool> done_;  // per step: a hang has blocked, an Xid has been delivered
};

}  // namespace

std::unique_ptr<GpuBackend> open_simulated_backend(const std::filesystem::path& path, const ProbeOptions& options) {
    const std::string text = detail::read_text_file(path);
    detail::Simulation sim =
        detail::read_simulation(text, detail::format_from_extension(path, Format::automatic), path.string());
    return std::make_unique<SimulatedBackend>(std::move(sim), "file:" + path.string(), options.clock);
}

}  // namespace cohort
