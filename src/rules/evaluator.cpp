// Evaluation of compiled conditions, with three-valued logic: a missing
// variable makes what depends on it unknown, a type error makes it an error,
// and AND/OR absorb both when the other side decides (CEL's rule).
#include "rules/program.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace cohort::detail {

namespace {

const char* kind_name(RVal::Kind k) {
    switch (k) {
        case RVal::boolean: return "bool";
        case RVal::integer: return "int";
        case RVal::number: return "number";
        case RVal::string: return "string";
        case RVal::list: return "list";
        case RVal::unknown: return "unknown";
        case RVal::error: return "error";
    }
    return "?";
}

RVal fail(EvalState& state, const Program& program, const Node& at, std::string message) {
    if (state.collect && state.error.empty())
        state.error = fmt::format("{} (in '{}')", message, program.source_of(at));
    RVal r;
    r.kind = RVal::error;
    return r;
}

RVal unknown_or_error(const RVal& a, const RVal& b) {
    RVal r;
    r.kind = (a.kind == RVal::error || b.kind == RVal::error) ? RVal::error : RVal::unknown;
    return r;
}

bool undecided(const RVal& v) { return v.kind == RVal::unknown || v.kind == RVal::error; }

template <typename T>
bool apply_order(Tok op, const T& x, const T& y) {
    switch (op) {
        case Tok::eq: return x == y;
        case Tok::ne: return x != y;
        case Tok::lt: return x < y;
        case Tok::le: return x <= y;
        case Tok::gt: return x > y;
        default: return x >= y;
    }
}

RVal compare(Tok op, const RVal& a, const RVal& b, const Program& program, const Node& at, EvalState& state) {
    if (undecided(a) || undecided(b)) return unknown_or_error(a, b);
    if (a.kind == RVal::integer && b.kind == RVal::integer) return RVal::of_bool(apply_order(op, a.i, b.i));
    if (a.numeric() && b.numeric()) return RVal::of_bool(apply_order(op, a.as_double(), b.as_double()));
    if (a.kind == RVal::string && b.kind == RVal::string) return RVal::of_bool(apply_order(op, a.s, b.s));
    if (a.kind == RVal::boolean && b.kind == RVal::boolean && (op == Tok::eq || op == Tok::ne))
        return RVal::of_bool((a.b == b.b) == (op == Tok::eq));
    return fail(state, program, at,
                fmt::format("cannot compare {} {} with {} {}", kind_name(a.kind), describe(program, a), kind_name(b.kind),
                            describe(program, b)));
}

bool equal(const RVal& a, const RVal& b) {
    if (a.kind == RVal::integer && b.kind == RVal::integer) return a.i == b.i;
    if (a.numeric() && b.numeric()) return a.as_double() == b.as_double();
    if (a.kind == RVal::string && b.kind == RVal::string) return a.s == b.s;
    if (a.kind == RVal::boolean && b.kind == RVal::boolean) return a.b == b.b;
    return false;
}

std::string_view keep(EvalState& state, std::string text) {
    state.scratch.push_front(std::move(text));
    return state.scratch.front();
}

RVal arith(Tok op, const RVal& a, const RVal& b, const Program& program, const Node& at, EvalState& state) {
    if (undecided(a) || undecided(b)) return unknown_or_error(a, b);
    if (op == Tok::plus && a.kind == RVal::string && b.kind == RVal::string) {
        RVal r;
        r.kind = RVal::string;
        r.s = keep(state, std::string(a.s) + std::string(b.s));
        return r;
    }
    if (!a.numeric() || !b.numeric()) {
        return fail(state, program, at,
                    fmt::format("arithmetic needs numbers, got {} and {}", describe(program, a), describe(program, b)));
    }
    RVal r;
    if (a.kind == RVal::integer && b.kind == RVal::integer && op != Tok::slash) {
        r.kind = RVal::integer;
        // Integers are 64-bit and a result that does not fit is an error:
        // wrapping would turn a large count negative and flip a comparison.
        bool overflow = false;
        switch (op) {
            case Tok::plus: overflow = __builtin_add_overflow(a.i, b.i, &r.i); break;
            case Tok::minus: overflow = __builtin_sub_overflow(a.i, b.i, &r.i); break;
            case Tok::star: overflow = __builtin_mul_overflow(a.i, b.i, &r.i); break;
            default:
                if (b.i == 0) return fail(state, program, at, "division by zero");
                // INT64_MIN % -1 traps on x86 although its value is 0.
                r.i = b.i == -1 ? 0 : a.i % b.i;
                break;
        }
        if (overflow) {
            const char* sign = op == Tok::plus ? "+" : op == Tok::minus ? "-" : "*";
            return fail(state, program, at,
                        fmt::format("integer overflow: {} {} {} does not fit in 64 bits; write one operand as a "
                                    "decimal (1.0) to compute in floating point",
                                    a.i, sign, b.i));
        }
        return r;
    }
    r.kind = RVal::number;
    const double x = a.as_double(), y = b.as_double();
    switch (op) {
        case Tok::plus: r.d = x + y; break;
        case Tok::minus: r.d = x - y; break;
        case Tok::star: r.d = x * y; break;
        case Tok::slash:
            if (y == 0) return fail(state, program, at, "division by zero");
            r.d = x / y;
            break;
        default:
            if (y == 0) return fail(state, program, at, "division by zero");
            r.d = std::fmod(x, y);
            break;
    }
    return r;
}

RVal call(const Program& program, const Node& n, const Context& context, EvalState& state) {
    const uint32_t* args = program.children.data() + n.first;
    switch (n.fn) {
        case Fn::min:
        case Fn::max: {
            RVal best;
            for (uint32_t k = 0; k < n.count; ++k) {
                const RVal v = evaluate(program, args[k], context, state);
                if (undecided(v)) return v;
                if (!v.numeric()) return fail(state, program, n, fmt::format("{}() needs numbers, got {}", n.fn == Fn::min ? "min" : "max", describe(program, v)));
                if (k == 0 || (n.fn == Fn::min ? v.as_double() < best.as_double() : v.as_double() > best.as_double()))
                    best = v;
            }
            return best;
        }
        case Fn::abs: {
            RVal v = evaluate(program, args[0], context, state);
            if (undecided(v)) return v;
            if (v.kind == RVal::integer) {
                if (v.i == std::numeric_limits<int64_t>::min())
                    return fail(state, program, n, fmt::format("integer overflow: abs({}) does not fit in 64 bits", v.i));
                v.i = v.i < 0 ? -v.i : v.i;
            } else if (v.kind == RVal::number) v.d = std::fabs(v.d);
            else return fail(state, program, n, fmt::format("abs() needs a number, got {}", describe(program, v)));
            return v;
        }
        case Fn::len: {
            const RVal v = evaluate(program, args[0], context, state);
            if (undecided(v)) return v;
            RVal r;
            r.kind = RVal::integer;
            if (v.kind == RVal::string) r.i = static_cast<int64_t>(v.s.size());
            else if (v.kind == RVal::list) r.i = static_cast<int64_t>(program.lists[v.list_index].size());
            else return fail(state, program, n, fmt::format("len() needs a string or a list, got {}", describe(program, v)));
            return r;
        }
        case Fn::lower:
        case Fn::upper: {
            RVal v = evaluate(program, args[0], context, state);
            if (undecided(v)) return v;
            if (v.kind != RVal::string)
                return fail(state, program, n, fmt::format("{}() needs a string, got {}", n.fn == Fn::lower ? "lower" : "upper", describe(program, v)));
            std::string text(v.s);
            for (char& c : text)
                c = static_cast<char>(n.fn == Fn::lower ? std::tolower(static_cast<unsigned char>(c))
                                                        : std::toupper(static_cast<unsigned char>(c)));
            v.s = keep(state, std::move(text));
            return v;
        }
    }
    return {};
}

}  // namespace

std::string describe(const Program& program, const RVal& v) {
    switch (v.kind) {
        case RVal::unknown: return "unknown";
        case RVal::error: return "error";
        case RVal::boolean: return v.b ? "true" : "false";
        case RVal::integer: return fmt::format("{}", v.i);
        case RVal::number: return fmt::format("{}", v.d);
        case RVal::string: {
            // Headers hold binary markers: show bytes that do not print as \xNN.
            std::string out = "'";
            for (char c : v.s) {
                const auto u = static_cast<unsigned char>(c);
                if (u < 0x20 || u >= 0x7f) out += fmt::format("\\x{:02x}", u);
                else out += c;
            }
            return out + "'";
        }
        case RVal::list: {
            std::string out = "[";
            for (const RVal& item : program.lists[v.list_index]) out += (out.size() > 1 ? ", " : "") + describe(program, item);
            return out + "]";
        }
    }
    return kind_name(v.kind);
}

RVal evaluate(const Program& program, uint32_t index, const Context& context, EvalState& state) {
    const Node& n = program.nodes[index];
    switch (n.op) {
        case Op::constant: return n.constant;
        case Op::variable: {
            const Context::Slot* s = context.slot_at(n.a);
            RVal r;
            if (s == nullptr || !s->present) {
                if (state.collect && std::find(state.missing.begin(), state.missing.end(), n.a) == state.missing.end())
                    state.missing.push_back(n.a);
                return r;
            }
            switch (s->type) {
                case Type::boolean: r.kind = RVal::boolean; r.b = s->b; break;
                case Type::integer: r.kind = RVal::integer; r.i = s->i; break;
                case Type::number: r.kind = RVal::number; r.d = s->d; break;
                default: r.kind = RVal::string; r.s = s->s; break;
            }
            return r;
        }
        case Op::compare_var_num: {
            const Context::Slot* s = context.slot_at(n.a);
            if (s == nullptr || !s->present) return evaluate(program, n.b, context, state);  // the variable node
            if (s->type == Type::number) return RVal::of_bool(apply_order(n.tok, s->d, n.constant.d));
            if (s->type == Type::integer) {
                if (n.constant.kind == RVal::integer) return RVal::of_bool(apply_order(n.tok, s->i, n.constant.i));
                return RVal::of_bool(apply_order(n.tok, static_cast<double>(s->i), n.constant.d));
            }
            return compare(n.tok, evaluate(program, n.b, context, state), n.constant, program, n, state);
        }
        case Op::compare_var_str: {
            const Context::Slot* s = context.slot_at(n.a);
            if (s == nullptr || !s->present || s->type != Type::string)
                return compare(n.tok, evaluate(program, n.b, context, state), n.constant, program, n, state);
            return RVal::of_bool((std::string_view(s->s) == n.constant.s) != n.negated);
        }
        case Op::all:
        case Op::any: {
            // AND: false decides; OR: true decides. Otherwise unknown wins
            // over the other value, and an error over unknown.
            const bool decisive = n.op == Op::any;
            RVal pending = RVal::of_bool(!decisive);
            for (uint32_t k = 0; k < n.count; ++k) {
                const uint32_t child = program.children[n.first + k];
                const RVal v = evaluate(program, child, context, state);
                if (v.kind == RVal::boolean) {
                    if (v.b == decisive) return v;
                    continue;
                }
                if (v.kind == RVal::unknown) {
                    if (pending.kind != RVal::error) pending.kind = RVal::unknown;
                    continue;
                }
                if (v.kind != RVal::error)
                    fail(state, program, program.nodes[child], fmt::format("{} needs true or false, got {}", decisive ? "OR" : "AND", describe(program, v)));
                pending.kind = RVal::error;
            }
            return pending;
        }
        case Op::logical_not: {
            RVal v = evaluate(program, n.a, context, state);
            if (undecided(v)) return v;
            if (v.kind != RVal::boolean) return fail(state, program, n, fmt::format("NOT needs true or false, got {}", describe(program, v)));
            v.b = !v.b;
            return v;
        }
        case Op::negate: {
            RVal v = evaluate(program, n.a, context, state);
            if (undecided(v)) return v;
            if (v.kind == RVal::integer) {
                if (v.i == std::numeric_limits<int64_t>::min())
                    return fail(state, program, n, fmt::format("integer overflow: -({}) does not fit in 64 bits", v.i));
                v.i = -v.i;
            } else if (v.kind == RVal::number) v.d = -v.d;
            else return fail(state, program, n, fmt::format("'-' needs a number, got {}", describe(program, v)));
            return v;
        }
        case Op::arith:
            return arith(n.tok, evaluate(program, n.a, context, state), evaluate(program, n.b, context, state), program, n,
                         state);
        case Op::compare:
            return compare(n.tok, evaluate(program, n.a, context, state), evaluate(program, n.b, context, state), program,
                           n, state);
        case Op::in_list: {
            const RVal v = evaluate(program, n.a, context, state);
            if (undecided(v)) return v;
            for (const RVal& item : program.lists[n.index])
                if (equal(v, item)) return RVal::of_bool(!n.negated);
            return RVal::of_bool(n.negated);
        }
        case Op::in_items: {
            const RVal v = evaluate(program, n.a, context, state);
            if (undecided(v)) return v;
            bool unsure = false;
            for (uint32_t k = 0; k < n.count; ++k) {
                const RVal item = evaluate(program, program.children[n.first + k], context, state);
                if (undecided(item)) unsure = true;
                else if (equal(v, item)) return RVal::of_bool(!n.negated);
            }
            if (unsure) return RVal{};
            return RVal::of_bool(n.negated);
        }
        case Op::text_op: {
            const RVal a = evaluate(program, n.a, context, state);
            const RVal b = evaluate(program, n.b, context, state);
            if (undecided(a) || undecided(b)) return unknown_or_error(a, b);
            if (n.tok == Tok::kw_contains && a.kind == RVal::list) {
                for (const RVal& item : program.lists[a.list_index])
                    if (equal(item, b)) return RVal::of_bool(true);
                return RVal::of_bool(false);
            }
            if (a.kind != RVal::string || b.kind != RVal::string) {
                return fail(state, program, n, fmt::format("'{}' needs strings, got {} and {}",
                                                           n.tok == Tok::kw_contains ? "contains" : n.tok == Tok::kw_startswith ? "startswith" : "endswith",
                                                           describe(program, a), describe(program, b)));
            }
            if (n.tok == Tok::kw_contains) return RVal::of_bool(a.s.find(b.s) != std::string_view::npos);
            if (n.tok == Tok::kw_startswith) return RVal::of_bool(a.s.starts_with(b.s));
            return RVal::of_bool(a.s.ends_with(b.s));
        }
        case Op::matches: {
            const RVal a = evaluate(program, n.a, context, state);
            if (undecided(a)) return a;
            if (a.kind != RVal::string) return fail(state, program, n, fmt::format("'matches' needs a string, got {}", describe(program, a)));
            return RVal::of_bool(pattern_found(*program.regexes[n.index], a.s));
        }
        case Op::call: return call(program, n, context, state);
    }
    return {};
}

void explain(const Program& program, uint32_t index, const Context& context, int depth, std::vector<ExplainStep>& out) {
    const Node& n = program.nodes[index];
    EvalState state;
    state.collect = true;
    const RVal v = evaluate(program, index, context, state);
    std::string value = describe(program, v);
    if (v.kind == RVal::unknown && !state.missing.empty()) {
        std::string names;
        for (uint32_t slot : state.missing) names += (names.empty() ? "" : ", ") + program.symbols->name(slot);
        value += fmt::format(" ({} missing)", names);
    } else if (v.kind == RVal::error) {
        value += ": " + state.error;
    }
    out.push_back({std::string(program.source_of(n)), std::move(value), depth});
    switch (n.op) {
        case Op::all: case Op::any: case Op::in_items: case Op::call:
            if (n.op == Op::in_items) explain(program, n.a, context, depth + 1, out);
            for (uint32_t k = 0; k < n.count; ++k) explain(program, program.children[n.first + k], context, depth + 1, out);
            break;
        case Op::logical_not: case Op::negate: case Op::in_list: case Op::matches:
            explain(program, n.a, context, depth + 1, out);
            break;
        case Op::arith: case Op::compare: case Op::text_op:
            explain(program, n.a, context, depth + 1, out);
            explain(program, n.b, context, depth + 1, out);
            break;
        case Op::compare_var_num: case Op::compare_var_str:
            explain(program, n.b, context, depth + 1, out);
            break;
        default: break;
    }
}

}  // namespace cohort::detail
