#include "rules/parser.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace cohort::detail {

namespace {

std::string_view describe(const Token& t, std::string_view text) {
    if (t.kind == Tok::end) return "the end";
    return text.substr(t.begin, t.end - t.begin);
}

class Parser {
public:
    Parser(std::string_view text, std::string_view source)
        : text_(text), source_(source), tokens_(tokenize(text, source)) {}

    std::unique_ptr<Ast> parse_all() {
        if (peek().kind == Tok::end) fail(peek(), "empty condition");
        auto root = parse_or();
        if (peek().kind != Tok::end)
            fail(peek(), fmt::format("unexpected '{}' after a complete condition", describe(peek(), text_)));
        return root;
    }

private:
    const Token& peek(std::size_t ahead = 0) const {
        return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
    }
    const Token& take() { return tokens_[std::min(pos_++, tokens_.size() - 1)]; }
    [[noreturn]] void fail(const Token& at, std::string_view message) { fail_at(text_, source_, at.begin, message); }

    std::unique_ptr<Ast> node(Ast::Kind kind, uint32_t begin, uint32_t end) {
        auto n = std::make_unique<Ast>();
        n->kind = kind;
        n->begin = begin;
        n->end = end;
        return n;
    }

    // Flattens a chain of one logical operator into one n-ary node.
    std::unique_ptr<Ast> parse_chain(Ast::Kind kind, Tok op, std::unique_ptr<Ast> (Parser::*next)()) {
        auto first = (this->*next)();
        if (peek().kind != op) return first;
        auto chain = node(kind, first->begin, first->end);
        chain->children.push_back(std::move(first));
        while (peek().kind == op) {
            take();
            chain->children.push_back((this->*next)());
        }
        chain->end = chain->children.back()->end;
        return chain;
    }
    std::unique_ptr<Ast> parse_or() { return parse_chain(Ast::Kind::any, Tok::kw_or, &Parser::parse_and); }
    std::unique_ptr<Ast> parse_and() { return parse_chain(Ast::Kind::all, Tok::kw_and, &Parser::parse_not); }

    std::unique_ptr<Ast> parse_not() {
        if (peek().kind == Tok::kw_not && peek(1).kind != Tok::kw_in) {
            const Token& t = take();
            auto operand = parse_not();
            auto n = node(Ast::Kind::logical_not, t.begin, operand->end);
            n->children.push_back(std::move(operand));
            return n;
        }
        return parse_compare();
    }

    std::unique_ptr<Ast> parse_compare() {
        auto left = parse_sum();
        Tok op = peek().kind;
        bool negated = false;
        switch (op) {
            case Tok::eq: case Tok::ne: case Tok::lt: case Tok::le: case Tok::gt: case Tok::ge:
            case Tok::kw_in: case Tok::kw_matches: case Tok::kw_contains: case Tok::kw_startswith:
            case Tok::kw_endswith:
                take();
                break;
            case Tok::kw_not:
                if (peek(1).kind != Tok::kw_in) return left;
                take();
                take();
                op = Tok::kw_in;
                negated = true;
                break;
            default: return left;
        }
        auto right = parse_sum();
        auto n = node(Ast::Kind::binary, left->begin, right->end);
        n->op = op;
        n->negated = negated;
        n->children.push_back(std::move(left));
        n->children.push_back(std::move(right));
        switch (peek().kind) {
            case Tok::eq: case Tok::ne: case Tok::lt: case Tok::le: case Tok::gt: case Tok::ge:
                fail(peek(), "comparisons do not chain: write 'a < b AND b < c'");
            default: break;
        }
        return n;
    }

    std::unique_ptr<Ast> parse_binary_level(std::initializer_list<Tok> ops, std::unique_ptr<Ast> (Parser::*next)()) {
        auto left = (this->*next)();
        while (std::find(ops.begin(), ops.end(), peek().kind) != ops.end()) {
            const Tok op = take().kind;
            auto right = (this->*next)();
            auto n = node(Ast::Kind::binary, left->begin, right->end);
            n->op = op;
            n->children.push_back(std::move(left));
            n->children.push_back(std::move(right));
            left = std::move(n);
        }
        return left;
    }
    std::unique_ptr<Ast> parse_sum() { return parse_binary_level({Tok::plus, Tok::minus}, &Parser::parse_product); }
    std::unique_ptr<Ast> parse_product() {
        return parse_binary_level({Tok::star, Tok::slash, Tok::percent}, &Parser::parse_unary);
    }

    std::unique_ptr<Ast> parse_unary() {
        if (peek().kind == Tok::minus) {
            const Token& t = take();
            auto operand = parse_unary();
            auto n = node(Ast::Kind::negate, t.begin, operand->end);
            n->children.push_back(std::move(operand));
            return n;
        }
        return parse_primary();
    }

    // Items up to `close`, separated by commas; returns the closing token's end.
    uint32_t parse_items(Ast& into, Tok close, const Token& open, std::string_view closer) {
        if (peek().kind != close) {
            while (true) {
                into.children.push_back(parse_or());
                if (peek().kind == Tok::comma) {
                    take();
                    continue;
                }
                break;
            }
        }
        if (peek().kind != close) {
            fail(peek(), fmt::format("expected ',' or '{}' to close the '{}' at column {}, got '{}'", closer,
                                     describe(open, text_), open.begin + 1, describe(peek(), text_)));
        }
        return take().end;
    }

    std::unique_ptr<Ast> parse_primary() {
        const Token& t = take();
        switch (t.kind) {
            case Tok::integer: {
                auto n = node(Ast::Kind::integer, t.begin, t.end);
                n->integer = t.integer;
                return n;
            }
            case Tok::number: {
                auto n = node(Ast::Kind::number, t.begin, t.end);
                n->number = t.number;
                return n;
            }
            case Tok::string: {
                auto n = node(Ast::Kind::string, t.begin, t.end);
                n->text = t.text;
                return n;
            }
            case Tok::kw_true:
            case Tok::kw_false: {
                auto n = node(Ast::Kind::boolean, t.begin, t.end);
                n->boolean = t.kind == Tok::kw_true;
                return n;
            }
            case Tok::lbracket: {
                auto n = node(Ast::Kind::list, t.begin, t.end);
                n->end = parse_items(*n, Tok::rbracket, t, "]");
                return n;
            }
            case Tok::lparen: {
                auto inner = parse_or();
                if (peek().kind != Tok::rparen) {
                    fail(peek(), fmt::format("expected ')' to close the '(' at column {}, got '{}'", t.begin + 1,
                                             describe(peek(), text_)));
                }
                inner->begin = t.begin;  // explain shows the parentheses too
                inner->end = take().end;
                return inner;
            }
            case Tok::identifier: {
                if (peek().kind == Tok::lparen) {
                    const Token& open = take();
                    auto n = node(Ast::Kind::call, t.begin, t.end);
                    n->text = t.text;
                    n->end = parse_items(*n, Tok::rparen, open, ")");
                    return n;
                }
                auto n = node(Ast::Kind::name, t.begin, t.end);
                n->text = t.text;
                return n;
            }
            case Tok::end: fail(t, "expected a value, got the end of the condition");
            default: fail(t, fmt::format("expected a value, got '{}'", describe(t, text_)));
        }
    }

    std::string_view text_;
    std::string_view source_;
    std::vector<Token> tokens_;
    std::size_t pos_ = 0;
};

}  // namespace

std::unique_ptr<Ast> parse(std::string_view text, std::string_view source) {
    return Parser(text, source).parse_all();
}

}  // namespace cohort::detail
