// GpuMonitor: a sampler thread over a GpuProbe, a bounded history per GPU,
// window statistics, rule-engine variables, and the I/O answers (prefetch
// factor, transfer delay) of the GPU rule pack.
//
// Choices a user can rely on (docs/gpu.md repeats them):
// - A stale sample (the probe did not answer in time, or failed) becomes
//   latest() but is not added to the history: its readings are the last good
//   ones, already there, and counting them again would skew the statistics.
// - stats() covers the window that ends at the latest sample's time, stale or
//   not, so a GPU that stopped answering shows an emptying window.
// - publish() and the rules use the latest sample's readings, stale ones
//   included: the last known state is the best one there is. A value that is
//   not ok is unset, so a rule on it is unknown rather than fed a zero.
// - The rules are answered from the rules in state FIRING, not from those
//   that fired at this evaluation: `cooldown` spaces a rule's firings out,
//   but its state holds as long as its condition does (and keep_firing_for).
#include "gpu/history.hpp"
#include "rules/shipped_pack.hpp"

#include "core/text.hpp"

#include <cohort/error.hpp>
#include <cohort/gpu_monitor.hpp>
#include <cohort/rules.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

namespace cohort {

namespace {

constexpr std::string_view kPackName = "gpu_io.yaml";

Reading<double> metric_of(const GpuReading& gpu, GpuMetric metric) {
    switch (metric) {
        case GpuMetric::memory_used_percent:
            return gpu.memory_used_percent();
        case GpuMetric::memory_busy_percent:
            return gpu.memory_busy_percent;
        case GpuMetric::utilization_percent:
            return gpu.gpu_utilization_percent;
        case GpuMetric::temperature_celsius:
            return gpu.temperature_celsius;
        case GpuMetric::power_watts:
            return gpu.power_draw_watts;
    }
    return {};
}

// The published names: gpu_<suffix> (maximum across GPUs) and
// gpu<N>.<suffix> (GPU N).
struct Published {
    std::string_view suffix;
    GpuMetric metric;
};
constexpr Published kPublished[] = {
    {"memory", GpuMetric::memory_used_percent}, {"memory_busy", GpuMetric::memory_busy_percent},
    {"util", GpuMetric::utilization_percent},   {"temperature", GpuMetric::temperature_celsius},
    {"power", GpuMetric::power_watts},
};

std::optional<GpuMetric> metric_named(std::string_view suffix) {
    for (const Published& p : kPublished)
        if (p.suffix == suffix) return p.metric;
    return std::nullopt;
}

// "gpu_memory" -> every GPU's memory; "gpu3.util" -> GPU 3's util.
struct PublishedName {
    bool every_gpu = true;
    uint32_t gpu = 0;
    GpuMetric metric = GpuMetric::memory_used_percent;
};

std::optional<PublishedName> parse_published(std::string_view name) {
    if (!name.starts_with("gpu")) return std::nullopt;
    name.remove_prefix(3);
    if (name.starts_with('_')) {
        if (auto metric = metric_named(name.substr(1))) return PublishedName{true, 0, *metric};
        return std::nullopt;
    }
    const std::size_t dot = name.find('.');
    if (dot == 0 || dot == std::string_view::npos || dot > 9) return std::nullopt;
    uint32_t index = 0;
    for (char c : name.substr(0, dot)) {
        if (c < '0' || c > '9') return std::nullopt;
        index = index * 10 + static_cast<uint32_t>(c - '0');
    }
    if (auto metric = metric_named(name.substr(dot + 1))) return PublishedName{false, index, *metric};
    return std::nullopt;
}

// The value of one published name: the maximum over the GPUs it covers.
std::optional<double> value_in(const GpuSample* sample, const PublishedName& which) {
    if (sample == nullptr) return std::nullopt;
    std::optional<double> out;
    for (const GpuReading& reading : sample->gpus) {
        if (!which.every_gpu && reading.index != which.gpu) continue;
        if (auto v = metric_of(reading, which.metric).get(); v && (!out || *v > *out)) out = v;
    }
    return out;
}

// Sets every gpu_* / gpuN.* variable the context's symbols know; unknown
// names are never added, values that are not ok are unset.
void publish_sample(const GpuSample* sample, Context& context) {
    const Symbols& symbols = context.symbols();
    for (uint32_t slot = 0; slot < symbols.size(); ++slot) {
        const std::string& name = symbols.name(slot);
        const auto parsed = parse_published(name);
        if (!parsed) continue;
        const std::optional<double> value = value_in(sample, *parsed);
        if (!value) {
            context.unset(name);
            continue;
        }
        const std::optional<Type> declared = symbols.declared(slot);
        if (declared == Type::integer) {
            context.set(slot, static_cast<int64_t>(std::llround(*value)));
        } else if (!declared || declared == Type::number) {
            context.set(slot, *value);
        } else {
            throw Error(Errc::invalid_argument,
                        fmt::format("GpuMonitor::publish: variable '{}' is declared {}, but the monitor publishes "
                                    "it as a number; declare it 'number'",
                                    name, to_string(*declared)));
        }
    }
}

// The shipped pack: docs/rules.md, "Shipped rule packs".
std::filesystem::path find_shipped_pack() {
    return detail::find_shipped_pack(kPackName, "GpuMonitor: the GPU rule pack",
                                     "Set MonitorOptions::rules or COHORT_RULES_DIR");
}

// A delay parameter: seconds as a number, or a duration ("30s", "1m").
std::optional<double> delay_seconds(const Value& value) {
    if (value.type() == Type::integer || value.type() == Type::number) {
        const double d = value.as_number();
        return std::isfinite(d) && d >= 0 ? std::optional<double>(d) : std::nullopt;
    }
    if (value.type() == Type::string) return detail::parse_duration(value.as_string());
    return std::nullopt;
}

std::optional<double> factor_of(const Value& value) {
    if (value.type() != Type::integer && value.type() != Type::number) return std::nullopt;
    const double d = value.as_number();
    return std::isfinite(d) && d >= 0 ? std::optional<double>(d) : std::nullopt;
}

const Value* parameter(const Action& action, std::string_view name) {
    auto it = action.parameters.find(name);
    return it == action.parameters.end() ? nullptr : &it->second;
}

// The pack's reduce_prefetch and delay_transfer actions must carry values the
// monitor can read; a pack that does not is refused when it loads.
void check_io_actions(const RuleSet& set) {
    for (const Rule& rule : set.rules()) {
        for (const Action& action : rule.actions) {
            if (action.type == "reduce_prefetch") {
                const Value* factor = parameter(action, "factor");
                if (factor == nullptr || !factor_of(*factor))
                    throw Error(Errc::parse, fmt::format("{}: rule '{}': a reduce_prefetch action needs a parameter "
                                                         "'factor' that is a number >= 0 (e.g. {{factor: 0.5}})",
                                                         rule.source, rule.id));
            } else if (action.type == "delay_transfer") {
                const Value* delay = parameter(action, "delay");
                if (delay == nullptr || !delay_seconds(*delay))
                    throw Error(Errc::parse, fmt::format("{}: rule '{}': a delay_transfer action needs a parameter "
                                                         "'delay' that is a duration (e.g. {{delay: 30s}})",
                                                         rule.source, rule.id));
            }
        }
    }
}

// The rule pack behind prefetch_factor() and transfer_delay().
struct IoRules {
    // The monitor acts on no action itself, it reports the firing ones; the
    // pack's other action types (prioritize, stage_transfer) are the
    // program's to handle.
    RuleEngine engine{EngineOptions{.allow_unhandled_actions = true}};
    std::optional<Context> context;
    double last_time = -std::numeric_limits<double>::infinity();

    explicit IoRules(const std::filesystem::path& path) {
        RuleSet set = RuleSet::from_file(path);
        check_io_actions(set);
        engine.load(std::move(set));
        context.emplace(engine.context());
    }

    using Transfer = IoTransfer;
    IoAdvice evaluate(const GpuSample& sample, std::optional<Transfer> transfer) {
        Context& ctx = *context;
        ctx.clear();
        publish_sample(&sample, ctx);
        // active_training: known only when the backend lists processes; a
        // GPU running a compute process counts as training.
        if (ctx.symbols().find("active_training")) {
            bool known = false, busy = false;
            for (const GpuReading& gpu : sample.gpus) {
                if (gpu.processes_state != FieldState::ok) continue;
                known = true;
                busy = busy || !gpu.processes.empty();
            }
            if (known) ctx.set("active_training", Value(busy));
        }
        if (transfer) {
            if (ctx.symbols().find("transfer_size"))
                ctx.set("transfer_size", Value(static_cast<int64_t>(std::min<uint64_t>(transfer->bytes, INT64_MAX))));
            if (ctx.symbols().find("file_type")) ctx.set("file_type", Value(std::string(transfer->kind)));
            if (const auto slot = ctx.symbols().find("transfer_priority")) {
                // Declared int or number (a pack may compare it either way).
                if (ctx.symbols().declared(*slot) == Type::number)
                    ctx.set("transfer_priority", Value(static_cast<double>(transfer->priority)));
                else
                    ctx.set("transfer_priority", Value(static_cast<int64_t>(transfer->priority)));
            }
            if (ctx.symbols().find("prefetch")) ctx.set("prefetch", Value(transfer->prefetch));
        }
        // The engine refuses time going backwards; a wall clock may.
        last_time = std::max(last_time, sample.time);
        engine.evaluate(ctx, last_time);

        IoAdvice advice;
        for (uint32_t slot = 0; slot < ctx.symbols().size(); ++slot) {
            const Context::Slot* value = ctx.slot_at(slot);
            if (value == nullptr || !value->present) continue;
            const std::string& name = ctx.symbols().name(slot);
            if (value->type == Type::boolean) advice.values.emplace_back(name, value->b ? 1.0 : 0.0);
            if (value->type == Type::integer) advice.values.emplace_back(name, static_cast<double>(value->i));
            if (value->type == Type::number) advice.values.emplace_back(name, value->d);
        }
        for (const Rule& rule : engine.rules()->rules()) {
            if (!rule.enabled || engine.state(rule.id) != RuleState::firing) continue;
            const auto category = rule.labels.find("category");
            for (const Action& action : rule.actions) {
                IoAction out{rule.id, action.type, category == rule.labels.end() ? "" : category->second};
                if (action.type == "reduce_prefetch") out.factor = *factor_of(*parameter(action, "factor"));
                if (action.type == "delay_transfer") out.delay_seconds = *delay_seconds(*parameter(action, "delay"));
                advice.actions.push_back(std::move(out));
            }
        }
        return advice;
    }
};

}  // namespace

struct GpuMonitor::Impl {
    MonitorOptions options;

    std::mutex probe_mutex;  // one query at a time: the sampler and sample_now()
    GpuProbe probe;

    mutable std::mutex data_mutex;
    std::optional<GpuSample> latest;
    std::map<uint32_t, detail::ReadingHistory> histories;

    std::mutex control_mutex;  // start() and stop()
    std::mutex wake_mutex;
    std::condition_variable wake;
    bool stopping = false;
    std::atomic<bool> running{false};
    std::thread sampler;

    std::mutex rules_mutex;
    std::unique_ptr<IoRules> rules;

    Impl(GpuProbe p, MonitorOptions o) : options(std::move(o)), probe(std::move(p)) {}

    GpuSample take() {
        // Held until the sample is kept, so that the history is in the order
        // the samples were taken even when sample_now() races the sampler.
        std::lock_guard query(probe_mutex);
        GpuSample sample = probe.sample();
        std::lock_guard lock(data_mutex);
        if (!sample.stale) {
            for (const GpuReading& gpu : sample.gpus) {
                auto it = histories.try_emplace(gpu.index, options.history).first;
                it->second.push(sample.time, gpu);
            }
        }
        latest = sample;
        return sample;
    }

    void run() {
        const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(options.interval_seconds));
        auto next = std::chrono::steady_clock::now();
        std::unique_lock lock(wake_mutex);
        while (!stopping) {
            lock.unlock();
            try {
                take();
            } catch (...) {
                // GpuProbe reports failures in the sample; anything else
                // (out of memory) must not end the process from this thread.
            }
            lock.lock();
            // Keep the schedule; after a slow sample, start again from now
            // rather than firing a burst to catch up.
            next += interval;
            if (const auto now = std::chrono::steady_clock::now(); next < now) next = now;
            wake.wait_until(lock, next, [&] { return stopping; });
        }
    }

    IoRules& io_rules() {
        if (!rules) rules = std::make_unique<IoRules>(options.rules.empty() ? find_shipped_pack() : options.rules);
        return *rules;
    }

    // Before the first sample, one is taken now (bounded by the deadline).
    IoAdvice answer(std::optional<IoRules::Transfer> transfer) {
        std::optional<GpuSample> sample;
        {
            std::lock_guard lock(data_mutex);
            sample = latest;
        }
        if (!sample) sample = take();
        std::lock_guard lock(rules_mutex);
        return io_rules().evaluate(*sample, transfer);
    }
};

GpuMonitor::GpuMonitor(GpuProbe probe, MonitorOptions options) {
    // At most a day, as the probe's deadline: steady_clock maths past that
    // risks overflow, and a longer interval is a mistake.
    if (!(options.interval_seconds > 0) || !(options.interval_seconds <= 86400))
        throw Error(Errc::invalid_argument,
                    fmt::format("GpuMonitor: interval_seconds must be more than 0 and at most 86400 (a day), got {}",
                                options.interval_seconds));
    if (options.history == 0)
        throw Error(Errc::invalid_argument, "GpuMonitor: history must keep at least 1 sample per GPU, got 0");
    impl_ = std::make_unique<Impl>(std::move(probe), std::move(options));
    // A pack the caller named is checked now; the shipped one on first use,
    // so a monitor that only keeps history never needs it.
    if (!impl_->options.rules.empty()) impl_->io_rules();
}

GpuMonitor::~GpuMonitor() {
    stop();
}

void GpuMonitor::start() {
    std::lock_guard control(impl_->control_mutex);
    if (impl_->sampler.joinable()) return;
    {
        std::lock_guard lock(impl_->wake_mutex);
        impl_->stopping = false;
    }
    impl_->sampler = std::thread([impl = impl_.get()] { impl->run(); });
    impl_->running = true;
}

// Prompt: the sampler sleeps on a condition variable, and a query in flight
// returns within the probe's deadline.
void GpuMonitor::stop() {
    std::lock_guard control(impl_->control_mutex);
    if (!impl_->sampler.joinable()) return;
    {
        std::lock_guard lock(impl_->wake_mutex);
        impl_->stopping = true;
    }
    impl_->wake.notify_all();
    impl_->sampler.join();
    impl_->running = false;
}

bool GpuMonitor::running() const {
    return impl_->running;
}

GpuSample GpuMonitor::sample_now() {
    return impl_->take();
}

std::optional<GpuSample> GpuMonitor::latest() const {
    std::lock_guard lock(impl_->data_mutex);
    return impl_->latest;
}

std::vector<std::pair<double, GpuReading>> GpuMonitor::history(uint32_t gpu) const {
    std::lock_guard lock(impl_->data_mutex);
    auto it = impl_->histories.find(gpu);
    if (it == impl_->histories.end()) return {};
    return it->second.ordered();
}

WindowStats GpuMonitor::stats(uint32_t gpu, GpuMetric metric, double window_seconds) const {
    if (!(window_seconds >= 0))
        throw Error(Errc::invalid_argument,
                    fmt::format("GpuMonitor::stats: window_seconds must be >= 0, got {}", window_seconds));
    std::lock_guard lock(impl_->data_mutex);
    WindowStats out;
    auto it = impl_->histories.find(gpu);
    if (it == impl_->histories.end() || !impl_->latest) return out;
    const double end = impl_->latest->time;
    const double begin = end - window_seconds;
    const detail::ReadingHistory& history = it->second;
    double sum = 0;
    for (std::size_t i = 0; i < history.size(); ++i) {
        const auto& [time, reading] = history[i];
        if (time < begin || time > end) continue;
        const auto value = metric_of(reading, metric).get();
        if (!value) continue;
        out.min = out.count == 0 ? *value : std::min(out.min, *value);
        out.max = out.count == 0 ? *value : std::max(out.max, *value);
        sum += *value;
        ++out.count;
    }
    if (out.count > 0) out.mean = sum / static_cast<double>(out.count);
    return out;
}

void GpuMonitor::publish(Context& context) const {
    std::optional<GpuSample> sample = latest();
    publish_sample(sample ? &*sample : nullptr, context);
}

double GpuMonitor::prefetch_factor() {
    std::optional<double> factor;
    for (const IoAction& action : impl_->answer(std::nullopt).actions)
        if (action.type == "reduce_prefetch") factor = std::min(factor.value_or(action.factor), action.factor);
    return factor.value_or(1.0);
}

double GpuMonitor::transfer_delay(uint64_t bytes, std::string_view kind) {
    return transfer_delay(IoTransfer{bytes, kind});
}

double GpuMonitor::transfer_delay(const IoTransfer& transfer) {
    double delay = 0;
    for (const IoAction& action : impl_->answer(transfer).actions)
        if (action.type == "delay_transfer") delay = std::max(delay, action.delay_seconds);
    return delay;
}

IoAdvice GpuMonitor::io_advice(uint64_t bytes, std::string_view kind) {
    return io_advice(IoTransfer{bytes, kind});
}

IoAdvice GpuMonitor::io_advice(const IoTransfer& transfer) {
    return impl_->answer(transfer);
}

}  // namespace cohort
