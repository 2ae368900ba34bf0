/*
 * c_test_rules.h: the checks c_test_rules.c and c_test_expressions.c share.
 * Like c_test.c, they include nothing from cohort but cohort.h.
 */
#ifndef COHORT_C_TEST_RULES_H
#define COHORT_C_TEST_RULES_H

#include "cohort.h"

extern int rules_passed;
extern int rules_failed;

void rules_fail(const char* file, int line, const char* what);
/* status must be `code`; unless it is COHORT_OK, the last error must
 * contain `needle`. */
void check_status(const char* file, int line, const char* call, int status, int code, const char* needle);
/* text equals `expected`, or with `partly` contains it. */
void check_text(const char* file, int line, const char* what, const char* text, const char* expected, int partly);

#define CHECK(cond) ((cond) ? (void)++rules_passed : rules_fail(__FILE__, __LINE__, #cond))
#define CHECK_OK(call) check_status(__FILE__, __LINE__, #call, (call), COHORT_OK, "")
/* Fails with `code` and a last error containing `needle`. */
#define CHECK_ERR(call, code, needle) check_status(__FILE__, __LINE__, #call, (call), (code), (needle))
#define CHECK_STR(text, expected) check_text(__FILE__, __LINE__, #text, (text), (expected), 0)
#define CHECK_HAS(text, needle) check_text(__FILE__, __LINE__, #text, (text), (needle), 1)
#define BAD_ARGUMENT COHORT_ERR_INVALID_ARGUMENT

/* c_test_expressions.c: symbol tables, expressions, contexts. */
void test_symbols(void);
void test_expression(void);
void test_context(void);

/* c_test_rules.c: runs every rules test; returns the number of failures. */
int run_rules_tests(const char* scratch);

#endif /* COHORT_C_TEST_RULES_H */
