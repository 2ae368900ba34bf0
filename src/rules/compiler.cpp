// From syntax tree to program: names resolved (macros expanded, lists and
// variables bound to slots), types checked where known, constants folded,
// and variable-versus-constant comparisons specialised.
#include "rules/compiler.hpp"

#include "core/text.hpp"
#include "rules/parser.hpp"

#include <cohort/error.hpp>

#include <algorithm>

#include <fmt/format.h>

namespace cohort::detail {

namespace {

struct FnInfo {
    std::string_view name;
    Fn fn;
    uint32_t min_args, max_args;
};
constexpr FnInfo kFunctions[] = {{"min", Fn::min, 1, 64}, {"max", Fn::max, 1, 64},  {"abs", Fn::abs, 1, 1},
                                 {"len", Fn::len, 1, 1},  {"lower", Fn::lower, 1, 1}, {"upper", Fn::upper, 1, 1}};

bool is_numeric(std::optional<Type> t) { return t == Type::integer || t == Type::number; }

Tok mirror(Tok op) {
    switch (op) {
        case Tok::lt: return Tok::gt;
        case Tok::le: return Tok::ge;
        case Tok::gt: return Tok::lt;
        case Tok::ge: return Tok::le;
        default: return op;
    }
}

std::string_view op_text(Tok op) {
    switch (op) {
        case Tok::eq: return "==";
        case Tok::ne: return "!=";
        case Tok::lt: return "<";
        case Tok::le: return "<=";
        case Tok::gt: return ">";
        case Tok::ge: return ">=";
        case Tok::plus: return "+";
        case Tok::minus: return "-";
        case Tok::star: return "*";
        case Tok::slash: return "/";
        case Tok::percent: return "%";
        case Tok::kw_in: return "in";
        case Tok::kw_matches: return "matches";
        case Tok::kw_contains: return "contains";
        case Tok::kw_startswith: return "startswith";
        case Tok::kw_endswith: return "endswith";
        default: return "?";
    }
}

class Compiler {
public:
    Compiler(Program& program, const Definitions& definitions, std::string_view source)
        : p_(program), defs_(definitions), source_(source) {}

    uint32_t compile_text(uint32_t text) {
        const uint32_t saved = text_;
        text_ = text;
        auto ast = parse(p_.texts[text], source_for(text));
        const uint32_t root = compile(*ast);
        text_ = saved;
        return root;
    }

private:
    std::string source_for(uint32_t text) const {
        if (text == 0) return std::string(source_);
        std::string where = fmt::format("in macro '{}'", macro_names_[text]);
        return source_.empty() ? where : fmt::format("{}: {}", source_, where);
    }
    [[noreturn]] void fail(const Ast& at, std::string_view message) {
        fail_at(p_.texts[text_], source_for(text_), at.begin, message);
    }

    uint32_t add(Node n, const Ast& from) {
        n.text = text_;
        n.begin = from.begin;
        n.end = from.end;
        p_.nodes.push_back(n);
        return static_cast<uint32_t>(p_.nodes.size() - 1);
    }
    Node& at(uint32_t index) { return p_.nodes[index]; }

    uint32_t constant(RVal value, std::optional<Type> type, const Ast& from) {
        Node n;
        n.op = Op::constant;
        n.constant = value;
        n.type = type;
        return add(n, from);
    }
    RVal string_value(std::string text) {
        p_.strings.push_back(std::move(text));
        RVal r;
        r.kind = RVal::string;
        r.s = p_.strings.back();
        return r;
    }
    RVal from_value(const Value& v) {
        RVal r;
        switch (*v.type()) {
            case Type::boolean: return RVal::of_bool(v.as_bool());
            case Type::integer: r.kind = RVal::integer; r.i = v.as_int(); return r;
            case Type::number: r.kind = RVal::number; r.d = v.as_number(); return r;
            default: return string_value(v.as_string());
        }
    }
    static std::optional<Type> type_of(const RVal& v) {
        switch (v.kind) {
            case RVal::boolean: return Type::boolean;
            case RVal::integer: return Type::integer;
            case RVal::number: return Type::number;
            case RVal::string: return Type::string;
            case RVal::list: return Type::list;
            default: return std::nullopt;
        }
    }

    // Folds a node whose operands are all constants into a constant.
    uint32_t fold(uint32_t index, const Ast& from) {
        EvalState state;
        state.collect = true;
        const RVal v = evaluate(p_, index, Context(p_.symbols), state);
        if (v.kind == RVal::error) fail(from, state.error.empty() ? "cannot evaluate" : state.error);
        if (v.kind == RVal::unknown) return index;
        // Strings made while folding live in the state's scratch: copy them.
        RVal kept = v.kind == RVal::string ? string_value(std::string(v.s)) : v;
        p_.nodes.resize(index);  // drop the folded node (its operands stay unused)
        return constant(kept, type_of(kept), from);
    }
    bool is_constant(uint32_t index) const { return p_.nodes[index].op == Op::constant; }

    uint32_t compile(const Ast& ast) {
        switch (ast.kind) {
            case Ast::Kind::integer: {
                RVal r;
                r.kind = RVal::integer;
                r.i = ast.integer;
                return constant(r, Type::integer, ast);
            }
            case Ast::Kind::number: {
                RVal r;
                r.kind = RVal::number;
                r.d = ast.number;
                return constant(r, Type::number, ast);
            }
            case Ast::Kind::string: return constant(string_value(ast.text), Type::string, ast);
            case Ast::Kind::boolean: return constant(RVal::of_bool(ast.boolean), Type::boolean, ast);
            case Ast::Kind::list: return compile_list(ast);
            case Ast::Kind::name: return compile_name(ast);
            case Ast::Kind::call: return compile_call(ast);
            case Ast::Kind::logical_not: {
                Node n;
                n.op = Op::logical_not;
                n.a = compile(*ast.children[0]);
                expect_bool(n.a, *ast.children[0], "NOT");
                n.type = Type::boolean;
                const uint32_t index = add(n, ast);
                return is_constant(n.a) ? fold(index, ast) : index;
            }
            case Ast::Kind::negate: {
                Node n;
                n.op = Op::negate;
                n.a = compile(*ast.children[0]);
                const auto t = at(n.a).type;
                if (t && !is_numeric(t)) fail(ast, fmt::format("'-' needs a number, got {}", to_string(*t)));
                n.type = t;
                const uint32_t index = add(n, ast);
                return is_constant(n.a) ? fold(index, ast) : index;
            }
            case Ast::Kind::all:
            case Ast::Kind::any: return compile_logical(ast);
            case Ast::Kind::binary: return compile_binary(ast);
        }
        fail(ast, "unsupported expression");
    }

    void expect_bool(uint32_t index, const Ast& from, std::string_view what) {
        const auto t = at(index).type;
        if (t && *t != Type::boolean) fail(from, fmt::format("{} needs true or false, got {}", what, to_string(*t)));
    }

    uint32_t compile_logical(const Ast& ast) {
        const bool is_and = ast.kind == Ast::Kind::all;
        std::vector<uint32_t> kids;
        for (const auto& child : ast.children) {
            const uint32_t k = compile(*child);
            expect_bool(k, *child, is_and ? "AND" : "OR");
            // A constant that decides the whole chain; one that does not is dropped.
            if (is_constant(k) && at(k).constant.kind == RVal::boolean) {
                if (at(k).constant.b != is_and) return constant(RVal::of_bool(!is_and), Type::boolean, ast);
                continue;
            }
            kids.push_back(k);
        }
        if (kids.empty()) return constant(RVal::of_bool(is_and), Type::boolean, ast);
        Node n;
        n.op = is_and ? Op::all : Op::any;
        n.type = Type::boolean;
        n.first = static_cast<uint32_t>(p_.children.size());
        n.count = static_cast<uint32_t>(kids.size());
        p_.children.insert(p_.children.end(), kids.begin(), kids.end());
        return add(n, ast);
    }

    uint32_t compile_list(const Ast& ast) {
        std::vector<uint32_t> items;
        bool all_constant = true;
        for (const auto& child : ast.children) {
            items.push_back(compile(*child));
            all_constant = all_constant && is_constant(items.back());
        }
        if (all_constant) {
            std::vector<RVal> values;
            for (uint32_t i : items) values.push_back(at(i).constant);
            return list_constant(std::move(values), ast);
        }
        Node n;  // an in_items node without its left side; compile_binary fills it
        n.op = Op::in_items;
        n.type = Type::list;
        n.first = static_cast<uint32_t>(p_.children.size());
        n.count = static_cast<uint32_t>(items.size());
        p_.children.insert(p_.children.end(), items.begin(), items.end());
        return add(n, ast);
    }
    uint32_t list_constant(std::vector<RVal> values, const Ast& from) {
        p_.lists.push_back(std::move(values));
        RVal r;
        r.kind = RVal::list;
        r.list_index = static_cast<uint32_t>(p_.lists.size() - 1);
        return constant(r, Type::list, from);
    }

    uint32_t compile_name(const Ast& ast) {
        const std::string& name = ast.text;
        if (auto macro = defs_.macros.find(name); macro != defs_.macros.end()) {
            if (std::find(expanding_.begin(), expanding_.end(), name) != expanding_.end()) {
                std::string chain;
                for (const auto& m : expanding_) chain += m + " -> ";
                fail(ast, fmt::format("macro '{}' uses itself ({}{})", name, chain, name));
            }
            expanding_.push_back(name);
            p_.texts.push_back(macro->second);
            const auto text = static_cast<uint32_t>(p_.texts.size() - 1);
            macro_names_.resize(p_.texts.size());
            macro_names_[text] = name;
            const uint32_t root = compile_text(text);
            expanding_.pop_back();
            return root;
        }
        if (auto list = defs_.lists.find(name); list != defs_.lists.end()) {
            std::vector<RVal> values;
            for (const Value& v : list->second) values.push_back(from_value(v));
            return list_constant(std::move(values), ast);
        }
        auto known = p_.symbols->find(name);
        if (defs_.declared_only && (!known || !p_.symbols->declared(*known))) {
            std::vector<std::string_view> candidates;
            for (uint32_t s = 0; s < p_.symbols->size(); ++s)
                if (p_.symbols->declared(s)) candidates.push_back(p_.symbols->name(s));
            for (const auto& [m, body] : defs_.macros) candidates.push_back(m);
            for (const auto& [l, items] : defs_.lists) candidates.push_back(l);
            std::string message = fmt::format("unknown variable '{}'", name);
            if (auto near = closest_word(name, candidates)) message += fmt::format(" (did you mean '{}'?)", *near);
            else message += " (declare it under 'variables')";
            fail(ast, message);
        }
        Node n;
        n.op = Op::variable;
        n.a = p_.symbols->slot(name);
        n.type = p_.symbols->declared(n.a);
        if (std::find(p_.variables.begin(), p_.variables.end(), n.a) == p_.variables.end()) p_.variables.push_back(n.a);
        return add(n, ast);
    }

    uint32_t compile_call(const Ast& ast) {
        const FnInfo* info = nullptr;
        for (const FnInfo& f : kFunctions)
            if (f.name == ast.text) info = &f;
        if (info == nullptr) {
            std::vector<std::string_view> names;
            for (const FnInfo& f : kFunctions) names.push_back(f.name);
            std::string message = fmt::format("unknown function '{}'", ast.text);
            if (auto near = closest_word(ast.text, names)) message += fmt::format(" (did you mean '{}'?)", *near);
            else message += " (functions: min, max, abs, len, lower, upper)";
            fail(ast, message);
        }
        const auto argc = static_cast<uint32_t>(ast.children.size());
        if (argc < info->min_args || argc > info->max_args) {
            fail(ast, info->min_args == info->max_args
                          ? fmt::format("{}() takes {} argument, got {}", info->name, info->min_args, argc)
                          : fmt::format("{}() takes at least {} argument, got {}", info->name, info->min_args, argc));
        }
        std::vector<uint32_t> args;
        bool all_constant = true;
        for (const auto& child : ast.children) {
            args.push_back(compile(*child));
            all_constant = all_constant && is_constant(args.back());
            const auto t = at(args.back()).type;
            const bool wants_number = info->fn == Fn::min || info->fn == Fn::max || info->fn == Fn::abs;
            const bool wants_string = info->fn == Fn::lower || info->fn == Fn::upper;
            if (t && wants_number && !is_numeric(t))
                fail(*child, fmt::format("{}() needs numbers, got {}", info->name, to_string(*t)));
            if (t && wants_string && *t != Type::string)
                fail(*child, fmt::format("{}() needs a string, got {}", info->name, to_string(*t)));
            if (t && info->fn == Fn::len && *t != Type::string && *t != Type::list)
                fail(*child, fmt::format("len() needs a string or a list, got {}", to_string(*t)));
        }
        Node n;
        n.op = Op::call;
        n.fn = info->fn;
        n.first = static_cast<uint32_t>(p_.children.size());
        n.count = argc;
        p_.children.insert(p_.children.end(), args.begin(), args.end());
        switch (info->fn) {
            case Fn::len: n.type = Type::integer; break;
            case Fn::lower: case Fn::upper: n.type = Type::string; break;
            case Fn::abs: n.type = at(args[0]).type; break;
            default: {
                bool all_int = true;
                for (uint32_t a : args) all_int = all_int && at(a).type == Type::integer;
                n.type = all_int ? std::optional<Type>(Type::integer) : std::nullopt;
            }
        }
        const uint32_t index = add(n, ast);
        return all_constant ? fold(index, ast) : index;
    }

    uint32_t compile_binary(const Ast& ast) {
        const Tok op = ast.op;
        uint32_t a = compile(*ast.children[0]);
        uint32_t b = compile(*ast.children[1]);
        const auto ta = at(a).type, tb = at(b).type;
        Node n;
        n.tok = op;
        n.a = a;
        n.b = b;
        switch (op) {
            case Tok::plus: case Tok::minus: case Tok::star: case Tok::slash: case Tok::percent: {
                const bool concat = op == Tok::plus && ta == Type::string && tb == Type::string;
                if (!concat && ((ta && !is_numeric(ta)) || (tb && !is_numeric(tb)))) {
                    fail(ast, fmt::format("'{}' needs numbers, got {} and {}", op_text(op), ta ? to_string(*ta) : "a value",
                                          tb ? to_string(*tb) : "a value"));
                }
                n.op = Op::arith;
                n.type = concat ? std::optional<Type>(Type::string)
                         : (op != Tok::slash && ta == Type::integer && tb == Type::integer) ? std::optional<Type>(Type::integer)
                         : (ta && tb) ? std::optional<Type>(Type::number) : std::nullopt;
                break;
            }
            case Tok::eq: case Tok::ne: case Tok::lt: case Tok::le: case Tok::gt: case Tok::ge: {
                if (ta && tb && !(ta == tb || (is_numeric(ta) && is_numeric(tb)))) {
                    fail(ast, fmt::format("cannot compare {} with {} using '{}'", to_string(*ta), to_string(*tb), op_text(op)));
                }
                const auto t = ta ? ta : tb;
                if ((t == Type::boolean || t == Type::list) && op != Tok::eq && op != Tok::ne)
                    fail(ast, fmt::format("'{}' does not order {} values", op_text(op), to_string(*t)));
                n.op = Op::compare;
                n.type = Type::boolean;
                return specialise(n, ast);
            }
            case Tok::kw_in: {
                if (at(b).op == Op::in_items) {
                    // `x in [a, y]`: the list node becomes the membership test.
                    Node& list = at(b);
                    list.a = a;
                    list.negated = ast.negated;
                    list.type = Type::boolean;
                    list.begin = ast.begin;
                    return b;
                }
                if (tb && *tb != Type::list) fail(*ast.children[1], fmt::format("'in' needs a list on its right, got {}", to_string(*tb)));
                if (!is_constant(b)) fail(*ast.children[1], "'in' needs a list on its right: [a, b] or a named list");
                n.op = Op::in_list;
                n.index = at(b).constant.list_index;
                n.negated = ast.negated;
                n.type = Type::boolean;
                break;
            }
            case Tok::kw_matches: {
                if (!is_constant(b) || at(b).constant.kind != RVal::string)
                    fail(*ast.children[1], "'matches' needs a constant string pattern on its right");
                if (ta && *ta != Type::string) fail(ast, fmt::format("'matches' needs a string on its left, got {}", to_string(*ta)));
                p_.regexes.push_back(pattern(at(b).constant.s, *ast.children[1]));
                n.op = Op::matches;
                n.index = static_cast<uint32_t>(p_.regexes.size() - 1);
                n.type = Type::boolean;
                break;
            }
            default: {  // contains, startswith, endswith
                const bool list_contains = op == Tok::kw_contains && ta == Type::list;
                if (!list_contains && ((ta && *ta != Type::string) || (tb && *tb != Type::string))) {
                    fail(ast, fmt::format("'{}' needs strings, got {} and {}", op_text(op), ta ? to_string(*ta) : "a value",
                                          tb ? to_string(*tb) : "a value"));
                }
                n.op = Op::text_op;
                n.type = Type::boolean;
                break;
            }
        }
        const uint32_t index = add(n, ast);
        return is_constant(a) && (is_constant(b) || n.op == Op::in_list || n.op == Op::matches) ? fold(index, ast) : index;
    }

    // The compiled pattern, or a compile error with the caret on the part of
    // the pattern at fault when the pattern is written as one literal.
    std::unique_ptr<const RE2> pattern(std::string_view text, const Ast& from) {
        PatternError error;
        auto re = compile_pattern(text, error);
        if (re) return re;
        const std::string_view source = p_.texts[text_];
        const bool literal = from.kind == Ast::Kind::string && from.begin < source.size() &&
                             (source[from.begin] == '\'' || source[from.begin] == '"');
        fail_at(source, source_for(text_),
                literal ? string_source_offset(source, from.begin, error.offset) : from.begin,
                fmt::format("bad regular expression: {}", error.message));
    }

    // A variable compared with a constant gets a node that reads the slot
    // directly; two constants fold.
    uint32_t specialise(Node n, const Ast& ast) {
        uint32_t var = n.a, value = n.b;
        Tok op = n.tok;
        if (is_constant(n.a) && is_constant(n.b)) return fold(add(n, ast), ast);
        if (is_constant(n.a) && at(n.b).op == Op::variable) {
            std::swap(var, value);
            op = mirror(op);
        }
        if (at(var).op == Op::variable && is_constant(value)) {
            const RVal& c = at(value).constant;
            if (c.numeric()) {
                n.op = Op::compare_var_num;
                n.tok = op;
                n.a = at(var).a;  // the slot
                n.b = var;        // the variable node, for unknowns and explain
                n.constant = c;
                if (c.kind == RVal::integer) n.constant.d = static_cast<double>(c.i);
                return add(n, ast);
            }
            if (c.kind == RVal::string && (op == Tok::eq || op == Tok::ne)) {
                n.op = Op::compare_var_str;
                n.tok = op;
                n.negated = op == Tok::ne;
                n.a = at(var).a;
                n.b = var;
                n.constant = c;
                return add(n, ast);
            }
        }
        return add(n, ast);
    }

    Program& p_;
    const Definitions& defs_;
    std::string_view source_;
    uint32_t text_ = 0;
    std::vector<std::string> expanding_;
    std::vector<std::string> macro_names_{""};
};

}  // namespace

void compile_program(Program& program, const Definitions& definitions, std::string_view source) {
    Compiler compiler(program, definitions, source);
    program.root = compiler.compile_text(0);
}

}  // namespace cohort::detail
