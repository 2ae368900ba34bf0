// The rule engine: compiled conditions with Prometheus-style states.
//
// Each evaluate(context, now) looks at every enabled rule once (disabled
// rules are not evaluated and stay inactive). Its condition is true, false
// or unknown; unknown (a variable missing, or a type error at evaluation)
// counts as "not true" for the state and is also reported in
// Evaluation::errors, naming the missing variables or the error. A condition
// that is true despite a missing variable (`x > 1 || true`) is simply true.
//
//   inactive -> pending   condition true and `for` > 0; `since` = now
//   inactive -> firing    condition true and `for` == 0 (one event, not two)
//   pending  -> firing    condition true and now - since >= `for`
//   pending  -> inactive  condition not true
//   firing   -> inactive  condition not true, at the first evaluation at which
//                         now - cleared_at >= `keep_firing_for`, where
//                         cleared_at is the first evaluation since the rule
//                         was last true at which it was not true. A true
//                         condition in between keeps it firing and clears
//                         cleared_at (against flapping).
//
// Every change comes back as a RuleEvent stamped with `now`.
//
// A rule fires (is in Evaluation::fired and its handlers run) when it is
// firing, its condition is true at this evaluation, and at least `cooldown`
// has passed since it last fired. With no cooldown that is every evaluation
// while it stays true: rules run on every I/O decision, and each decision
// needs the answer. A rule that re-enters firing sooner than `cooldown`
// after it last fired waits until `cooldown` has passed. So `cooldown` is
// the minimum time between two firings, as the issue asks.
//
// Fired rules are ordered by priority, highest first, then by their order in
// the rule set; all of them are returned. Handlers then run in that order,
// each rule's actions in order; an action with no handler is skipped (only
// possible when unhandled actions are allowed). A handler that throws adds a
// RuleError ("action 'x' handler failed: ...") and the others still run.
// Handlers run inside evaluate(), on the caller's thread; they must not call
// on() or load() of the same engine. An engine is not thread-safe.
//
// Time: `now` is seconds on any clock and must never go backwards (equal is
// fine), across reloads too; otherwise Error(invalid_argument).
//
// Loading (and hot reload): the new set is validated in full first (action
// handlers, variable types against this engine's symbols, every condition
// compiled) and only then replaces the old one, so an error leaves the old
// set and its states running. A rule keeps its state across a reload when
// its id is the same, it is enabled in both, and its condition has the same
// text with the same definitions of the macros and lists it uses; any other
// rule starts inactive. All sets an engine loads share one Symbols, so
// contexts made before a reload stay valid, and a variable keeps its
// declared type for the life of the engine.
#include "rules/rule_set_data.hpp"

#include "core/text.hpp"

#include <cohort/error.hpp>
#include <cohort/rules.hpp>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace cohort {

std::string_view to_string(RuleState state) noexcept {
    switch (state) {
        case RuleState::inactive:
            return "inactive";
        case RuleState::pending:
            return "pending";
        case RuleState::firing:
            return "firing";
    }
    return "unknown";
}

namespace {

// What the engine remembers about one rule between evaluations.
struct Track {
    RuleState state = RuleState::inactive;
    double since = 0;      // when it became pending
    bool cleared = false;  // firing, but not true at cleared_at
    double cleared_at = 0;
    bool has_fired = false;
    double last_fired = 0;
};

std::string unknown_message(const Outcome& outcome) {
    if (!outcome.error.empty()) return fmt::format("condition could not be evaluated: {}", outcome.error);
    if (outcome.missing.empty()) return "condition is unknown";
    std::vector<std::string> quoted;
    for (const std::string& name : outcome.missing) quoted.push_back(fmt::format("'{}'", name));
    return fmt::format("condition is unknown: {} {} not set in the context", fmt::join(quoted, ", "),
                       quoted.size() == 1 ? "is" : "are");
}

}  // namespace

struct RuleEngine::Impl {
    EngineOptions options;
    std::map<std::string, ActionHandler, std::less<>> handlers;
    std::shared_ptr<Symbols> symbols = std::make_shared<Symbols>();
    std::unique_ptr<RuleSet> set;
    std::vector<Expression> conditions;  // one per rule, against `symbols`
    std::vector<std::string> fingerprints;
    std::vector<Track> tracks;
    std::map<std::string, std::size_t, std::less<>> index;
    bool evaluated = false;
    double last_now = 0;

    std::size_t find(std::string_view rule) const {
        if (!set) throw Error(Errc::not_found, fmt::format("no rule '{}': no rule set is loaded", rule));
        if (auto it = index.find(rule); it != index.end()) return it->second;
        std::vector<std::string_view> ids;
        for (const auto& [id, unused] : index) ids.push_back(id);
        std::string message = fmt::format("no rule '{}' in the loaded rule set", rule);
        if (auto near = detail::closest_word(rule, ids)) message += fmt::format(" (did you mean '{}'?)", *near);
        throw Error(Errc::not_found, message);
    }

    void check_handlers(const RuleSet::Data& data) const {
        if (options.allow_unhandled_actions || data.allow_unhandled_actions) return;
        std::vector<std::string_view> types;
        for (const auto& [type, unused] : handlers) types.push_back(type);
        for (std::size_t i = 0; i < data.rules.size(); ++i) {
            const Rule& rule = data.rules[i];
            if (!rule.enabled) continue;  // never fires, so needs no handler
            for (std::size_t a = 0; a < rule.actions.size(); ++a) {
                const std::string& type = rule.actions[a].type;
                if (handlers.contains(type)) continue;
                std::string message = fmt::format("{}: rule '{}' uses action type '{}', which has no handler",
                                                  data.origins[i].action_types[a], rule.id, type);
                if (auto near = detail::closest_word(type, types))
                    message += fmt::format(" (did you mean '{}'?)", *near);
                message += types.empty() ? fmt::format("; no handlers are registered")
                                         : fmt::format("; registered: {}", fmt::join(types, ", "));
                message +=
                    ". Register one with RuleEngine::on before loading, or set "
                    "'allow_unhandled_actions: true' in the rule file";
                throw Error(Errc::parse, message);
            }
        }
    }

    // One rule's step; true when it fires now.
    static bool step(Track& track, const Rule& rule, bool holds, double now, std::vector<RuleEvent>& events) {
        auto move = [&](RuleState to) {
            events.push_back({rule.id, track.state, to, now});
            track.state = to;
        };
        if (!holds) {
            if (track.state == RuleState::pending) {
                move(RuleState::inactive);
            } else if (track.state == RuleState::firing) {
                if (!track.cleared) {
                    track.cleared = true;
                    track.cleared_at = now;
                }
                if (now - track.cleared_at >= rule.keep_firing_for_seconds) {
                    track.cleared = false;
                    move(RuleState::inactive);
                }
            }
            return false;
        }
        track.cleared = false;
        if (track.state == RuleState::inactive) {
            if (rule.for_seconds > 0) {
                track.since = now;
                move(RuleState::pending);
            } else {
                move(RuleState::firing);
            }
        } else if (track.state == RuleState::pending && now - track.since >= rule.for_seconds) {
            move(RuleState::firing);
        }
        if (track.state != RuleState::firing) return false;
        if (track.has_fired && now - track.last_fired < rule.cooldown_seconds) return false;
        track.has_fired = true;
        track.last_fired = now;
        return true;
    }
};

RuleEngine::RuleEngine(EngineOptions options) : impl_(std::make_unique<Impl>()) {
    impl_->options = options;
}
RuleEngine::RuleEngine(RuleEngine&&) noexcept = default;
RuleEngine& RuleEngine::operator=(RuleEngine&&) noexcept = default;
RuleEngine::~RuleEngine() = default;

void RuleEngine::on(std::string_view action_type, ActionHandler handler) {
    if (action_type.empty()) throw Error(Errc::invalid_argument, "RuleEngine::on: the action type must not be empty");
    if (!handler)
        throw Error(Errc::invalid_argument,
                    fmt::format("RuleEngine::on: the handler for action type '{}' is empty", action_type));
    impl_->handlers.insert_or_assign(std::string(action_type), std::move(handler));
}

void RuleEngine::load(const std::filesystem::path& path) {
    load(RuleSet::from_file(path));
}

void RuleEngine::load_string(std::string_view text, Format format, std::string_view source_name) {
    load(RuleSet::from_string(text, format, source_name));
}

void RuleEngine::load(RuleSet rules) {
    Impl& impl = *impl_;
    const RuleSet::Data& data = *rules.data_;
    impl.check_handlers(data);
    // Compile against a copy first: a set that fails must leave no trace
    // (declarations, slots) in the symbols the running set and every
    // context share. The second compile cannot fail.
    data.compile(std::make_shared<Symbols>(*impl.symbols));
    std::vector<Expression> conditions = data.compile(impl.symbols);

    std::vector<std::string> fingerprints;
    std::vector<Track> tracks(data.rules.size());
    std::map<std::string, std::size_t, std::less<>> index;
    for (std::size_t i = 0; i < data.rules.size(); ++i) {
        const Rule& rule = data.rules[i];
        index.emplace(rule.id, i);
        fingerprints.push_back(data.fingerprint(i));
        auto old = impl.index.find(rule.id);
        if (old == impl.index.end() || !rule.enabled) continue;
        if (impl.set->rules()[old->second].enabled && impl.fingerprints[old->second] == fingerprints.back())
            tracks[i] = impl.tracks[old->second];
    }
    impl.set = std::make_unique<RuleSet>(std::move(rules));
    impl.conditions = std::move(conditions);
    impl.fingerprints = std::move(fingerprints);
    impl.tracks = std::move(tracks);
    impl.index = std::move(index);
}

Evaluation RuleEngine::evaluate(const Context& context, double now) {
    Impl& impl = *impl_;
    if (!std::isfinite(now))
        throw Error(Errc::invalid_argument, fmt::format("RuleEngine::evaluate: time {} is not a finite number", now));
    if (impl.evaluated && now < impl.last_now) {
        throw Error(Errc::invalid_argument,
                    fmt::format("RuleEngine::evaluate: time {} is before the previous evaluation's time {} (time must "
                                "not go backwards)",
                                now, impl.last_now));
    }
    if (&context.symbols() != impl.symbols.get())
        throw Error(Errc::invalid_argument,
                    "RuleEngine::evaluate: the context was not made by this engine (use RuleEngine::context())");
    impl.evaluated = true;
    impl.last_now = now;
    Evaluation out;
    if (!impl.set) return out;
    const std::vector<Rule>& rules = impl.set->rules();
    std::vector<std::size_t> due;
    for (std::size_t i = 0; i < rules.size(); ++i) {
        if (!rules[i].enabled) continue;
        // test() is the fast path; only an unknown result pays for details.
        const Truth truth = impl.conditions[i].test(context);
        if (truth == Truth::unknown)
            out.errors.push_back({rules[i].id, unknown_message(impl.conditions[i].evaluate(context)), {}});
        if (Impl::step(impl.tracks[i], rules[i], truth == Truth::yes, now, out.events)) due.push_back(i);
    }
    std::stable_sort(due.begin(), due.end(),
                     [&](std::size_t a, std::size_t b) { return rules[a].priority > rules[b].priority; });
    for (std::size_t i : due) out.fired.push_back({rules[i].id, rules[i].priority, rules[i].actions, rules[i].labels});
    for (const Firing& firing : out.fired) {
        for (const Action& action : firing.actions) {
            auto handler = impl.handlers.find(action.type);
            if (handler == impl.handlers.end()) continue;
            try {
                handler->second(firing, action);
            } catch (const std::exception& e) {
                out.errors.push_back(
                    {firing.rule, fmt::format("action '{}' handler failed: {}", action.type, e.what()), action.type});
            } catch (...) {
                out.errors.push_back({firing.rule,
                                      fmt::format("action '{}' handler failed: an unknown exception", action.type),
                                      action.type});
            }
        }
    }
    return out;
}

std::vector<ExplainStep> RuleEngine::explain(std::string_view rule, const Context& context) const {
    return impl_->conditions[impl_->find(rule)].explain(context);
}

Context RuleEngine::context() const {
    return Context(impl_->symbols);
}
const std::shared_ptr<Symbols>& RuleEngine::symbols() const {
    return impl_->symbols;
}
const RuleSet* RuleEngine::rules() const {
    return impl_->set.get();
}
RuleState RuleEngine::state(std::string_view rule) const {
    return impl_->tracks[impl_->find(rule)].state;
}

}  // namespace cohort
