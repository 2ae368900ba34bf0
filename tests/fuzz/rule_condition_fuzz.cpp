// Rule conditions (docs/rules.md): the first line is the condition; each
// further line sets a variable, NAME=VALUE as a person types it, or
// NAME*N=TEXT for TEXT repeated N times (up to 64 KiB), since `matches`
// and the string functions must stay linear on long values. The condition
// is compiled, then tested, evaluated, explained and valued.
#include "fuzz_input.hpp"

#include <cohort/expression.hpp>

#include <charconv>

namespace {

constexpr std::size_t kLongest = 64 * 1024;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    cohort::fuzz::Input in(data, size);
    const std::string_view condition = in.line();
    cohort::fuzz::expect_named_errors("condition", [&] {
        cohort::Definitions definitions;
        definitions.lists["exts"] = {cohort::Value(".pt"), cohort::Value(".bin")};
        definitions.macros["hot"] = "gpu_memory > 90";
        auto symbols = std::make_shared<cohort::Symbols>();
        const cohort::Expression expression = cohort::Expression::compile(condition, symbols, definitions, "fuzz");
        cohort::Context context = expression.context();
        while (!in.empty()) {
            const std::string_view line = in.line();
            const std::size_t eq = line.find('=');
            if (eq == std::string_view::npos) continue;
            std::string_view name = line.substr(0, eq);
            const std::string_view text = line.substr(eq + 1);
            std::size_t times = 1;
            if (const std::size_t star = name.find('*'); star != std::string_view::npos) {
                std::from_chars(name.data() + star + 1, name.data() + name.size(), times);
                name = name.substr(0, star);
            }
            if (!symbols->find(name)) continue;
            if (times > 1 && !text.empty()) {
                std::string value;
                for (std::size_t i = 0; i < times && value.size() + text.size() <= kLongest; ++i) value += text;
                cohort::fuzz::expect_named_errors("condition: set", [&] { context.set(name, cohort::Value(value)); });
            } else {
                cohort::fuzz::expect_named_errors("condition: set",
                                                  [&] { context.set(name, cohort::Value::parse(text)); });
            }
        }
        (void)expression.test(context);
        (void)expression.evaluate(context);
        (void)expression.explain(context);
        (void)expression.value(context);
    });
    return 0;
}
