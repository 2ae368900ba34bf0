// The Autotuner: rank 0 measures windows of steps, asks the search for the
// next point and publishes each decision under autotune/JOB/STEP; every
// rank reads the decision of the step it was told to expect and applies it
// before that step() returns, so all ranks switch between the same two steps.
#include "autotune/search.hpp"
#include "autotune/state_file.hpp"
#include "autotune/tuner_checks.hpp"

#include <cohort/communicator.hpp>

#include "core/json_fields.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>

namespace cohort {

using autotune::Point;
using Clock = std::chrono::steady_clock;

namespace {

// 16777216 rather than 1.67772e+07: most values are byte counts.
std::string number(double v) {
    if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
    return fmt::format("{:g}", v);
}

}  // namespace

struct Autotuner::Impl {
    int rank = 0, size = 1;
    std::shared_ptr<Store> store;
    AutotuneOptions options;
    std::vector<TunableParameter> params;

    mutable std::mutex mutex;  // guards what the accessors read
    std::vector<double> values;  // in force, by parameter
    bool applied_once = false;
    int64_t step = 0;
    int64_t next_decision = 0;  // the step of the next decision; 0 once frozen
    bool frozen = false;
    // Why a decision step failed: the ranks may no longer agree, so every
    // later step() fails too.
    std::string broken;
    // Rank 0.
    std::unique_ptr<autotune::Search> search;
    Point point;  // the point in force
    std::vector<double> window;
    Clock::time_point started = Clock::now();
    int64_t measured = 0;
    boost::json::array history;
    std::vector<std::string> notes;
    std::map<std::string, double> best_values;
    double best_throughput = 0;

    std::string key(int64_t s) const { return fmt::format("autotune/{}/{}", options.job_id, s); }

    void note(std::string text) {
        if (rank != 0) return;
        {
            std::lock_guard lock(mutex);
            notes.push_back(text);
        }
        if (options.log)
            options.log(text);
        else
            std::fprintf(stderr, "cohort autotune: %s\n", text.c_str());
    }

    std::map<std::string, double> named(const std::vector<double>& v) const {
        std::map<std::string, double> out;
        for (std::size_t i = 0; i < params.size(); ++i) out[params[i].name] = v[i];
        return out;
    }
    std::vector<double> values_of(const Point& p) const {
        std::vector<double> v(params.size());
        for (std::size_t i = 0; i < params.size(); ++i)
            v[i] = params[i].fixed ? params[i].initial : params[i].candidates[p[i]];
        return v;
    }

    void apply(const std::vector<double>& next, int64_t at) {
        for (std::size_t i = 0; i < params.size(); ++i) {
            if (applied_once && next[i] == values[i]) continue;
            try {
                params[i].apply(next[i]);
            } catch (const Error& e) {
                throw Error(e.code(), fmt::format("autotune: step {}: applying {} = {} failed: {}", at,
                                                  params[i].name, number(next[i]), e.what()));
            } catch (const std::exception& e) {
                throw Error(Errc::invalid_argument, fmt::format("autotune: step {}: applying {} = {} failed: {}",
                                                                at, params[i].name, number(next[i]), e.what()));
            }
        }
        std::lock_guard lock(mutex);
        values = next;
        applied_once = true;
    }

    // Rank 0: tells the others and applies.
    void publish(int64_t at, const std::vector<double>& next, int64_t then, bool freeze) {
        boost::json::object v;
        for (std::size_t i = 0; i < params.size(); ++i) v[params[i].name] = next[i];
        const std::string text = boost::json::serialize(
            boost::json::object{{"step", at}, {"values", std::move(v)}, {"next", then}, {"frozen", freeze}});
        if (store) store->set(key(at), text);
        apply(next, at);
        std::lock_guard lock(mutex);
        next_decision = then;
        frozen = freeze;
    }

    // Other ranks: reads and applies rank 0's decision of step `at`.
    void follow(int64_t at) {
        const std::string k = key(at);
        std::string text;
        try {
            text = store->get(k, options.timeout);
        } catch (const Error& e) {
            throw Error(e.code(), fmt::format("autotune: rank {} waited for rank 0's decision of step {} ({} in {}): "
                                              "{}; does rank 0 call step() once per step too?",
                                              rank, at, k, store->address(), e.what()));
        }
        const std::string where = fmt::format("autotune: decision {} from rank 0", k);
        boost::system::error_code ec;
        const auto doc = boost::json::parse(text, ec);
        if (ec) throw Error(Errc::parse, fmt::format("{} is not JSON: {}", where, ec.message()));
        detail::FieldReader r(doc, where, Errc::parse);
        const auto& v = r.object("values");
        std::vector<double> next(params.size());
        for (std::size_t i = 0; i < params.size(); ++i) {
            const auto* x = v.if_contains(params[i].name);
            if (x == nullptr)
                throw Error(Errc::mismatch, fmt::format("{} has no value for parameter '{}': do all ranks tune the "
                                                        "same parameters?",
                                                        where, params[i].name));
            next[i] = detail::json_number(*x, where + ": " + params[i].name, Errc::parse);
        }
        if (v.size() != params.size())
            throw Error(Errc::mismatch, fmt::format("{} names {} parameters, this rank tunes {}: do all ranks tune "
                                                    "the same parameters?",
                                                    where, v.size(), params.size()));
        const int64_t then = r.int64("next");
        const bool freeze = r.boolean("frozen");
        apply(next, at);
        std::lock_guard lock(mutex);
        next_decision = then;
        frozen = freeze;
    }

    int64_t window_steps() const { return int64_t(options.settle_steps) + options.samples; }

    void save(const Point& best, double throughput) {
        if (options.state_file.empty()) return;
        autotune::SavedState s;
        s.job = options.job_id;
        s.ranks = size;
        s.search = autotune_search_name(options.search);
        s.frozen = true;
        s.step = step;
        s.throughput = throughput;
        s.values = named(values_of(best));
        if (auto why = autotune::save_state(options.state_file, s))
            note(fmt::format("cannot save the tuned values: {}", *why));
    }

    // Rank 0, in the constructor: the start point (a loaded state's or the
    // initial values) and step 0's decision.
    void start() {
        Point start(params.size(), 0);
        for (std::size_t i = 0; i < params.size(); ++i)
            if (!params[i].fixed) start[i] = autotune::index_of(params[i], params[i].initial);
        bool loaded_frozen = false;
        if (!options.state_file.empty()) {
            auto loaded = autotune::load_state(options.state_file, options.job_id, size);
            if (auto* why = std::get_if<std::string>(&loaded)) {
                note(fmt::format("{}: ignored; tuning starts from the defaults", *why));
            } else if (auto* s = std::get_if<autotune::SavedState>(&loaded)) {
                Point from = start;
                std::string refused;
                for (std::size_t i = 0; i < params.size() && refused.empty(); ++i) {
                    if (params[i].fixed) continue;
                    auto it = s->values.find(params[i].name);
                    if (it == s->values.end()) {
                        refused = fmt::format("has no value for '{}'", params[i].name);
                    } else if (const auto at = autotune::index_of(params[i], it->second); at == autotune::kNone) {
                        refused = fmt::format("holds {} = {:g}, not one of its candidates", params[i].name, it->second);
                    } else {
                        from[i] = at;
                    }
                }
                if (!refused.empty()) {
                    note(fmt::format("state file {} {}: ignored; tuning starts from the defaults",
                                     options.state_file.string(), refused));
                } else {
                    start = from;
                    loaded_frozen = s->frozen && !options.retune;
                    best_throughput = s->throughput;
                    note(fmt::format("state file {}: starting from the values job '{}' reached at step {} ({:g}){}",
                                     options.state_file.string(), s->job, s->step, s->throughput,
                                     loaded_frozen ? ", frozen" : ", tuning on from them"));
                }
            }
        }
        autotune::Space space;
        for (const auto& p : params) {
            space.sizes.push_back(p.fixed ? 1 : p.candidates.size());
            space.tunable.push_back(!p.fixed && p.candidates.size() > 1);
        }
        search = options.search == AutotuneSearch::bayesian
                     ? autotune::bayesian(space, start, options.bayes_samples)
                     : autotune::coordinate_descent(space, start, options.passes, options.min_gain);
        point = start;
        best_values = named(values_of(start));
        const bool nothing = std::none_of(space.tunable.begin(), space.tunable.end(), [](bool t) { return t; });
        const int64_t first = int64_t(options.warmup_steps) + options.samples;
        const bool freeze = loaded_frozen || nothing || first > options.max_steps;
        if (nothing && !loaded_frozen) note("nothing to tune: every parameter is fixed or has one candidate");
        if (!nothing && !loaded_frozen && first > options.max_steps)
            note(fmt::format("max_steps {} leaves no room for the first window ({} warm-up + {} measured steps): "
                             "frozen at the starting values",
                             options.max_steps, options.warmup_steps, options.samples));
        publish(0, values_of(start), freeze ? 0 : first, freeze);
    }

    // Rank 0 at a decision step: the window's median goes to the search.
    void decide(int64_t at) {
        std::vector<double> w = window;
        window.clear();
        std::nth_element(w.begin(), w.begin() + std::ptrdiff_t(w.size() / 2), w.end());
        const double median = w[w.size() / 2];
        {
            std::lock_guard lock(mutex);
            ++measured;
            history.push_back(boost::json::object{{"step", at}, {"values", values_json(values)}, {"median", median}});
        }
        auto proposal = search->next(point, median);
        {
            std::lock_guard lock(mutex);
            best_values = named(values_of(search->best()));
            best_throughput = search->best_score();
        }
        std::string why;
        if (!proposal)
            why = "the search is done";
        else if (Clock::now() - started >= options.max_time)
            why = fmt::format("max_time ({:g} s) is up", options.max_time.count() / 1000.0);
        else if (at + window_steps() > options.max_steps)
            why = fmt::format("max_steps ({}) leaves no room for another window", options.max_steps);
        if (!why.empty()) {
            const Point best = search->best();
            point = best;
            publish(at, values_of(best), 0, true);
            std::string text;
            for (const auto& [name, v] : named(values_of(best))) text += fmt::format(" {}={}", name, number(v));
            note(fmt::format("frozen at step {} ({}), {} points measured, best median {}:{}", at, why, measured,
                             number(search->best_score()), text));
            save(best, search->best_score());
            return;
        }
        point = *proposal;
        publish(at, values_of(point), at + window_steps(), false);
    }

    boost::json::object values_json(const std::vector<double>& v) const {
        boost::json::object o;
        for (std::size_t i = 0; i < params.size(); ++i) o[params[i].name] = v[i];
        return o;
    }

    void init(int r, int n, std::shared_ptr<Store> s, std::vector<TunableParameter> p, AutotuneOptions o) {
        if (n < 1 || r < 0 || r >= n)
            throw Error(Errc::invalid_argument, fmt::format("autotune: rank {} is outside 0..{}", r, n - 1));
        if (n > 1 && !s) throw Error(Errc::invalid_argument, "autotune: more than one rank needs a store to agree through");
        std::vector<std::string> names;
        for (const auto& x : p) names.push_back(x.name);
        options = with_env_defaults(std::move(o), names);
        autotune::check_options(options);
        autotune::check_parameters(p, options);
        rank = r;
        size = n;
        store = n > 1 ? std::move(s) : nullptr;
        params = std::move(p);
        values.assign(params.size(), 0);
        if (rank == 0)
            start();
        else
            follow(0);
    }
};

Autotuner::Autotuner(Communicator& comm, AutotuneOptions options, std::vector<TunableParameter> extra)
    : impl_(std::make_unique<Impl>()) {
    auto params = comm_parameters(comm);
    for (auto& p : extra) params.push_back(std::move(p));
    impl_->init(comm.rank(), comm.size(), comm.store(), std::move(params), std::move(options));
}

Autotuner::Autotuner(int rank, int size, std::shared_ptr<Store> store, std::vector<TunableParameter> parameters,
                     AutotuneOptions options)
    : impl_(std::make_unique<Impl>()) {
    impl_->init(rank, size, std::move(store), std::move(parameters), std::move(options));
}

Autotuner::Autotuner(Autotuner&&) noexcept = default;
Autotuner& Autotuner::operator=(Autotuner&&) noexcept = default;
Autotuner::~Autotuner() = default;

AutotuneStep Autotuner::step(double throughput) {
    Impl& m = *impl_;
    if (!std::isfinite(throughput) || throughput < 0)
        throw Error(Errc::invalid_argument,
                    fmt::format("autotune: step {}: throughput {} must be finite and not negative", m.step + 1,
                                throughput));
    if (!m.broken.empty())
        throw Error(Errc::closed, fmt::format("autotune: step {}: this tuner failed earlier and the ranks may no "
                                              "longer agree: {}; make a new Autotuner on every rank",
                                              m.step + 1, m.broken));
    AutotuneStep out;
    {
        std::lock_guard lock(m.mutex);
        out.step = ++m.step;
    }
    if (m.frozen) {
        out.frozen = true;
        return out;
    }
    const int64_t at = out.step;
    if (m.rank == 0 && at > m.next_decision - m.options.samples) m.window.push_back(throughput);
    if (at == m.next_decision) {
        out.decided = true;
        const auto before = m.values;
        try {
            if (m.rank == 0)
                m.decide(at);
            else
                m.follow(at);
        } catch (const std::exception& e) {
            m.broken = e.what();
            throw;
        }
        out.changed = m.values != before;
    }
    out.frozen = m.frozen;
    return out;
}

AutotuneStep Autotuner::step(double bytes, std::chrono::duration<double> seconds) {
    if (!(seconds.count() > 0) || !std::isfinite(bytes) || bytes < 0)
        throw Error(Errc::invalid_argument,
                    fmt::format("autotune: step {}: {} bytes in {} s is no throughput (bytes >= 0, seconds > 0)",
                                impl_->step + 1, bytes, seconds.count()));
    return step(bytes / seconds.count());
}

bool Autotuner::frozen() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->frozen;
}
int64_t Autotuner::steps() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->step;
}
std::map<std::string, double> Autotuner::values() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->named(impl_->values);
}
std::map<std::string, double> Autotuner::best() const {
    std::lock_guard lock(impl_->mutex);
    if (impl_->rank != 0) return impl_->named(impl_->values);
    return impl_->best_values;
}
double Autotuner::best_throughput() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->best_throughput;
}
int64_t Autotuner::step_bound() const {
    const Impl& m = *impl_;
    if (!m.search) return 0;  // other ranks follow rank 0's bound
    const int64_t points = m.search->bound();
    const int64_t bound = int64_t(m.options.warmup_steps) + m.options.samples + (points - 1) * m.window_steps();
    return std::min<int64_t>(bound, m.options.max_steps);
}
std::vector<std::string> Autotuner::notes() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->notes;
}

std::string Autotuner::report() const {
    const Impl& m = *impl_;
    std::lock_guard lock(m.mutex);
    boost::json::object best;
    boost::json::object bv;
    for (const auto& [name, v] : m.rank == 0 ? m.best_values : m.named(m.values)) bv[name] = v;
    best["values"] = std::move(bv);
    best["throughput"] = m.best_throughput;
    boost::json::array notes;
    for (const auto& n : m.notes) notes.emplace_back(n);
    boost::json::object o{{"job", m.options.job_id},
                          {"search", autotune_search_name(m.options.search)},
                          {"rank", m.rank},
                          {"step", m.step},
                          {"frozen", m.frozen},
                          {"values", m.values_json(m.values)},
                          {"best", std::move(best)},
                          {"measured", m.measured},
                          {"history", m.history},
                          {"state_file", m.options.state_file.string()},
                          {"notes", std::move(notes)}};
    return boost::json::serialize(o);
}

}  // namespace cohort
