// The public face of compiled conditions.
#include <cohort/error.hpp>
#include <cohort/expression.hpp>

#include "rules/compiler.hpp"
#include "rules/program.hpp"

namespace cohort {

struct Expression::Program : detail::Program {};

namespace {

Value to_value(const detail::RVal& v) {
    switch (v.kind) {
        case detail::RVal::boolean: return Value(v.b);
        case detail::RVal::integer: return Value(v.i);
        case detail::RVal::number: return Value(v.d);
        case detail::RVal::string: return Value(std::string(v.s));
        default: return {};
    }
}

}  // namespace

Expression Expression::compile(std::string_view text, std::shared_ptr<Symbols> symbols, const Definitions& definitions,
                               std::string_view source) {
    if (!symbols) throw Error(Errc::invalid_argument, "Expression::compile: symbols must not be null");
    auto program = std::make_unique<Program>();
    program->texts.emplace_back(text);
    program->symbols = std::move(symbols);
    detail::compile_program(*program, definitions, source);
    return Expression(std::move(program));
}

Expression Expression::compile(std::string_view text) { return compile(text, std::make_shared<Symbols>()); }

Expression::Expression(std::unique_ptr<Program> program) : program_(std::move(program)) {}
Expression::Expression(Expression&&) noexcept = default;
Expression& Expression::operator=(Expression&&) noexcept = default;
Expression::~Expression() = default;

Truth Expression::test(const Context& context) const {
    // Default-constructed state allocates nothing; only lower(), upper() and
    // string + string put anything in it.
    detail::EvalState state;
    const detail::RVal v = detail::evaluate(*program_, program_->root, context, state);
    if (v.kind == detail::RVal::boolean) return v.b ? Truth::yes : Truth::no;
    return Truth::unknown;
}

Outcome Expression::evaluate(const Context& context) const {
    detail::EvalState state;
    state.collect = true;
    const detail::RVal v = detail::evaluate(*program_, program_->root, context, state);
    Outcome out;
    if (v.kind == detail::RVal::boolean) {
        out.truth = v.b ? Truth::yes : Truth::no;
        return out;
    }
    if (v.kind == detail::RVal::error) {
        out.error = state.error;
    } else if (v.kind == detail::RVal::unknown) {
        for (uint32_t slot : state.missing) out.missing.push_back(program_->symbols->name(slot));
    } else {
        out.error = "the condition is " + detail::describe(*program_, v) + ", not true or false";
    }
    return out;
}

Value Expression::value(const Context& context) const {
    detail::EvalState state;
    return to_value(detail::evaluate(*program_, program_->root, context, state));
}

std::vector<ExplainStep> Expression::explain(const Context& context) const {
    std::vector<ExplainStep> steps;
    detail::explain(*program_, program_->root, context, 0, steps);
    return steps;
}

const std::string& Expression::text() const { return program_->texts[0]; }
std::optional<Type> Expression::type() const { return program_->nodes[program_->root].type; }

std::vector<std::string> Expression::variables() const {
    std::vector<std::string> names;
    for (uint32_t slot : program_->variables) names.push_back(program_->symbols->name(slot));
    return names;
}

const std::shared_ptr<Symbols>& Expression::symbols() const { return program_->symbols; }
Context Expression::context() const { return Context(program_->symbols); }

}  // namespace cohort
