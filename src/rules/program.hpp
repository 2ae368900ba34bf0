// A compiled condition: a flat array of typed nodes over variable slots.
// Comparisons of a variable with a constant get nodes of their own, so the
// common condition (`gpu_memory > 85 AND file_type == 'model'`) evaluates in
// a handful of switch steps with no allocation and no name lookups.
#pragma once

#include <cohort/expression.hpp>

#include "rules/lexer.hpp"
#include "rules/pattern.hpp"

#include <deque>
#include <forward_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::detail {

// A value during evaluation. Strings point into the context, the program,
// or the evaluation's scratch space.
struct RVal {
    enum Kind : uint8_t { unknown, error, boolean, integer, number, string, list };
    Kind kind = unknown;
    bool b = false;
    int64_t i = 0;
    double d = 0;
    std::string_view s;
    uint32_t list_index = 0;  // into Program::lists, for kind list

    static RVal of_bool(bool v) {
        RVal r;
        r.kind = boolean;
        r.b = v;
        return r;
    }
    bool numeric() const { return kind == integer || kind == number; }
    double as_double() const { return kind == integer ? static_cast<double>(i) : d; }
};

enum class Op : uint8_t {
    constant, variable, all, any, logical_not, negate, arith, compare, compare_var_num, compare_var_str,
    in_list, in_items, text_op, matches, call,
};

enum class Fn : uint8_t { min, max, abs, len, lower, upper };

struct Node {
    Op op = Op::constant;
    Tok tok = Tok::end;   // arith/compare/text_op operator
    bool negated = false; // "not in"; compare_var_str with !=
    Fn fn = Fn::min;
    uint32_t a = 0, b = 0;            // children, or slot (a) for variable nodes
    uint32_t first = 0, count = 0;    // n-ary children in Program::children
    uint32_t index = 0;               // list, regex or string index
    RVal constant;                    // constants; the number of compare_var_num
    std::optional<Type> type;         // static type, when known
    uint32_t text = 0, begin = 0, end = 0;  // source: Program::texts[text][begin, end)
};

struct Program {
    std::deque<std::string> texts;  // [0] the condition; then macro bodies
    std::deque<std::string> strings;  // string constants (stable addresses)
    std::vector<Node> nodes;
    std::vector<uint32_t> children;
    std::vector<std::vector<RVal>> lists;
    std::vector<std::unique_ptr<const RE2>> regexes;  // the patterns of `matches`
    std::shared_ptr<Symbols> symbols;
    uint32_t root = 0;
    std::vector<uint32_t> variables;  // slots used, in first-use order

    std::string_view source_of(const Node& n) const {
        return std::string_view(texts[n.text]).substr(n.begin, n.end - n.begin);
    }
};

// What one evaluation collects besides the result: the first error, and the
// variables found missing.
struct EvalState {
    bool collect = false;  // the fast path leaves everything below alone
    std::string error;
    std::vector<uint32_t> missing;
    std::forward_list<std::string> scratch;  // strings made by lower(), upper(), +
};

RVal evaluate(const Program& program, uint32_t node, const Context& context, EvalState& state);
std::string describe(const Program& program, const RVal& value);
void explain(const Program& program, uint32_t node, const Context& context, int depth,
             std::vector<ExplainStep>& out);

}  // namespace cohort::detail
