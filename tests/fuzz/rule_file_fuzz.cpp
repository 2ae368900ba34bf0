// Rule files (docs/rules.md): YAML or JSON with macros, lists, templates
// and includes, loaded into an engine that then evaluates the rules once
// against an empty context. Includes resolve against the working
// directory, which the harness makes an empty scratch directory.
#include "fuzz_input.hpp"

#include <cohort/rules.hpp>

#include <unistd.h>

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    if (::chdir(cohort::fuzz::scratch_directory().c_str()) != 0) return 1;
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    // An include of a device or of /proc reads without end; an operator's
    // own rule file is trusted not to do that.
    for (const std::string_view special : {"/dev", "/proc", "/sys"}) {
        if (text.find(special) != std::string_view::npos) return 0;
    }
    cohort::fuzz::expect_named_errors("rule file", [&] {
        cohort::RuleEngine engine(cohort::EngineOptions{.allow_unhandled_actions = true});
        engine.load_string(text, cohort::Format::automatic, "fuzz.yaml");
        const cohort::Context context = engine.context();
        (void)engine.evaluate(context, 0.0);
        (void)engine.evaluate(context, 100.0);
        (void)cohort::to_json(*engine.rules());
    });
    return 0;
}
