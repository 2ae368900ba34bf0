// C ABI: symbol tables, compiled expressions, contexts and the rule engine.
#include "handles.hpp"
#include "rules_text.hpp"

#include <cmath>

#include <fmt/format.h>

using cohort::Errc;
using cohort::Error;
using cohort::capi::give_text;
using cohort::capi::guard;
using cohort::capi::plain_text;
using cohort::capi::require;

namespace {

// ------------------------------------------------------------ arguments

int32_t type_code(std::optional<cohort::Type> type) {
    return type ? static_cast<int32_t>(*type) : COHORT_TYPE_NONE;
}

cohort::Format rule_format(int32_t format, const char* fn) {
    if (format < COHORT_FORMAT_AUTO || format > COHORT_FORMAT_JSON) {
        throw Error(Errc::invalid_argument,
                    fmt::format("{}: format {} is not COHORT_FORMAT_AUTO, _YAML or _JSON", fn, format));
    }
    return static_cast<cohort::Format>(format);
}

// Evaluating with a context of another symbol table would read the wrong slots.
void same_table(const cohort::Context& context, const cohort::Symbols* symbols, const char* fn, const char* maker) {
    if (&context.symbols() != symbols) {
        throw Error(Errc::invalid_argument,
                    fmt::format("{}: the context belongs to another symbol table (create it with {})", fn, maker));
    }
}

const cohort_expr& checked(const cohort_expr* expr, const cohort_context* context, const char* fn) {
    require(expr, fn, "expr");
    require(context, fn, "context");
    same_table(context->impl, expr->impl.symbols().get(), fn, "cohort_context_from_expr or cohort_context_create");
    return *expr;
}

// The slot of a variable the context's symbol table knows, else NOT_FOUND.
uint32_t slot_of(const cohort::Context& context, const char* name, const char* fn) {
    auto found = context.symbols().find(name);
    if (!found) throw Error(Errc::not_found, fmt::format("{}: no condition uses a variable named '{}'", fn, name));
    return *found;
}

// The fast path checks what setting by name checks, by slot: the slot
// exists and the value fits its declared type (an int fits a number).
cohort::Context& slot_checked(cohort_context* context, uint32_t slot, cohort::Type type, const char* fn) {
    require(context, fn, "context");
    const cohort::Symbols& symbols = context->impl.symbols();
    if (slot >= symbols.size())
        throw Error(Errc::out_of_range,
                    fmt::format("{}: slot {} is past the end ({} variables)", fn, slot, symbols.size()));
    const auto declared = symbols.declared(slot);
    if (declared && *declared != type && !(*declared == cohort::Type::number && type == cohort::Type::integer)) {
        throw Error(Errc::invalid_argument,
                    fmt::format("{}: variable '{}' is declared {}, got {}", fn, symbols.name(slot),
                                cohort::to_string(*declared), cohort::to_string(type)));
    }
    return context->impl;
}

template <typename Set>
int set_named(const char* function, cohort_context* context, const char* name, Set set) {
    return guard(function, [&](const char* fn) {
        require(context, fn, "context");
        require(name, fn, "name");
        set(context->impl, name);
    });
}

}  // namespace

extern "C" {

// --------------------------------------------------------------- symbols

int cohort_symbols_create(cohort_symbols** out) {
    return guard(__func__, [&](const char* fn) {
        require(out, fn, "out");
        *out = new cohort_symbols{std::make_shared<cohort::Symbols>()};
    });
}

void cohort_symbols_destroy(cohort_symbols* symbols) {
    delete symbols;
}

int cohort_symbols_declare(cohort_symbols* symbols, const char* name, int32_t type) {
    return guard(__func__, [&](const char* fn) {
        require(symbols, fn, "symbols");
        require(name, fn, "name");
        if (type < COHORT_TYPE_BOOL || type > COHORT_TYPE_STRING)
            throw Error(Errc::invalid_argument, fmt::format("{}: type {} is not COHORT_TYPE_BOOL.._STRING", fn, type));
        symbols->impl->declare(name, static_cast<cohort::Type>(type));
    });
}

int cohort_symbols_count(const cohort_symbols* symbols, uint32_t* count) {
    return guard(__func__, [&](const char* fn) {
        require(symbols, fn, "symbols");
        require(count, fn, "count");
        *count = symbols->impl->size();
    });
}

int cohort_symbols_find(const cohort_symbols* symbols, const char* name, uint32_t* slot) {
    return guard(__func__, [&](const char* fn) {
        require(symbols, fn, "symbols");
        require(name, fn, "name");
        require(slot, fn, "slot");
        auto found = symbols->impl->find(name);
        if (!found) throw Error(Errc::not_found, fmt::format("{}: no variable '{}' in the symbol table", fn, name));
        *slot = *found;
    });
}

int cohort_symbols_name(const cohort_symbols* symbols, uint32_t slot, const char** name, int32_t* type) {
    return guard(__func__, [&](const char* fn) {
        require(symbols, fn, "symbols");
        if (slot >= symbols->impl->size()) {
            throw Error(Errc::out_of_range,
                        fmt::format("{}: slot {} is past the end ({} variables)", fn, slot, symbols->impl->size()));
        }
        if (name) *name = symbols->impl->name(slot).c_str();
        if (type) *type = type_code(symbols->impl->declared(slot));
    });
}

// ------------------------------------------------------------ expression

int cohort_expr_compile(const char* text, size_t length, cohort_symbols* symbols, cohort_expr** out) {
    return guard(__func__, [&](const char* fn) {
        require(text, fn, "text");
        require(out, fn, "out");
        auto table = symbols ? symbols->impl : std::make_shared<cohort::Symbols>();
        auto expr = cohort::Expression::compile({text, length}, std::move(table));
        auto variables = expr.variables();
        *out = new cohort_expr{std::move(expr), std::move(variables)};
    });
}

void cohort_expr_destroy(cohort_expr* expr) {
    delete expr;
}

int cohort_expr_text(const cohort_expr* expr, const char** text) {
    return guard(__func__, [&](const char* fn) {
        require(expr, fn, "expr");
        require(text, fn, "text");
        *text = expr->impl.text().c_str();
    });
}

int cohort_expr_type(const cohort_expr* expr, int32_t* type) {
    return guard(__func__, [&](const char* fn) {
        require(expr, fn, "expr");
        require(type, fn, "type");
        *type = type_code(expr->impl.type());
    });
}

int cohort_expr_variable_count(const cohort_expr* expr, uint32_t* count) {
    return guard(__func__, [&](const char* fn) {
        require(expr, fn, "expr");
        require(count, fn, "count");
        *count = static_cast<uint32_t>(expr->variables.size());
    });
}

int cohort_expr_variable(const cohort_expr* expr, uint32_t index, const char** name) {
    return guard(__func__, [&](const char* fn) {
        require(expr, fn, "expr");
        require(name, fn, "name");
        if (index >= expr->variables.size()) {
            throw Error(Errc::out_of_range, fmt::format("{}: variable {} is past the end ({} variables)", fn, index,
                                                        expr->variables.size()));
        }
        *name = expr->variables[index].c_str();
    });
}

int cohort_expr_test(const cohort_expr* expr, const cohort_context* context, int32_t* truth) {
    return guard(__func__, [&](const char* fn) {
        const cohort_expr& e = checked(expr, context, fn);
        require(truth, fn, "truth");
        *truth = static_cast<int32_t>(e.impl.test(context->impl));
    });
}

int cohort_expr_evaluate(const cohort_expr* expr, const cohort_context* context, int32_t* truth, char** json,
                         size_t* length) {
    return guard(__func__, [&](const char* fn) {
        const cohort_expr& e = checked(expr, context, fn);
        require(truth, fn, "truth");
        const cohort::Outcome outcome = e.impl.evaluate(context->impl);
        if (json) give_text(cohort::to_json(outcome), json, length);
        *truth = static_cast<int32_t>(outcome.truth);
    });
}

int cohort_expr_value(const cohort_expr* expr, const cohort_context* context, int32_t* type, char** text,
                      size_t* length) {
    return guard(__func__, [&](const char* fn) {
        const cohort_expr& e = checked(expr, context, fn);
        require(type, fn, "type");
        const cohort::Value value = e.impl.value(context->impl);
        if (text) give_text(plain_text(value), text, length);
        *type = type_code(value.type());
    });
}

int cohort_expr_explain(const cohort_expr* expr, const cohort_context* context, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        const cohort_expr& e = checked(expr, context, fn);
        require(json, fn, "json");
        give_text(cohort::to_json(e.impl.explain(context->impl)), json, length);
    });
}

// --------------------------------------------------------------- context

int cohort_context_create(const cohort_symbols* symbols, cohort_context** out) {
    return guard(__func__, [&](const char* fn) {
        require(symbols, fn, "symbols");
        require(out, fn, "out");
        *out = new cohort_context{cohort::Context(symbols->impl)};
    });
}

int cohort_context_from_expr(const cohort_expr* expr, cohort_context** out) {
    return guard(__func__, [&](const char* fn) {
        require(expr, fn, "expr");
        require(out, fn, "out");
        *out = new cohort_context{expr->impl.context()};
    });
}

int cohort_context_from_rules(const cohort_rules* rules, cohort_context** out) {
    return guard(__func__, [&](const char* fn) {
        require(rules, fn, "rules");
        require(out, fn, "out");
        *out = new cohort_context{rules->impl.context()};
    });
}

void cohort_context_destroy(cohort_context* context) {
    delete context;
}

int cohort_context_set_bool(cohort_context* context, const char* name, int32_t value) {
    return set_named(__func__, context, name, [&](cohort::Context& c, const char* n) { c.set(n, value != 0); });
}

int cohort_context_set_int(cohort_context* context, const char* name, int64_t value) {
    return set_named(__func__, context, name, [&](cohort::Context& c, const char* n) { c.set(n, value); });
}

int cohort_context_set_number(cohort_context* context, const char* name, double value) {
    return set_named(__func__, context, name, [&](cohort::Context& c, const char* n) { c.set(n, value); });
}

int cohort_context_set_string(cohort_context* context, const char* name, const char* value, size_t length) {
    return guard(__func__, [&](const char* fn) {
        require(context, fn, "context");
        require(name, fn, "name");
        if (value == nullptr && length != 0) require(value, fn, "value");
        context->impl.set(name, cohort::Value(std::string(value ? value : "", length)));
    });
}

int cohort_context_set_text(cohort_context* context, const char* name, const char* text) {
    return guard(__func__, [&](const char* fn) {
        require(context, fn, "context");
        require(name, fn, "name");
        require(text, fn, "text");
        context->impl.set(name, cohort::Value::parse(text));
    });
}

int cohort_context_slot(const cohort_context* context, const char* name, uint32_t* slot) {
    return guard(__func__, [&](const char* fn) {
        require(context, fn, "context");
        require(name, fn, "name");
        require(slot, fn, "slot");
        *slot = slot_of(context->impl, name, fn);
    });
}

int cohort_context_set_bool_at(cohort_context* context, uint32_t slot, int32_t value) {
    return guard(__func__,
                 [&](const char* fn) { slot_checked(context, slot, cohort::Type::boolean, fn).set(slot, value != 0); });
}

int cohort_context_set_int_at(cohort_context* context, uint32_t slot, int64_t value) {
    return guard(__func__, [&](const char* fn) {
        cohort::Context& c = slot_checked(context, slot, cohort::Type::integer, fn);
        const auto declared = c.symbols().declared(slot);
        if (declared.has_value() && *declared == cohort::Type::number)
            c.set(slot, static_cast<double>(value));
        else
            c.set(slot, value);
    });
}

int cohort_context_set_number_at(cohort_context* context, uint32_t slot, double value) {
    return guard(__func__,
                 [&](const char* fn) { slot_checked(context, slot, cohort::Type::number, fn).set(slot, value); });
}

int cohort_context_set_string_at(cohort_context* context, uint32_t slot, const char* value, size_t length) {
    return guard(__func__, [&](const char* fn) {
        cohort::Context& c = slot_checked(context, slot, cohort::Type::string, fn);
        if (value == nullptr && length != 0) require(value, fn, "value");
        c.set(slot, std::string_view(value ? value : "", length));
    });
}

int cohort_context_unset(cohort_context* context, const char* name) {
    return guard(__func__, [&](const char* fn) {
        require(context, fn, "context");
        require(name, fn, "name");
        slot_of(context->impl, name, fn);
        context->impl.unset(name);
    });
}

int cohort_context_clear(cohort_context* context) {
    return guard(__func__, [&](const char* fn) {
        require(context, fn, "context");
        context->impl.clear();
    });
}

int cohort_context_get(const cohort_context* context, const char* name, int32_t* type, char** text, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(context, fn, "context");
        require(name, fn, "name");
        require(type, fn, "type");
        slot_of(context->impl, name, fn);
        const cohort::Value value = context->impl.get(name);
        if (text) give_text(plain_text(value), text, length);
        *type = type_code(value.type());
    });
}

// ----------------------------------------------------------------- rules

int cohort_rules_create(uint32_t flags, cohort_rules** out) {
    return guard(__func__, [&](const char* fn) {
        require(out, fn, "out");
        if ((flags & ~COHORT_RULES_ALLOW_UNHANDLED) != 0)
            throw Error(Errc::invalid_argument, fmt::format("{}: flags {:#x} has unknown bits", fn, flags));
        cohort::EngineOptions options;
        options.allow_unhandled_actions = (flags & COHORT_RULES_ALLOW_UNHANDLED) != 0;
        *out = new cohort_rules{cohort::RuleEngine(options)};
    });
}

void cohort_rules_destroy(cohort_rules* rules) {
    delete rules;
}

int cohort_rules_on(cohort_rules* rules, const char* action_type, cohort_action_fn fn_ptr, void* user_data) {
    return guard(__func__, [&](const char* fn) {
        require(rules, fn, "rules");
        require(action_type, fn, "action_type");
        if (fn_ptr == nullptr) throw Error(Errc::invalid_argument, fmt::format("{}: fn must not be NULL", fn));
        if (*action_type == '\0') throw Error(Errc::invalid_argument, fmt::format("{}: action_type is empty", fn));
        // A non-zero status becomes the engine's handler error for this
        // action (the other handlers still run), as a throwing C++ handler's would.
        rules->impl.on(action_type, [fn_ptr, user_data](const cohort::Firing& firing, const cohort::Action& action) {
            std::string parameters = "{";
            for (const auto& [name, value] : action.parameters) {
                if (parameters.size() > 1) parameters += ',';
                parameters += cohort::to_json(cohort::Value(name)) + ':' + cohort::to_json(value);
            }
            parameters += '}';
            const int32_t status = fn_ptr(user_data, firing.rule.c_str(), firing.priority, action.type.c_str(),
                                          action.target.c_str(), parameters.c_str());
            if (status != 0) {
                throw Error(Errc::callback, fmt::format("it returned {}{}", status,
                                                        action.target.empty() ? "" : fmt::format(" (target '{}')", action.target)));
            }
        });
    });
}

int cohort_rules_reload_file(cohort_rules* rules, const char* path) {
    return guard(__func__, [&](const char* fn) {
        require(rules, fn, "rules");
        require(path, fn, "path");
        rules->impl.load(std::filesystem::path(path));
    });
}

int cohort_rules_reload_string(cohort_rules* rules, const char* text, size_t length, int32_t format,
                               const char* source_name) {
    return guard(__func__, [&](const char* fn) {
        require(rules, fn, "rules");
        require(text, fn, "text");
        rules->impl.load_string({text, length}, rule_format(format, fn), source_name ? source_name : "<string>");
    });
}

int cohort_rules_evaluate(cohort_rules* rules, const cohort_context* context, double now, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(rules, fn, "rules");
        require(context, fn, "context");
        same_table(context->impl, rules->impl.symbols().get(), fn, "cohort_context_from_rules");
        if (!std::isfinite(now))
            throw Error(Errc::invalid_argument, fmt::format("{}: now must be finite, got {}", fn, now));
        const cohort::Evaluation evaluation = rules->impl.evaluate(context->impl, now);
        if (json) give_text(cohort::to_json(evaluation, now), json, length);
    });
}

int cohort_rules_explain(const cohort_rules* rules, const char* rule, const cohort_context* context, char** json,
                         size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(rules, fn, "rules");
        require(rule, fn, "rule");
        require(context, fn, "context");
        require(json, fn, "json");
        same_table(context->impl, rules->impl.symbols().get(), fn, "cohort_context_from_rules");
        give_text(cohort::to_json(rules->impl.explain(rule, context->impl)), json, length);
    });
}

int cohort_rules_state(const cohort_rules* rules, const char* rule, int32_t* state) {
    return guard(__func__, [&](const char* fn) {
        require(rules, fn, "rules");
        require(rule, fn, "rule");
        require(state, fn, "state");
        *state = static_cast<int32_t>(rules->impl.state(rule));
    });
}

int cohort_rules_count(const cohort_rules* rules, uint32_t* count) {
    return guard(__func__, [&](const char* fn) {
        require(rules, fn, "rules");
        require(count, fn, "count");
        const cohort::RuleSet* set = rules->impl.rules();
        *count = set ? static_cast<uint32_t>(set->rules().size()) : 0;
    });
}

int cohort_rules_rule_id(const cohort_rules* rules, uint32_t index, const char** id) {
    return guard(__func__, [&](const char* fn) {
        require(rules, fn, "rules");
        require(id, fn, "id");
        const cohort::RuleSet* set = rules->impl.rules();
        const size_t count = set ? set->rules().size() : 0;
        if (index >= count)
            throw Error(Errc::out_of_range, fmt::format("{}: rule {} is past the end ({} rules)", fn, index, count));
        *id = set->rules()[index].id.c_str();
    });
}

int cohort_rules_describe(const cohort_rules* rules, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(rules, fn, "rules");
        require(json, fn, "json");
        give_text(rules->impl.rules()
                      ? cohort::to_json(*rules->impl.rules())
                      : std::string(R"({"rules":[],"variables":{},"warnings":[],"allow_unhandled_actions":false})"),
                  json, length);
    });
}

int cohort_rules_check_file(const char* path, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(path, fn, "path");
        require(json, fn, "json");
        const cohort::RuleSet set = cohort::RuleSet::from_file(path);
        give_text(cohort::to_json(set), json, length);
    });
}

int cohort_rules_check_string(const char* text, size_t length, int32_t format, const char* source_name, char** json,
                              size_t* json_length) {
    return guard(__func__, [&](const char* fn) {
        require(text, fn, "text");
        require(json, fn, "json");
        const cohort::RuleSet set = cohort::RuleSet::from_string({text, length}, rule_format(format, fn),
                                                                 source_name ? source_name : "<string>");
        give_text(cohort::to_json(set), json, json_length);
    });
}

}  // extern "C"
