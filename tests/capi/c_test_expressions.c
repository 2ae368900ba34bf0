/*
 * c_test_expressions.c: symbol tables, compiled expressions and contexts
 * from plain C11; run by run_rules_tests() (c_test_rules.c).
 */
#include "c_test_rules.h"

#include <stdio.h>
#include <string.h>

/* cohort_expr_test gives `expected`. */
static void check_truth(int line, const cohort_expr* e, const cohort_context* ctx, int32_t expected) {
    int32_t truth = -1;
    int status = cohort_expr_test(e, ctx, &truth);
    check_status(__FILE__, line, "cohort_expr_test", status, COHORT_OK, "");
    if (status == COHORT_OK && truth != expected) {
        rules_fail(__FILE__, line, "cohort_expr_test's truth");
        fprintf(stderr, "    got %d, expected %d\n", truth, expected);
    }
}
#define CHECK_TRUTH(e, ctx, expected) check_truth(__LINE__, (e), (ctx), (expected))

/* ------------------------------------------------------------- symbols */

void test_symbols(void) {
    cohort_symbols* s = NULL;
    CHECK_OK(cohort_symbols_create(&s));
    CHECK_OK(cohort_symbols_declare(s, "gpu_memory", COHORT_TYPE_NUMBER));
    CHECK_OK(cohort_symbols_declare(s, "file_type", COHORT_TYPE_STRING));
    CHECK_OK(cohort_symbols_declare(s, "file_type", COHORT_TYPE_STRING)); /* same type again: fine */
    CHECK_ERR(cohort_symbols_declare(s, "file_type", COHORT_TYPE_INT), BAD_ARGUMENT, "'file_type' is declared string");
    CHECK_ERR(cohort_symbols_declare(s, "x", 9), BAD_ARGUMENT, "cohort_symbols_declare: type 9");
    CHECK_ERR(cohort_symbols_declare(s, NULL, COHORT_TYPE_INT), BAD_ARGUMENT,
              "cohort_symbols_declare: name must not be NULL");

    uint32_t count = 0, slot = 99;
    int32_t type = -1;
    const char* name = NULL;
    CHECK_OK(cohort_symbols_count(s, &count));
    CHECK(count == 2);
    CHECK_OK(cohort_symbols_find(s, "file_type", &slot));
    CHECK(slot == 1);
    CHECK_OK(cohort_symbols_name(s, 0, &name, &type));
    CHECK_STR(name, "gpu_memory");
    CHECK(type == COHORT_TYPE_NUMBER);
    CHECK_OK(cohort_symbols_name(s, 1, NULL, NULL));
    slot = 99;
    CHECK_ERR(cohort_symbols_find(s, "nope", &slot), COHORT_ERR_NOT_FOUND, "cohort_symbols_find: no variable 'nope'");
    CHECK(slot == 99); /* untouched on failure */
    CHECK_ERR(cohort_symbols_name(s, 2, &name, &type), COHORT_ERR_OUT_OF_RANGE, "slot 2 is past the end (2 variables)");
    CHECK_ERR(cohort_symbols_count(NULL, &count), BAD_ARGUMENT, "symbols must not be NULL");

    /* Two expressions on one table share a context; declared types are
     * checked when they compile. */
    cohort_expr* pressure = NULL;
    cohort_expr* model = NULL;
    cohort_expr* wrong = NULL;
    CHECK_OK(cohort_expr_compile("gpu_memory > 85", 15, s, &pressure));
    CHECK_OK(cohort_expr_compile("file_type == 'model'", 20, s, &model));
    CHECK_ERR(cohort_expr_compile("gpu_memory == 'x'", 17, s, &wrong), COHORT_ERR_PARSE,
              "cannot compare number with string");
    CHECK(wrong == NULL);

    cohort_context* ctx = NULL;
    CHECK_OK(cohort_context_create(s, &ctx));
    CHECK_OK(cohort_context_set_number(ctx, "gpu_memory", 90));
    CHECK_OK(cohort_context_set_string(ctx, "file_type", "model", 5));
    CHECK_TRUTH(pressure, ctx, COHORT_TRUTH_YES);
    CHECK_TRUTH(model, ctx, COHORT_TRUTH_YES);
    CHECK_ERR(cohort_context_set_bool(ctx, "gpu_memory", 1), BAD_ARGUMENT, "'gpu_memory' is declared number");
    CHECK_ERR(cohort_context_create(NULL, &ctx), BAD_ARGUMENT, "cohort_context_create: symbols must not be NULL");

    /* The expressions and the context keep the table alive. */
    cohort_symbols_destroy(s);
    CHECK_TRUTH(pressure, ctx, COHORT_TRUTH_YES);
    cohort_context_destroy(ctx);
    cohort_expr_destroy(pressure);
    cohort_expr_destroy(model);
    cohort_symbols_destroy(NULL);
}

/* ---------------------------------------------------------- expressions */

void test_expression(void) {
    static const char kText[] = "gpu_memory > 80 AND file_type == 'model'";
    cohort_expr* e = NULL;
    CHECK_OK(cohort_expr_compile(kText, strlen(kText), NULL, &e));
    const char* text = NULL;
    CHECK_OK(cohort_expr_text(e, &text));
    CHECK_STR(text, "gpu_memory > 80 AND file_type == 'model'");
    int32_t type = -1;
    CHECK_OK(cohort_expr_type(e, &type));
    CHECK(type == COHORT_TYPE_BOOL);
    uint32_t count = 0;
    const char* name = NULL;
    CHECK_OK(cohort_expr_variable_count(e, &count));
    CHECK(count == 2);
    CHECK_OK(cohort_expr_variable(e, 1, &name));
    CHECK_STR(name, "file_type");
    CHECK_ERR(cohort_expr_variable(e, 2, &name), COHORT_ERR_OUT_OF_RANGE, "cohort_expr_variable: variable 2 is past");

    cohort_context* ctx = NULL;
    CHECK_OK(cohort_context_from_expr(e, &ctx));
    int32_t truth = -1;
    CHECK_TRUTH(e, ctx, COHORT_TRUTH_UNKNOWN);
    CHECK_OK(cohort_context_set_number(ctx, "gpu_memory", 91.5));
    char* json = NULL;
    size_t length = 0;
    CHECK_OK(cohort_expr_evaluate(e, ctx, &truth, &json, &length));
    CHECK(truth == COHORT_TRUTH_UNKNOWN);
    CHECK_STR(json, "{\"truth\":\"unknown\",\"missing\":[\"file_type\"],\"error\":\"\"}");
    CHECK(json != NULL && length == strlen(json));
    cohort_free(json);
    CHECK_OK(cohort_context_set_string(ctx, "file_type", "modelling", 5)); /* length counts, not the NUL */
    CHECK_TRUTH(e, ctx, COHORT_TRUTH_YES);
    CHECK_OK(cohort_expr_evaluate(e, ctx, &truth, NULL, NULL));
    CHECK(truth == COHORT_TRUTH_YES);
    char* value = NULL;
    length = 0;
    CHECK_OK(cohort_expr_value(e, ctx, &type, &value, &length));
    CHECK(type == COHORT_TYPE_BOOL);
    CHECK_STR(value, "true");
    CHECK(length == 4); /* every owned string comes with its length */
    cohort_free(value);
    CHECK_OK(cohort_context_set_text(ctx, "gpu_memory", "50"));
    CHECK_OK(cohort_expr_explain(e, ctx, &json, &length));
    CHECK_HAS(json, "{\"text\":\"gpu_memory > 80 AND file_type == 'model'\",\"value\":\"false\",\"depth\":0}");
    CHECK_HAS(json, "{\"text\":\"gpu_memory > 80\",\"value\":\"false\",\"depth\":1}");
    CHECK_HAS(json, "{\"text\":\"gpu_memory\",\"value\":\"50\",\"depth\":2}");
    cohort_free(json);

    /* A context of another table would read the wrong slots. */
    cohort_expr* other = NULL;
    cohort_context* other_ctx = NULL;
    CHECK_OK(cohort_expr_compile("x > 1", 5, NULL, &other));
    CHECK_OK(cohort_context_from_expr(other, &other_ctx));
    truth = -1;
    CHECK_ERR(cohort_expr_test(e, other_ctx, &truth), BAD_ARGUMENT,
              "cohort_expr_test: the context belongs to another symbol table");
    CHECK(truth == -1);
    CHECK_ERR(cohort_expr_explain(e, other_ctx, &json, NULL), BAD_ARGUMENT, "another symbol table");

    /* A type error found at evaluation is unknown, with the error. */
    CHECK_OK(cohort_context_set_string(other_ctx, "x", "text", 4));
    CHECK_OK(cohort_expr_evaluate(other, other_ctx, &truth, &json, NULL));
    CHECK(truth == COHORT_TRUTH_UNKNOWN);
    CHECK_HAS(json, "\"error\":\"cannot compare string 'text' with int 1");
    cohort_free(json);
    cohort_context_destroy(other_ctx);
    cohort_expr_destroy(other);

    /* The value of a non-boolean expression. */
    cohort_expr* sum = NULL;
    cohort_context* sum_ctx = NULL;
    CHECK_OK(cohort_expr_compile("a + 1", 5, NULL, &sum));
    CHECK_OK(cohort_context_from_expr(sum, &sum_ctx));
    CHECK_OK(cohort_context_set_int(sum_ctx, "a", 41));
    CHECK_OK(cohort_expr_value(sum, sum_ctx, &type, &value, NULL));
    CHECK(type == COHORT_TYPE_INT);
    CHECK_STR(value, "42");
    cohort_free(value);
    CHECK_OK(cohort_context_set_number(sum_ctx, "a", 1.5));
    CHECK_OK(cohort_expr_value(sum, sum_ctx, &type, NULL, NULL));
    CHECK(type == COHORT_TYPE_NUMBER);
    CHECK_OK(cohort_context_unset(sum_ctx, "a"));
    CHECK_OK(cohort_expr_value(sum, sum_ctx, &type, NULL, NULL));
    CHECK(type == COHORT_TYPE_NONE);
    cohort_context_destroy(sum_ctx);
    cohort_expr_destroy(sum);

    /* Compile errors: position, caret line, closest name. */
    cohort_expr* bad = NULL;
    CHECK_ERR(cohort_expr_compile("gpu_memory > lenght(x)", 22, NULL, &bad), COHORT_ERR_PARSE,
              "1:14: unknown function 'lenght' (did you mean 'len'?)");
    CHECK_HAS(cohort_last_error(), "\n    gpu_memory > lenght(x)\n                 ^");
    CHECK_ERR(cohort_expr_compile("a >", 3, NULL, &bad), COHORT_ERR_PARSE, "1:4: expected a value");
    CHECK(bad == NULL);
    CHECK_ERR(cohort_expr_compile(NULL, 0, NULL, &bad), BAD_ARGUMENT, "cohort_expr_compile: text must not be NULL");
    CHECK_ERR(cohort_expr_test(e, NULL, &truth), BAD_ARGUMENT, "cohort_expr_test: context must not be NULL");
    CHECK_ERR(cohort_expr_evaluate(e, ctx, NULL, NULL, NULL), BAD_ARGUMENT, "truth must not be NULL");
    CHECK_ERR(cohort_expr_value(NULL, ctx, &type, NULL, NULL), BAD_ARGUMENT, "expr must not be NULL");
    CHECK_ERR(cohort_expr_text(e, NULL), BAD_ARGUMENT, "cohort_expr_text: text must not be NULL");
    CHECK_ERR(cohort_expr_type(NULL, &type), BAD_ARGUMENT, "cohort_expr_type: expr must not be NULL");
    CHECK_ERR(cohort_expr_variable_count(e, NULL), BAD_ARGUMENT, "count must not be NULL");
    CHECK_ERR(cohort_context_from_expr(NULL, &ctx), BAD_ARGUMENT, "expr must not be NULL");
    cohort_context_destroy(ctx);
    cohort_expr_destroy(e);
    cohort_expr_destroy(NULL);
    cohort_context_destroy(NULL);
}

/* -------------------------------------------------------------- context */

static void check_get(cohort_context* ctx, const char* name, int32_t expected_type, const char* expected, int line) {
    int32_t type = -1;
    char* text = NULL;
    size_t length = 0;
    if (cohort_context_get(ctx, name, &type, &text, &length) != COHORT_OK || type != expected_type ||
        strcmp(text, expected) != 0 || length != strlen(text)) {
        rules_fail(__FILE__, line, "cohort_context_get");
        fprintf(stderr, "    %s: type %d \"%s\", expected %d \"%s\" (%s)\n", name, type, text ? text : "(null)",
                expected_type, expected, cohort_last_error());
    } else {
        ++rules_passed;
    }
    cohort_free(text);
}

void test_context(void) {
    cohort_symbols* s = NULL;
    cohort_context* ctx = NULL;
    cohort_expr* e = NULL;
    CHECK_OK(cohort_symbols_create(&s));
    CHECK_OK(cohort_symbols_declare(s, "mem", COHORT_TYPE_NUMBER));
    static const char kText[] = "mem > 1 || size > 1 || hot || kind == 'x' || any > 0";
    CHECK_OK(cohort_expr_compile(kText, strlen(kText), s, &e));
    CHECK_OK(cohort_context_create(s, &ctx));

    /* Text as a person types it. */
    CHECK_OK(cohort_context_set_text(ctx, "size", "100MB"));
    check_get(ctx, "size", COHORT_TYPE_INT, "100000000", __LINE__);
    CHECK_OK(cohort_context_set_text(ctx, "any", "30s"));
    check_get(ctx, "any", COHORT_TYPE_NUMBER, "30", __LINE__);
    CHECK_OK(cohort_context_set_text(ctx, "kind", "'quoted'"));
    check_get(ctx, "kind", COHORT_TYPE_STRING, "quoted", __LINE__);
    CHECK_OK(cohort_context_set_text(ctx, "hot", "true"));
    check_get(ctx, "hot", COHORT_TYPE_BOOL, "true", __LINE__);
    CHECK_OK(cohort_context_set_int(ctx, "mem", 7)); /* an int fits a number */
    check_get(ctx, "mem", COHORT_TYPE_NUMBER, "7", __LINE__);
    CHECK_ERR(cohort_context_set_text(ctx, "mem", "high"), BAD_ARGUMENT, "'mem' is declared number");

    /* The fast path, by slot, with the same checks. */
    uint32_t mem = 99, kind = 99, hot = 99, any = 99;
    CHECK_OK(cohort_context_slot(ctx, "mem", &mem));
    CHECK_OK(cohort_context_slot(ctx, "kind", &kind));
    CHECK_OK(cohort_context_slot(ctx, "hot", &hot));
    CHECK_OK(cohort_context_slot(ctx, "any", &any));
    CHECK(mem == 0);
    CHECK_OK(cohort_context_set_number_at(ctx, mem, 2.5));
    check_get(ctx, "mem", COHORT_TYPE_NUMBER, "2.5", __LINE__);
    CHECK_OK(cohort_context_set_int_at(ctx, mem, 3));
    check_get(ctx, "mem", COHORT_TYPE_NUMBER, "3", __LINE__);
    CHECK_OK(cohort_context_set_string_at(ctx, kind, "xyz", 1));
    check_get(ctx, "kind", COHORT_TYPE_STRING, "x", __LINE__);
    CHECK_OK(cohort_context_set_bool_at(ctx, hot, 0));
    check_get(ctx, "hot", COHORT_TYPE_BOOL, "false", __LINE__);
    CHECK_OK(cohort_context_set_int_at(ctx, any, -5));
    check_get(ctx, "any", COHORT_TYPE_INT, "-5", __LINE__);
    CHECK_OK(cohort_context_set_string_at(ctx, kind, NULL, 0));
    check_get(ctx, "kind", COHORT_TYPE_STRING, "", __LINE__);
    CHECK_ERR(cohort_context_set_string_at(ctx, kind, NULL, 3), BAD_ARGUMENT,
              "cohort_context_set_string_at: value must not be NULL");
    CHECK_ERR(cohort_context_set_bool_at(ctx, mem, 1), BAD_ARGUMENT,
              "cohort_context_set_bool_at: variable 'mem' is declared number, got bool");
    CHECK_ERR(cohort_context_set_number_at(ctx, 99, 1.0), COHORT_ERR_OUT_OF_RANGE,
              "cohort_context_set_number_at: slot 99 is past the end (5 variables)");
    CHECK_ERR(cohort_context_slot(ctx, "nope", &mem), COHORT_ERR_NOT_FOUND,
              "cohort_context_slot: no condition uses a variable named 'nope'");

    CHECK_TRUTH(e, ctx, COHORT_TRUTH_YES);

    /* Unset, clear, and names the table does not know. */
    CHECK_OK(cohort_context_unset(ctx, "mem"));
    check_get(ctx, "mem", COHORT_TYPE_NONE, "", __LINE__);
    CHECK_OK(cohort_context_clear(ctx));
    check_get(ctx, "size", COHORT_TYPE_NONE, "", __LINE__);
    CHECK_TRUTH(e, ctx, COHORT_TRUTH_UNKNOWN);
    int32_t type = -1;
    CHECK_OK(cohort_context_get(ctx, "hot", &type, NULL, NULL));
    CHECK(type == COHORT_TYPE_NONE);
    CHECK_ERR(cohort_context_set_int(ctx, "zzz", 1), COHORT_ERR_NOT_FOUND, "no condition uses a variable named 'zzz'");
    CHECK_ERR(cohort_context_unset(ctx, "zzz"), COHORT_ERR_NOT_FOUND, "cohort_context_unset: no condition uses");
    CHECK_ERR(cohort_context_get(ctx, "zzz", &type, NULL, NULL), COHORT_ERR_NOT_FOUND,
              "cohort_context_get: no condition");
    CHECK_ERR(cohort_context_set_string(ctx, "kind", NULL, 2), BAD_ARGUMENT,
              "cohort_context_set_string: value must not be NULL");
    CHECK_ERR(cohort_context_set_bool(ctx, NULL, 1), BAD_ARGUMENT, "cohort_context_set_bool: name must not be NULL");
    CHECK_ERR(cohort_context_set_text(ctx, "kind", NULL), BAD_ARGUMENT, "text must not be NULL");
    CHECK_ERR(cohort_context_clear(NULL), BAD_ARGUMENT, "cohort_context_clear: context must not be NULL");
    CHECK_ERR(cohort_context_set_int_at(NULL, 0, 1), BAD_ARGUMENT, "context must not be NULL");
    CHECK_ERR(cohort_context_get(ctx, "hot", NULL, NULL, NULL), BAD_ARGUMENT, "type must not be NULL");

    cohort_context_destroy(ctx);
    cohort_expr_destroy(e);
    cohort_symbols_destroy(s);
}
