// The auto-scaler: one rule-engine evaluation per event, its fired actions
// made into a plan by PlanBuilder.
//
// The engine's states are per rule, not per worker: a rule with no `for`
// and no `cooldown` fires at every evaluation at which its condition holds,
// so two workers failing one after the other (even at the same `now`) get
// two relaunches. A `cooldown` in a pack therefore spaces firings across
// all workers, which suits job-level rules (scale-ups) and is why the
// per-worker limits are budgets here rather than rule timing.
#include "elastic/plan_builder.hpp"
#include "elastic/policy_pack.hpp"

#include <cohort/error.hpp>
#include <cohort/scaling.hpp>

#include <fmt/format.h>

#include <cmath>

namespace cohort {
namespace {

// One worker's current run of straggler reports.
struct StragglerRun {
    double first = 0;
    double last = 0;
};

bool needs_node(EventKind kind) {
    return kind == EventKind::failed || kind == EventKind::straggler || kind == EventKind::hung ||
           kind == EventKind::exited_ok;
}

}  // namespace

struct AutoScaler::Impl {
    ScalingOptions options;
    RuleEngine engine;
    RelaunchBudget budget;
    HostBlacklist blacklist;
    std::optional<Context> context;
    Evaluation last;
    bool evaluated = false;
    double last_now = 0;
    std::map<std::string, StragglerRun, std::less<>> stragglers;

    Impl(ScalingOptions o, RuleSet rules)
        : options(std::move(o)),
          budget(options.max_node_relaunches, options.max_job_relaunches),
          blacklist(options.blacklist) {
        if (options.min_nodes < 0 || options.max_nodes < 1 || options.max_nodes < options.min_nodes)
            throw Error(Errc::invalid_argument,
                        fmt::format("AutoScaler: min_nodes ({}) must be 0 or more and max_nodes ({}) at least 1 and "
                                    "at least min_nodes",
                                    options.min_nodes, options.max_nodes));
        if (!(options.straggler_gap.count() > 0))
            throw Error(Errc::invalid_argument, fmt::format("AutoScaler: straggler_gap must be positive, not {}s",
                                                            options.straggler_gap.count()));
        // The plan is built from Evaluation::fired; the handlers are there
        // so that loading refuses an action type the auto-scaler does not know.
        for (std::string_view type : detail::kPolicyActions) engine.on(type, [](const Firing&, const Action&) {});
        engine.load(std::move(rules));
        detail::check_policy(*engine.rules(), *engine.symbols());
        context.emplace(engine.context());
    }

    void set(std::string_view name, Value value) {
        if (!engine.symbols()->find(name)) return;  // no rule uses it
        context->set(name, std::move(value));
    }

    double straggling_for(const ScalingEvent& event, double now) {
        auto [it, fresh] = stragglers.try_emplace(event.node, StragglerRun{now, now});
        if (!fresh && now - it->second.last > options.straggler_gap.count()) it->second.first = now;
        it->second.last = now;
        return event.straggler_seconds.value_or(now - it->second.first);
    }

    void fill_context(const ScalingEvent& event, const detail::PlanBuilder& builder, double now) {
        context->clear();
        set("event", std::string(to_string(event.kind)));
        if (!event.node.empty()) {
            set("node", event.node);
            set("node_relaunches", budget.node_used(event.node));
        }
        if (!builder.node_host().empty()) {
            set("host", builder.node_host());
            set("host_blacklisted", blacklist.blacklisted(builder.node_host(), now));
        }
        set("detail", event.detail);
        set("cause", std::string(to_string(event.cause)));
        if (event.exit_code) set("exit_code", *event.exit_code);
        set("job_relaunches", budget.job_used());
        set("max_node_relaunches", options.max_node_relaunches);
        set("max_job_relaunches", options.max_job_relaunches);
        set("nodes", builder.live());
        set("min_nodes", options.min_nodes);
        set("max_nodes", options.max_nodes);
        if (auto slots = builder.free_slots()) set("free_slots", *slots);
        if (event.straggler_score) set("straggler_score", *event.straggler_score);
        if (event.kind == EventKind::straggler) set("straggler_for", straggling_for(event, now));
    }
};

AutoScaler::AutoScaler(ScalingOptions options) : AutoScaler(std::move(options), default_rules_path()) {}

AutoScaler::AutoScaler(ScalingOptions options, const std::filesystem::path& rules)
    : AutoScaler(std::move(options), RuleSet::from_file(rules)) {}

AutoScaler::AutoScaler(ScalingOptions options, RuleSet rules)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(rules))) {}

AutoScaler::AutoScaler(AutoScaler&&) noexcept = default;
AutoScaler& AutoScaler::operator=(AutoScaler&&) noexcept = default;
AutoScaler::~AutoScaler() = default;

ScalingPlan AutoScaler::on_event(const ScalingEvent& event, const ClusterView& cluster, double now) {
    Impl& impl = *impl_;
    if (!std::isfinite(now))
        throw Error(Errc::invalid_argument, fmt::format("AutoScaler::on_event: time {} is not a finite number", now));
    if (impl.evaluated && now < impl.last_now)
        throw Error(Errc::invalid_argument,
                    fmt::format("AutoScaler::on_event: time {} is before the previous event's time {} (time must "
                                "not go backwards)",
                                now, impl.last_now));
    if (needs_node(event.kind) && event.node.empty())
        throw Error(Errc::invalid_argument,
                    fmt::format("AutoScaler::on_event: a '{}' event needs the node it is about (ScalingEvent::node "
                                "is empty)",
                                to_string(event.kind)));
    impl.evaluated = true;
    impl.last_now = now;

    detail::PlanBuilder builder(impl.options, impl.budget, impl.blacklist, event, cluster, now);
    std::vector<std::string> notes;
    if (event.kind == EventKind::failed && impl.blacklist.record_failure(builder.node_host(), now)) {
        const auto& b = impl.options.blacklist;
        notes.push_back(fmt::format("host {} blacklisted until {:g} after {} failures within {:g}s (blacklisting {})",
                                    builder.node_host(), *impl.blacklist.until(builder.node_host(), now),
                                    b.after_failures, b.window.count(),
                                    impl.blacklist.times_blacklisted(builder.node_host())));
    }
    if (event.kind == EventKind::failed || event.kind == EventKind::exited_ok) impl.stragglers.erase(event.node);

    impl.fill_context(event, builder, now);
    impl.last = impl.engine.evaluate(*impl.context, now);
    for (std::string& note : notes) builder.warn(std::move(note));
    for (const RuleError& error : impl.last.errors) builder.warn(fmt::format("rule {}: {}", error.rule, error.message));
    for (const Firing& firing : impl.last.fired)
        for (const Action& action : firing.actions) builder.apply(firing, action);

    ScalingPlan plan = builder.finish();
    // A relaunched, replaced or removed worker starts a new straggler record.
    for (const PlanStep& step : plan.steps)
        if (!step.node.empty()) impl.stragglers.erase(step.node);
    return plan;
}

const ScalingOptions& AutoScaler::options() const {
    return impl_->options;
}
const RelaunchBudget& AutoScaler::budget() const {
    return impl_->budget;
}
const HostBlacklist& AutoScaler::blacklist() const {
    return impl_->blacklist;
}
const RuleSet& AutoScaler::rules() const {
    return *impl_->engine.rules();
}
const Evaluation& AutoScaler::last_evaluation() const {
    return impl_->last;
}

std::filesystem::path AutoScaler::default_rules_path() {
    return detail::find_default_policy();
}

}  // namespace cohort
