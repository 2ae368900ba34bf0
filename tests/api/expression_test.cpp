// The condition language through the public API: literals, operators,
// three-valued logic, types, compile errors, macros, lists, explain.
#include <cohort/expression.hpp>
#include <cohort/error.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

namespace cohort {
namespace {

using ::testing::HasSubstr;

// Compiles `text` and evaluates it with `vars`.
Outcome eval(std::string_view text, const std::map<std::string, Value>& vars = {}, const Definitions& defs = {}) {
    auto symbols = std::make_shared<Symbols>();
    const Expression e = Expression::compile(text, symbols, defs);
    Context context = e.context();
    for (const auto& [name, value] : vars) context.set(name, value);
    const Outcome o = e.evaluate(context);
    EXPECT_EQ(e.test(context), o.truth) << text;  // the fast path agrees
    return o;
}
Truth truth(std::string_view text, const std::map<std::string, Value>& vars = {}, const Definitions& defs = {}) {
    return eval(text, vars, defs).truth;
}
std::string compile_error(std::string_view text, const Definitions& defs = {}, std::shared_ptr<Symbols> symbols = nullptr) {
    try {
        Expression::compile(text, symbols ? symbols : std::make_shared<Symbols>(), defs);
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::parse);
        return e.what();
    }
    ADD_FAILURE() << "'" << text << "' compiled";
    return {};
}

TEST(Expression, TheMotivatingConditionHonoursEveryClause) {
    const char* c = "gpu_memory > 80 AND file_type == 'model' AND transfer_size > 100MB";
    EXPECT_EQ(truth(c, {{"gpu_memory", 90.0}, {"file_type", "model"}, {"transfer_size", int64_t{200'000'000}}}), Truth::yes);
    EXPECT_EQ(truth(c, {{"gpu_memory", 90.0}, {"file_type", "dataset"}, {"transfer_size", int64_t{200'000'000}}}), Truth::no);
    EXPECT_EQ(truth(c, {{"gpu_memory", 70.0}, {"file_type", "model"}, {"transfer_size", int64_t{200'000'000}}}), Truth::no);
    EXPECT_EQ(truth(c, {{"gpu_memory", 90.0}, {"file_type", "model"}, {"transfer_size", int64_t{100'000'000}}}), Truth::no);
}

TEST(Expression, Literals) {
    EXPECT_EQ(truth("100MB == 100000000 AND 1.5GiB == 1610612736 AND 1KiB == 1024"), Truth::yes);
    EXPECT_EQ(truth("250ms == 0.25 AND 30s == 30 AND 5m == 300 AND 2h == 7200"), Truth::yes);
    EXPECT_EQ(truth("'a' == \"a\" AND true AND NOT false"), Truth::yes);
    EXPECT_EQ(truth("'it\\'s' == \"it's\" AND len('\\x41\\n') == 2"), Truth::yes);
    EXPECT_EQ(truth("2 in [1, 2, 3] AND 'b' in ['a', 'b'] AND 4 not in [1, 2]"), Truth::yes);
    EXPECT_EQ(truth("1.5 > 1 AND .5 < 1"), Truth::yes);
}

TEST(Expression, OperatorsAndPrecedence) {
    EXPECT_EQ(truth("1 + 2 * 3 == 7 AND (1 + 2) * 3 == 9 AND 7 % 3 == 1 AND 7 / 2 == 3.5"), Truth::yes);
    EXPECT_EQ(truth("-x == -3 AND - -x == 3", {{"x", 3}}), Truth::yes);
    EXPECT_EQ(truth("true OR false AND false"), Truth::yes);  // AND binds tighter
    EXPECT_EQ(truth("NOT true OR true"), Truth::yes);          // NOT binds tighter than OR
    EXPECT_EQ(truth("a && b || !c", {{"a", false}, {"b", true}, {"c", false}}), Truth::yes);
    EXPECT_EQ(truth("x and y", {{"x", true}, {"y", true}}), Truth::yes);  // keywords in any case
    EXPECT_EQ(truth("1 != 2 AND 2 <= 2 AND 3 >= 2 AND 'a' < 'b'"), Truth::yes);
    EXPECT_EQ(truth("gpu.memory_used_pct > 50", {{"gpu.memory_used_pct", 51}}), Truth::yes);
}

TEST(Expression, StringOperatorsAndFunctions) {
    const std::map<std::string, Value> v = {{"path", "/data/Model.PT"}};
    EXPECT_EQ(truth("path endswith '.PT' AND path startswith '/data' AND path contains 'Model'", v), Truth::yes);
    EXPECT_EQ(truth("lower(path) endswith '.pt' AND upper(path) contains 'MODEL'", v), Truth::yes);
    EXPECT_EQ(truth("path matches '(?:\\\\.pt|\\\\.PT)$'", v), Truth::yes);
    EXPECT_EQ(truth("path matches '^model'", v), Truth::no);
    EXPECT_EQ(truth("len(path) == 14 AND len([1, 2]) == 2", v), Truth::yes);
    EXPECT_EQ(truth("min(3, 1, 2) == 1 AND max(1, 2.5) == 2.5 AND abs(-4) == 4"), Truth::yes);
    EXPECT_EQ(truth("[1, 2] contains 2 AND 'ab' + 'cd' == 'abcd'"), Truth::yes);
}

// `matches` searches (a pattern found anywhere is a match) and compares
// bytes, as the other string operators do.
TEST(Expression, MatchesSearchesBytes) {
    EXPECT_EQ(truth("path matches 'od'", {{"path", "model"}}), Truth::yes);
    EXPECT_EQ(truth("path matches '^od'", {{"path", "model"}}), Truth::no);
    EXPECT_EQ(truth("path matches '^model$'", {{"path", "model"}}), Truth::yes);
    EXPECT_EQ(truth("path matches '(?i)^MODEL'", {{"path", "model"}}), Truth::yes);
    EXPECT_EQ(truth("path matches '^..$'", {{"path", "\xc3\xa9"}}), Truth::yes);  // 'é' is two bytes
    EXPECT_EQ(truth("header matches '^\\x80[\\x02-\\x05]'", {{"header", "\x80\x04rest"}}), Truth::yes);
    EXPECT_EQ(truth("header matches 'a\\x00b'", {{"header", std::string("a\0b", 3)}}), Truth::yes);
    EXPECT_EQ(truth("path matches '\\\\\\\\1'", {{"path", "a\\1"}}), Truth::yes);  // an escaped backslash, then 1
    EXPECT_EQ(truth("'model' matches '^mod'"), Truth::yes);                        // folded when compiled
}

// Issue 19: std::regex overflowed the stack on long values and backtracked
// exponentially on nested repetition. RE2 takes time linear in the value.
TEST(Expression, MatchesLongValuesAndNestedRepetitionFinish) {
    std::string ab(12'000, 'a');
    for (std::size_t i = 0; i < ab.size(); i += 3) ab[i] = 'b';
    EXPECT_EQ(truth("path matches '(a|b)*'", {{"path", ab}}), Truth::yes);
    EXPECT_EQ(truth("path matches '^(a|b)*$'", {{"path", ab}}), Truth::yes);
    EXPECT_EQ(truth("path matches '^(a|b)*$'", {{"path", ab + "c"}}), Truth::no);
    const std::string x(50'000, 'x');
    EXPECT_EQ(truth("path matches '.*'", {{"path", x}}), Truth::yes);
    EXPECT_EQ(truth("path matches '^.*y$'", {{"path", x}}), Truth::no);
    EXPECT_EQ(truth("path matches '(a*)*b'", {{"path", std::string(30, 'a')}}), Truth::no);
    EXPECT_EQ(truth("path matches '(a*)*b'", {{"path", std::string(100'000, 'a')}}), Truth::no);
    EXPECT_EQ(truth("path matches '(a*)*b'", {{"path", std::string(30, 'a') + "b"}}), Truth::yes);
    EXPECT_EQ(truth("path matches '(x+x+)+y'", {{"path", x}}), Truth::no);
}

// RE2 has no back-references: refused when the condition is compiled, with
// the caret on the back-reference, whether the match would fold or not.
TEST(Expression, MatchesRefusesBackReferencesWhereTheyAre) {
    EXPECT_EQ(compile_error("path matches '(a)\\\\1'"),
              "1:18: bad regular expression: back-reference '\\1' is not supported (matches uses RE2 syntax, which has "
              "none)\n"
              "    path matches '(a)\\\\1'\n"
              "                     ^");
    EXPECT_THAT(compile_error("'aa' matches '(a)\\\\1'"),
                HasSubstr("1:18: bad regular expression: back-reference '\\1'"));
    EXPECT_THAT(compile_error("x > 1 AND\n  path matches '\\x41\\\\4444444444444444444444'"),
                HasSubstr("2:21: bad regular expression: back-reference '\\4' is not supported"));
    EXPECT_THAT(compile_error("path matches '[\\\\1]'"),
                HasSubstr("1:16: bad regular expression: back-reference '\\1'"));
    Definitions defs;
    defs.macros["repeated"] = "path matches '(a)\\\\1'";
    EXPECT_THAT(compile_error("repeated AND true", defs),
                HasSubstr("in macro 'repeated': 1:18: bad regular expression: back-reference '\\1'"));
}

TEST(Expression, MatchesReportsBadPatternsWhereTheyAre) {
    EXPECT_EQ(compile_error("path matches '(['"),
              "1:16: bad regular expression: missing ]: [\n    path matches '(['\n                   ^");
    EXPECT_THAT(compile_error("x matches '('"), HasSubstr("1:12: bad regular expression: missing ): ("));
    EXPECT_THAT(
        compile_error("x matches 'a(?=b)'"),
        HasSubstr(
            "1:13: bad regular expression: invalid perl operator: (?= (lookahead and lookbehind are not supported"));
    EXPECT_THAT(compile_error("x matches 'a{1001}'"),
                HasSubstr("1:13: bad regular expression: invalid repetition size: {1001}"));
    EXPECT_THAT(compile_error("x matches '[z-a]'"),
                HasSubstr("1:13: bad regular expression: invalid character class range: z-a"));
    // A pattern built from constants has no literal to point into.
    EXPECT_THAT(compile_error("x matches '(' + 'a'"), HasSubstr("1:11: bad regular expression: missing ): (a"));
    std::string huge;
    for (int i = 0; i < 200; ++i) huge += "[a-z]{1000}";
    EXPECT_THAT(
        compile_error("x matches '" + huge + "'"),
        HasSubstr("1:12: bad regular expression: pattern too large - compile failed (it needs more than the 2 MiB"));
}

TEST(Expression, MissingVariablesAreUnknownAndAbsorbedByOrAnd) {
    EXPECT_EQ(truth("x || true"), Truth::yes);
    EXPECT_EQ(truth("x && false"), Truth::no);
    const Outcome o = eval("x > 1 AND y == 'a'", {{"y", "a"}});
    EXPECT_EQ(o.truth, Truth::unknown);
    EXPECT_EQ(o.missing, std::vector<std::string>{"x"});
    EXPECT_EQ(truth("NOT x"), Truth::unknown);
    EXPECT_EQ(truth("x in [1, 2]"), Truth::unknown);
}

TEST(Expression, TypeErrorsAtEvaluationAreReportedNotThrown) {
    Outcome o = eval("x > 'a'", {{"x", 5}});
    EXPECT_EQ(o.truth, Truth::unknown);
    EXPECT_EQ(o.error, "cannot compare int 5 with string 'a' (in 'x > 'a'')");
    o = eval("x / y > 1", {{"x", 1}, {"y", 0}});
    EXPECT_THAT(o.error, HasSubstr("division by zero"));
    o = eval("x AND true", {{"x", 3}});
    EXPECT_EQ(o.error, "AND needs true or false, got 3 (in 'x')");
    // CEL's rule: an error on one side of OR is absorbed when the other is true.
    EXPECT_EQ(truth("x > 'a' OR true", {{"x", 5}}), Truth::yes);
    o = eval("x + 1", {{"x", 1}});
    EXPECT_EQ(o.error, "the condition is 2, not true or false");
}

TEST(Expression, CompileErrorsPointAtThePlace) {
    EXPECT_EQ(compile_error("gpu_memory > lenght(x)"),
              "1:14: unknown function 'lenght' (did you mean 'len'?)\n    gpu_memory > lenght(x)\n                 ^");
    EXPECT_EQ(compile_error("a == 'x' AND (b > 3"),
              "1:20: expected ')' to close the '(' at column 14, got 'the end'\n    a == 'x' AND (b > 3\n                       ^");
    EXPECT_THAT(compile_error("a = 3"), HasSubstr("1:3: '=' is not an operator (did you mean '=='?)"));
    EXPECT_THAT(compile_error("x > 10 xb"), HasSubstr("1:8: unexpected 'xb' after a complete condition"));
    EXPECT_THAT(compile_error("x > 10qq"), HasSubstr("1:7: unknown unit 'qq'"));
    EXPECT_THAT(compile_error("'abc"), HasSubstr("1:1: unterminated string"));
    EXPECT_THAT(compile_error(""), HasSubstr("empty condition"));
    EXPECT_THAT(compile_error("a < b < c"), HasSubstr("comparisons do not chain"));
    EXPECT_THAT(compile_error("x matches '('"), HasSubstr("bad regular expression"));
    EXPECT_THAT(compile_error("x matches y"), HasSubstr("needs a constant string pattern"));
    EXPECT_THAT(compile_error("1 / 0 > 1"), HasSubstr("division by zero"));
    EXPECT_THAT(compile_error("'a' > 1"), HasSubstr("cannot compare string with int using '>'"));
    EXPECT_THAT(compile_error("abs('x') > 1"), HasSubstr("abs() needs numbers, got string"));
    EXPECT_THAT(compile_error("abs(1, 2) > 1"), HasSubstr("abs() takes 1 argument, got 2"));
    EXPECT_THAT(compile_error("x in 5"), HasSubstr("'in' needs a list on its right, got int"));
    EXPECT_THAT(compile_error("x AND 3"), HasSubstr("AND needs true or false, got int"));
}

// Found by fuzz.rule_condition in CI: 64-bit products, sums and negations
// that overflow were undefined behaviour; they are named errors, at compile
// time when folded and at evaluation otherwise, and never wrap.
TEST(Expression, IntegerOverflowIsANamedError) {
    EXPECT_THAT(compile_error("111110011*100023334426901 > 0"),
                HasSubstr("integer overflow: 111110011 * 100023334426901 does not fit in 64 bits"));
    EXPECT_THAT(compile_error("9223372036854775807 + 1 > 0"), HasSubstr("integer overflow"));
    EXPECT_THAT(compile_error("-9223372036854775807 - 2 > 0"), HasSubstr("integer overflow"));
    EXPECT_THAT(compile_error("-(-9223372036854775807 - 1) > 0"), HasSubstr("integer overflow: -(-9223372036854775808)"));
    EXPECT_THAT(compile_error("abs(-9223372036854775807 - 1) > 0"), HasSubstr("integer overflow: abs("));
    Outcome o = eval("x * y > 0", {{"x", int64_t{1} << 40}, {"y", int64_t{1} << 40}});
    EXPECT_EQ(o.truth, Truth::unknown);
    EXPECT_THAT(o.error, HasSubstr("integer overflow: 1099511627776 * 1099511627776"));
    o = eval("x - y < 0", {{"x", -9223372036854775807}, {"y", 2}});
    EXPECT_THAT(o.error, HasSubstr("integer overflow"));
    // The most negative integer modulo -1 is 0, not a trap.
    EXPECT_EQ(truth("(x - 1) % y == 0", {{"x", -9223372036854775807}, {"y", -1}}), Truth::yes);
    // In range, integers stay exact; a decimal operand computes in floating point.
    EXPECT_EQ(truth("x * 2 == 9223372036854775806", {{"x", 4611686018427387903}}), Truth::yes);
    EXPECT_EQ(truth("x * 1.0 * x > 1000000000000000000000.0", {{"x", int64_t{1} << 40}}), Truth::yes);
}

TEST(Expression, CompileErrorsOnSecondLineAndWithSource) {
    const std::string message = compile_error("x > 1 AND\n  y >", {}, nullptr);
    EXPECT_EQ(message, "2:6: expected a value, got the end of the condition\n      y >\n         ^");
    try {
        Expression::compile("x >", std::make_shared<Symbols>(), {}, "rules.yaml:3:16: rules[0].condition");
        FAIL();
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), ::testing::StartsWith("rules.yaml:3:16: rules[0].condition: 1:4: expected a value"));
    }
}

TEST(Expression, DeclaredTypesAreCheckedAtCompileTime) {
    auto symbols = std::make_shared<Symbols>();
    symbols->declare("gpu_memory", Type::number);
    symbols->declare("file_type", Type::string);
    EXPECT_THAT(compile_error("gpu_memory == 'high'", {}, symbols), HasSubstr("cannot compare number with string"));
    EXPECT_THAT(compile_error("file_type > 3", {}, symbols), HasSubstr("cannot compare string with int"));
    EXPECT_THAT(compile_error("file_type + 1 > 2", {}, symbols), HasSubstr("'+' needs numbers, got string and int"));
    Definitions strict;
    strict.declared_only = true;
    EXPECT_THAT(compile_error("gpu_mem > 85", strict, symbols),
                HasSubstr("1:1: unknown variable 'gpu_mem' (did you mean 'gpu_memory'?)"));
    EXPECT_NO_THROW(Expression::compile("gpu_memory > 85", symbols, strict));
    EXPECT_THROW(symbols->declare("gpu_memory", Type::string), Error);
}

TEST(Expression, MacrosAndNamedLists) {
    Definitions defs;
    defs.macros["memory_pressure"] = "gpu_memory > 85";
    defs.macros["model_file"] = "ext in model_exts";
    defs.lists["model_exts"] = {Value(".pt"), Value(".pth")};
    EXPECT_EQ(truth("memory_pressure AND model_file", {{"gpu_memory", 90}, {"ext", ".pth"}}, defs), Truth::yes);
    EXPECT_EQ(truth("memory_pressure AND model_file", {{"gpu_memory", 90}, {"ext", ".bin"}}, defs), Truth::no);
    defs.macros["loop"] = "x > 1 AND loop";
    EXPECT_THAT(compile_error("loop", defs), HasSubstr("macro 'loop' uses itself (loop -> loop)"));
    defs.macros["broken"] = "x >";
    EXPECT_THAT(compile_error("broken OR y", defs), HasSubstr("in macro 'broken': 1:4: expected a value"));
}

TEST(Expression, ConstantsAreFolded) {
    const Expression e = Expression::compile("1 + 2 == 3 AND x");
    EXPECT_EQ(e.variables(), std::vector<std::string>{"x"});
    // The folded part leaves only x to explain.
    Context c = e.context();
    c.set("x", Value(true));
    const auto steps = e.explain(c);
    ASSERT_EQ(steps.size(), 2u);
    EXPECT_EQ(steps[1].text, "x");
}

TEST(Expression, ExplainShowsEverySubExpression) {
    const Expression e = Expression::compile("gpu_memory > 80 AND (file_type == 'model' OR size > 1GB)");
    Context c = e.context();
    c.set("gpu_memory", Value(91.5));
    c.set("file_type", Value("dataset"));
    const auto steps = e.explain(c);
    ASSERT_EQ(steps.size(), 8u);
    EXPECT_EQ(steps[0].text, "gpu_memory > 80 AND (file_type == 'model' OR size > 1GB)");
    EXPECT_EQ(steps[0].value, "unknown (size missing)");
    EXPECT_EQ(steps[1].text, "gpu_memory > 80");
    EXPECT_EQ(steps[1].value, "true");
    EXPECT_EQ(steps[2].text, "gpu_memory");
    EXPECT_EQ(steps[2].value, "91.5");
    EXPECT_EQ(steps[2].depth, 2);
    EXPECT_EQ(steps[3].text, "(file_type == 'model' OR size > 1GB)");
    EXPECT_EQ(steps[4].value, "false");
    EXPECT_EQ(steps[6].text, "size > 1GB");
    EXPECT_EQ(steps[6].value, "unknown (size missing)");
}

TEST(Expression, ValueOfNonConditions) {
    const Expression e = Expression::compile("x * 2 + 1");
    Context c = e.context();
    c.set("x", Value(20));
    EXPECT_EQ(e.value(c), Value(int64_t{41}));
    EXPECT_EQ(e.type(), std::nullopt);
    EXPECT_EQ(Expression::compile("len('abc')").type(), Type::integer);
}

TEST(Context, SetChecksNamesAndDeclaredTypes) {
    auto symbols = std::make_shared<Symbols>();
    symbols->declare("gpu_memory", Type::number);
    Context c(symbols);
    c.set("gpu_memory", Value(90));  // an int where a number is declared is fine
    EXPECT_EQ(c.get("gpu_memory"), Value(90.0));
    try {
        c.set("gpu_memory", Value("high"));
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::invalid_argument);
        EXPECT_STREQ(e.what(), "variable 'gpu_memory' is declared number, got string \"high\"");
    }
    try {
        c.set("nobody", Value(1));
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::not_found);
        EXPECT_STREQ(e.what(), "no condition uses a variable named 'nobody'");
    }
    c.unset("gpu_memory");
    EXPECT_TRUE(c.get("gpu_memory").missing());
}

TEST(Context, GrowsWithItsSymbols) {
    auto symbols = std::make_shared<Symbols>();
    Context early(symbols);
    const Expression e = Expression::compile("late > 1", symbols);
    early.set("late", Value(2));
    EXPECT_EQ(e.test(early), Truth::yes);
}

TEST(Value, ParseAsAPersonTypesIt) {
    EXPECT_EQ(Value::parse("true"), Value(true));
    EXPECT_EQ(Value::parse("42"), Value(int64_t{42}));
    EXPECT_EQ(Value::parse("0.5"), Value(0.5));
    EXPECT_EQ(Value::parse("100MB"), Value(int64_t{100'000'000}));
    EXPECT_EQ(Value::parse("30s"), Value(30.0));
    EXPECT_EQ(Value::parse("'42'"), Value("42"));
    EXPECT_EQ(Value::parse("model"), Value("model"));
    EXPECT_EQ(Value(0.5).to_string(), "0.5");
    EXPECT_EQ(Value("a\"b").to_string(), "\"a\\\"b\"");
    EXPECT_EQ(parse_type("size"), Type::integer);
    EXPECT_EQ(parse_type("duration"), Type::number);
    EXPECT_EQ(parse_type("nope"), std::nullopt);
}

}  // namespace
}  // namespace cohort
