// The condition language's grammar, lowest precedence first:
//   or      := and (('OR' | '||') and)*
//   and     := not (('AND' | '&&') not)*
//   not     := ('NOT' | '!') not | compare
//   compare := sum [('==' | '!=' | '<' | '<=' | '>' | '>=' | 'in' | 'not' 'in'
//                    | 'matches' | 'contains' | 'startswith' | 'endswith') sum]
//   sum     := product (('+' | '-') product)*
//   product := unary (('*' | '/' | '%') unary)*
//   unary   := '-' unary | primary
//   primary := literal | '[' [or (',' or)*] ']' | name | name '(' [or (',' or)*] ')' | '(' or ')'
#pragma once

#include "rules/lexer.hpp"

#include <memory>
#include <string_view>
#include <vector>

namespace cohort::detail {

struct Ast {
    enum class Kind : uint8_t { integer, number, string, boolean, list, name, call, logical_not, negate, binary, all, any };
    Kind kind;
    Tok op = Tok::end;  // binary: the operator; kw_not + kw_in is "not in" (negated = true)
    bool negated = false;
    int64_t integer = 0;
    double number = 0;
    bool boolean = false;
    std::string text;  // string value, name, or function name
    std::vector<std::unique_ptr<Ast>> children;
    uint32_t begin = 0, end = 0;  // span in the source text
};

// Throws Error(parse) with a caret line (see fail_at).
std::unique_ptr<Ast> parse(std::string_view text, std::string_view source);

}  // namespace cohort::detail
