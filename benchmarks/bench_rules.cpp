// Question: how fast does cohort evaluate a rule condition, against Lua 5.4
// evaluating the same condition compiled once as a function, and how long
// does compiling 1,000 rules take?
//
//   build/benchmarks/bench_rules --benchmark_counters_tabular=true
//
// The condition is `gpu_memory > 80 AND file_type == 'model' AND
// transfer_size > 100MB`; before every evaluation all three variables take
// the next of 1,024 precomputed combinations (a fifth of them true). Counters:
// items_per_second (evaluations per second), true_pct (the share that held,
// the same for every contender or the comparison is wrong). After the table
// the program prints cohort's rate over each Lua variant's. Then: compiling
// 1,000 conditions, loading a file of 1,000 rules (RuleSet, and an engine),
// and the whole engine evaluating the shipped GPU/I/O pack per transfer.
// Targets (issue 3): 25M evaluations/s on one core, 2x Lua; 1,000 rules in
// 50 ms.
#include <cohort/cohort.hpp>

#include <benchmark/benchmark.h>

#include "console_options.hpp"
#include <lua.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>


namespace {

constexpr const char* kCondition = "gpu_memory > 80 AND file_type == 'model' AND transfer_size > 100MB";
constexpr const char* kLuaCondition = "return gpu_memory > 80 and file_type == 'model' and transfer_size > 100000000";
constexpr std::size_t kCombos = 1024;  // a power of two: the index wraps with a mask

struct Combo {
    double gpu_memory;
    std::string file_type;
    int64_t transfer_size;
};

uint64_t mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// Fixed values, so every run and every contender sees the same sequence:
// gpu_memory 60..100 %, four file types (half of them 'model'), 1..401 MB.
// The clauses hold about half, half and three quarters of the time, so
// neither side can settle most evaluations on the first clause.
const std::vector<Combo>& combos() {
    static const std::vector<Combo> all = [] {
        static const char* const types[] = {"model", "model", "dataset", "checkpoint"};
        std::vector<Combo> out;
        for (uint64_t i = 0; i < kCombos; ++i) {
            const uint64_t r = mix(i + 1);
            out.push_back(Combo{60.0 + static_cast<double>(r % 4000) / 100.0, types[(r >> 16) % 4],
                                static_cast<int64_t>(1'000'000 + (r >> 24) % 400'000'000)});
        }
        return out;
    }();
    return all;
}

// The expected share of combinations that hold, computed by hand.
double expected_true_share() {
    int hits = 0;
    for (const auto& c : combos())
        hits += c.gpu_memory > 80 && c.file_type == "model" && c.transfer_size > 100'000'000 ? 1 : 0;
    return static_cast<double>(hits) / kCombos;
}

void report(benchmark::State& state, int64_t hits) {
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
    state.counters["true_pct"] = 100.0 * static_cast<double>(hits) / static_cast<double>(state.iterations());
    state.counters["expected_pct"] = 100.0 * expected_true_share();
}

// cohort's fast path: slots looked up once, then Context::set by slot and
// Expression::test. `declared` types the variables first, as a rule file's
// `variables` section does.
void cohort_test(benchmark::State& state, bool declared) {
    auto symbols = std::make_shared<cohort::Symbols>();
    if (declared) {
        symbols->declare("gpu_memory", cohort::Type::number);
        symbols->declare("file_type", cohort::Type::string);
        symbols->declare("transfer_size", cohort::Type::integer);
    }
    const auto expression = cohort::Expression::compile(kCondition, symbols);
    auto context = expression.context();
    const uint32_t gpu = *symbols->find("gpu_memory");
    const uint32_t type = *symbols->find("file_type");
    const uint32_t size = *symbols->find("transfer_size");
    const auto& all = combos();
    std::size_t i = 0;
    int64_t hits = 0;
    for (auto _ : state) {
        const Combo& c = all[i++ & (kCombos - 1)];
        context.set(gpu, c.gpu_memory);
        context.set(type, std::string_view(c.file_type));
        context.set(size, c.transfer_size);
        hits += expression.test(context) == cohort::Truth::yes ? 1 : 0;
    }
    benchmark::DoNotOptimize(hits);
    report(state, hits);
}

void BM_cohort(benchmark::State& state) {
    cohort_test(state, true);
}
void BM_cohort_untyped(benchmark::State& state) {
    cohort_test(state, false);
}

struct LuaState {
    lua_State* L = luaL_newstate();
    int function = LUA_NOREF;
    LuaState() {
        if (luaL_loadstring(L, kLuaCondition) != LUA_OK) std::abort();
        function = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    ~LuaState() { lua_close(L); }
    bool call() {
        lua_rawgeti(L, LUA_REGISTRYINDEX, function);
        if (lua_pcall(L, 0, 1, 0) != LUA_OK) std::abort();
        const bool result = lua_toboolean(L, -1) != 0;
        lua_pop(L, 1);
        return result;
    }
};

// Lua as an embedding program would use it: the condition compiled once as a
// function, the variables set as globals before each call.
void BM_lua(benchmark::State& state) {
    LuaState lua;
    lua_State* L = lua.L;
    const auto& all = combos();
    std::size_t i = 0;
    int64_t hits = 0;
    for (auto _ : state) {
        const Combo& c = all[i++ & (kCombos - 1)];
        lua_pushnumber(L, c.gpu_memory);
        lua_setglobal(L, "gpu_memory");
        lua_pushlstring(L, c.file_type.data(), c.file_type.size());
        lua_setglobal(L, "file_type");
        lua_pushinteger(L, c.transfer_size);
        lua_setglobal(L, "transfer_size");
        hits += lua.call() ? 1 : 0;
    }
    benchmark::DoNotOptimize(hits);
    report(state, hits);
}

// A kinder anchor: the file_type strings created once and kept in the
// registry, so Lua does not hash the string on every evaluation.
void BM_lua_interned(benchmark::State& state) {
    LuaState lua;
    lua_State* L = lua.L;
    const auto& all = combos();
    std::vector<int> refs;
    for (const auto& c : all) {
        lua_pushlstring(L, c.file_type.data(), c.file_type.size());
        refs.push_back(luaL_ref(L, LUA_REGISTRYINDEX));
    }
    std::size_t i = 0;
    int64_t hits = 0;
    for (auto _ : state) {
        const std::size_t k = i++ & (kCombos - 1);
        const Combo& c = all[k];
        lua_pushnumber(L, c.gpu_memory);
        lua_setglobal(L, "gpu_memory");
        lua_rawgeti(L, LUA_REGISTRYINDEX, refs[k]);
        lua_setglobal(L, "file_type");
        lua_pushinteger(L, c.transfer_size);
        lua_setglobal(L, "transfer_size");
        hits += lua.call() ? 1 : 0;
    }
    benchmark::DoNotOptimize(hits);
    report(state, hits);
}

// 1,000 distinct conditions in the shape of the GPU/I/O pack's.
std::string nth_condition(int i) {
    return "gpu_memory > " + std::to_string(50 + i % 50) + " AND file_type == 'type_" + std::to_string(i) +
           "' AND (transfer_size > " + std::to_string(1 + i % 500) + "MB OR active_training)";
}

void BM_compile_1000_expressions(benchmark::State& state) {
    std::vector<std::string> texts;
    for (int i = 0; i < 1000; ++i) texts.push_back(nth_condition(i));
    for (auto _ : state) {
        auto symbols = std::make_shared<cohort::Symbols>();
        std::vector<cohort::Expression> compiled;
        compiled.reserve(texts.size());
        for (const auto& text : texts) compiled.push_back(cohort::Expression::compile(text, symbols));
        benchmark::DoNotOptimize(compiled.data());
    }
    state.counters["rules"] = 1000;
}

// A YAML rule file of 1,000 rules with those conditions.
std::string rule_file_of_1000() {
    std::string file =
        "version: 1\n"
        "allow_unhandled_actions: true\n"
        "variables: {gpu_memory: number, file_type: string, transfer_size: size, active_training: bool}\n"
        "rules:\n";
    for (int i = 0; i < 1000; ++i) {
        file += "  - id: rule_" + std::to_string(i) + "\n";
        file += "    condition: \"" + nth_condition(i) + "\"\n";
        file += "    priority: " + std::to_string(i % 100) + "\n";
        file += "    actions: [{type: reduce_prefetch, parameters: {factor: 0.5}}]\n";
    }
    return file;
}

// The whole file read by RuleSet::from_string: YAML parsed, variables
// declared, 1,000 rules checked and their conditions compiled.
void BM_load_1000_rules(benchmark::State& state) {
    const std::string file = rule_file_of_1000();
    for (auto _ : state) {
        auto rules = cohort::RuleSet::from_string(file, cohort::Format::yaml, "generated.yaml");
        benchmark::DoNotOptimize(rules.rules().data());
    }
    state.counters["rules"] = 1000;
}

// The same 1,000 rules loaded into an engine, as a program does at start
// and on every hot reload (the engine checks the set before swapping it in).
void BM_engine_load_1000_rules(benchmark::State& state) {
    const std::string file = rule_file_of_1000();
    for (auto _ : state) {
        cohort::RuleEngine engine(cohort::EngineOptions{.allow_unhandled_actions = true});
        engine.load_string(file, cohort::Format::yaml, "generated.yaml");
        benchmark::DoNotOptimize(engine.rules());
    }
    state.counters["rules"] = 1000;
}

// The whole engine on the shipped GPU/I/O pack, once per transfer: every
// rule evaluated, states stepped, the firing rules and their actions
// returned (no handlers: allow_unhandled_actions).
void BM_engine_gpu_io_pack(benchmark::State& state) {
    cohort::RuleEngine engine(cohort::EngineOptions{.allow_unhandled_actions = true});
    engine.load(std::filesystem::path(COHORT_RULES_DIR) / "gpu_io.yaml");
    auto context = engine.context();
    const auto& symbols = *engine.symbols();
    const uint32_t gpu = *symbols.find("gpu_memory");
    const uint32_t type = *symbols.find("file_type");
    const uint32_t size = *symbols.find("transfer_size");
    context.set(*symbols.find("gpu_memory_busy"), 40.0);
    context.set(*symbols.find("gpu_temperature"), 70.0);
    context.set(*symbols.find("active_training"), true);
    const auto& all = combos();
    std::size_t i = 0;
    double now = 0;
    int64_t fired = 0;
    for (auto _ : state) {
        const Combo& c = all[i++ & (kCombos - 1)];
        context.set(gpu, c.gpu_memory);
        context.set(type, std::string_view(c.file_type));
        context.set(size, c.transfer_size);
        fired += static_cast<int64_t>(engine.evaluate(context, now += 0.001).fired.size());
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
    state.counters["fired_per_eval"] = static_cast<double>(fired) / static_cast<double>(state.iterations());
}

BENCHMARK(BM_cohort);
BENCHMARK(BM_cohort_untyped);
BENCHMARK(BM_lua);
BENCHMARK(BM_lua_interned);
BENCHMARK(BM_compile_1000_expressions)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_load_1000_rules)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_engine_load_1000_rules)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_engine_gpu_io_pack);

// The console table, then the ratios the question is about.
class RatioReporter : public benchmark::ConsoleReporter {
public:
    explicit RatioReporter(OutputOptions options) : ConsoleReporter(options) {}
    void ReportRuns(const std::vector<Run>& runs) override {
        ConsoleReporter::ReportRuns(runs);
        // With --benchmark_repetitions, the median (reported last) wins.
        for (const auto& run : runs) {
            if (run.run_type == Run::RT_Aggregate && run.aggregate_name != "median") continue;
            const auto it = run.counters.find("items_per_second");
            if (it != run.counters.end()) rates_[run.run_name.str()] = it->second.value;
        }
    }
    void Finalize() override {
        ConsoleReporter::Finalize();
        const auto rate = [&](const char* name) { return rates_.count(name) != 0 ? rates_[name] : 0.0; };
        const double cohort = rate("BM_cohort");
        if (cohort <= 0) return;
        std::printf("\ncohort: %.1fM evaluations/s (target: 25M)\n", cohort / 1e6);
        if (rate("BM_lua") > 0) std::printf("cohort / lua: %.2fx (target: 2x)\n", cohort / rate("BM_lua"));
        if (rate("BM_lua_interned") > 0)
            std::printf("cohort / lua_interned: %.2fx\n", cohort / rate("BM_lua_interned"));
        if (rate("BM_cohort_untyped") > 0 && rate("BM_lua") > 0)
            std::printf("cohort_untyped / lua: %.2fx\n", rate("BM_cohort_untyped") / rate("BM_lua"));
    }

private:
    std::map<std::string, double> rates_;
};

}  // namespace

int main(int argc, char** argv) {
    const auto options = console_options(argc, argv);  // before Initialize consumes the flags
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    RatioReporter reporter(options);
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();
    return 0;
}
