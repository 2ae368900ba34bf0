/*
 * c_test_autotune.c: a communicator's tuning by field name and the
 * Autotuner through the C ABI, from plain C11: a parameter added with a
 * callback is tuned to the optimum of a synthetic throughput, a fixed one
 * never moves, the state file round-trips and a damaged one is named.
 * Includes nothing from cohort but cohort.h; c_test.c's main() runs it.
 */
#define _XOPEN_SOURCE 700

#include "cohort.h"

#include <math.h> /* NAN */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int tune_passed;
static int tune_failed;

static int tune_check(const char* file, int line, const char* call, int status, int code, const char* needle) {
    const char* message = cohort_last_error();
    if (status == code && (code == COHORT_OK || strstr(message, needle) != NULL)) {
        ++tune_passed;
        return 1;
    }
    ++tune_failed;
    fprintf(stderr, "%s:%d: FAILED: %s\n    returned %d (%s; expected %d), last error: \"%s\"\n", file, line, call,
            status, cohort_strerror(status), code, message);
    if (code != COHORT_OK) fprintf(stderr, "    expected it to contain \"%s\"\n", needle);
    return 0;
}

#define CHECK(cond)                                                         \
    do {                                                                    \
        if (cond) {                                                         \
            ++tune_passed;                                                  \
        } else {                                                            \
            ++tune_failed;                                                  \
            fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                   \
    } while (0)
#define CHECK_OK(call) tune_check(__FILE__, __LINE__, #call, (call), COHORT_OK, "")
#define CHECK_ERR(call, code, needle) tune_check(__FILE__, __LINE__, #call, (call), (code), (needle))
#define BAD COHORT_ERR_INVALID_ARGUMENT

/* What the tuner applied to the "depth" and "fixed" parameters. */
struct applied {
    double depth;
    int depth_calls;
    double fixed;
    int fixed_calls;
    int fail;
};

static int apply_value(const char* name, double value, void* user_data) {
    struct applied* a = (struct applied*)user_data;
    if (a->fail) return 7;
    if (strcmp(name, "depth") == 0) {
        a->depth = value;
        ++a->depth_calls;
    } else if (strcmp(name, "fixed") == 0) {
        a->fixed = value;
        ++a->fixed_calls;
    }
    return 0;
}

static const double depths[] = {1, 2, 4, 8, 16, 32};

static cohort_autotune_options* make_options(struct applied* a, const char* state_file) {
    cohort_autotune_options* o = NULL;
    CHECK_OK(cohort_autotune_options_create(&o));
    CHECK_OK(cohort_autotune_options_set_job_id(o, "c-job"));
    CHECK_OK(cohort_autotune_options_set_steps(o, 0, 0, 1, 200));
    CHECK_OK(cohort_autotune_options_set_max_seconds(o, 60));
    CHECK_OK(cohort_autotune_options_set_state_file(o, state_file));
    CHECK_OK(cohort_autotune_options_add_parameter(o, "depth", depths, 6, 8, 0, apply_value, a));
    CHECK_OK(cohort_autotune_options_add_parameter(o, "fixed", depths, 6, 2, 0, apply_value, a));
    CHECK_OK(cohort_autotune_options_fix(o, "fixed", 3));
    return o;
}

/* Peaks at a depth of 4 (a table: no libm for a C test). */
static double throughput(double depth) {
    static const double scores[] = {80, 90, 100, 90, 80, 70};
    for (int i = 0; i < 6; ++i)
        if (depths[i] == depth) return scores[i];
    return 0;
}

static void test_comm_tuning(cohort_comm* c) {
    uint64_t v = 0;
    CHECK_OK(cohort_comm_tuning(c, "doubling_max", &v));
    CHECK(v == 65536);
    CHECK_OK(cohort_comm_tuning(c, "pipeline_chunk", &v));
    CHECK(v == 131072);
    int32_t algo = -1;
    CHECK_OK(cohort_comm_choose(c, 200000, &algo));
    CHECK(algo == COHORT_ALGO_RING);
    CHECK_OK(cohort_comm_set_tuning(c, "doubling_max", 1 << 20));
    CHECK_OK(cohort_comm_choose(c, 200000, &algo));
    CHECK(algo == COHORT_ALGO_DOUBLING);
    CHECK_OK(cohort_comm_set_tuning(c, "doubling_max", 65536));
    CHECK_ERR(cohort_comm_set_tuning(c, "pipeline_chunk", 100), BAD,
              "cohort_comm_set_tuning: communicator: tuning.pipeline_chunk 100 must be a multiple of 8");
    CHECK_OK(cohort_comm_tuning(c, "pipeline_chunk", &v));
    CHECK(v == 131072);
    CHECK_ERR(cohort_comm_tuning(c, "chunk", &v), BAD, "cohort_comm_tuning: 'chunk' is no tuning field");
    CHECK_ERR(cohort_comm_tuning(NULL, "doubling_max", &v), BAD, "cohort_comm_tuning: comm must not be NULL");
    CHECK_ERR(cohort_comm_tuning(c, "doubling_max", NULL), BAD, "value must not be NULL");
    CHECK_ERR(cohort_comm_set_tuning(c, NULL, 1), BAD, "cohort_comm_set_tuning: name must not be NULL");
}

static void test_options_errors(void) {
    cohort_autotune_options* o = NULL;
    CHECK_OK(cohort_autotune_options_create(&o));
    CHECK_ERR(cohort_autotune_options_set_search(o, 5), BAD, "search 5 is not COHORT_AUTOTUNE_COORDINATE");
    CHECK_OK(cohort_autotune_options_set_search(o, COHORT_AUTOTUNE_BAYESIAN));
    CHECK_OK(cohort_autotune_options_set_search(o, COHORT_AUTOTUNE_COORDINATE));
    CHECK_ERR(cohort_autotune_options_set_steps(o, 0, 0, 0, 10), BAD, "samples 0 must be at least 1");
    CHECK_ERR(cohort_autotune_options_set_steps(o, -1, 0, 1, 10), BAD, "warmup_steps -1 must be at least 0");
    CHECK_ERR(cohort_autotune_options_set_max_seconds(o, -1), BAD, "cohort_autotune_options_set_max_seconds");
    CHECK_ERR(cohort_autotune_options_set_job_id(o, ""), BAD, "job_id must not be empty");
    CHECK_ERR(cohort_autotune_options_fix(o, "x", NAN), BAD, "must be finite");
    CHECK_ERR(cohort_autotune_options_add_parameter(o, "p", depths, 6, 1, 0, NULL, NULL), BAD,
              "apply must not be NULL");
    CHECK_ERR(cohort_autotune_options_add_parameter(o, "p", NULL, 6, 1, 0, apply_value, NULL), BAD,
              "candidates must not be NULL");
    CHECK_ERR(cohort_autotune_options_add_parameter(o, "p", depths, 6, 1, 2, apply_value, NULL), BAD,
              "fixed must be 0 or 1");
    CHECK_ERR(cohort_autotune_options_create(NULL), BAD, "out must not be NULL");
    cohort_autotune_options_destroy(o);
    cohort_autotune_options_destroy(NULL);
}

static void test_tuner(cohort_comm* c, const char* state_file) {
    struct applied a = {0, 0, 0, 0, 0};
    cohort_autotune_options* o = make_options(&a, state_file);
    cohort_autotuner* t = NULL;
    if (!CHECK_OK(cohort_autotuner_create(c, o, &t))) return;
    CHECK(a.depth == 8 && a.depth_calls == 1);
    CHECK(a.fixed == 3 && a.fixed_calls == 1);
    int64_t bound = 0;
    CHECK_OK(cohort_autotuner_step_bound(t, &bound));
    CHECK(bound > 0 && bound <= 200);
    int32_t changed = 0, frozen = 0;
    int64_t steps = 0;
    while (!frozen && steps < 500) {
        CHECK_OK(cohort_autotuner_step(t, throughput(a.depth), &changed, &frozen));
        ++steps;
    }
    CHECK(frozen == 1);
    CHECK(steps <= bound);
    double v = 0;
    CHECK_OK(cohort_autotuner_value(t, "depth", &v));
    CHECK(v == 4 && a.depth == 4);
    CHECK(a.fixed == 3 && a.fixed_calls == 1); /* fixed: applied once, never moved */
    CHECK_ERR(cohort_autotuner_value(t, "nope", &v), COHORT_ERR_NOT_FOUND, "no parameter 'nope'");
    CHECK_ERR(cohort_autotuner_step(t, -1, NULL, NULL), BAD, "must be finite and not negative");
    char* json = NULL;
    size_t length = 0;
    CHECK_OK(cohort_autotuner_report(t, &json, &length));
    CHECK(json != NULL && strstr(json, "\"frozen\":true") != NULL && length == strlen(json));
    cohort_free(json);
    cohort_autotuner_destroy(t);
    CHECK(access(state_file, F_OK) == 0);

    /* Restarted: starts frozen at the saved depth. */
    struct applied b = {0, 0, 0, 0, 0};
    cohort_autotune_options* o2 = make_options(&b, state_file);
    CHECK_OK(cohort_autotuner_create(c, o2, &t));
    CHECK(b.depth == 4);
    CHECK_OK(cohort_autotuner_step(t, 1, &changed, &frozen));
    CHECK(frozen == 1 && changed == 0);
    cohort_autotuner_destroy(t);

    /* Damaged: named in the notes, and tuning starts from the defaults. */
    FILE* f = fopen(state_file, "w");
    if (f != NULL) {
        fputs("{not json", f);
        fclose(f);
    }
    CHECK_OK(cohort_autotuner_create(c, o2, &t));
    CHECK(b.depth == 8);
    json = NULL;
    CHECK_OK(cohort_autotuner_report(t, &json, NULL));
    CHECK(json != NULL && strstr(json, "is damaged") != NULL && strstr(json, state_file) != NULL);
    cohort_free(json);
    cohort_autotuner_destroy(t);

    /* A failing callback is CALLBACK, naming the parameter. */
    b.fail = 1;
    CHECK_ERR(cohort_autotuner_create(c, o2, &t), COHORT_ERR_CALLBACK, "the apply callback of 'depth' returned 7");
    CHECK_ERR(cohort_autotuner_create(NULL, o2, &t), BAD, "cohort_autotuner_create: comm must not be NULL");
    CHECK_ERR(cohort_autotuner_step(NULL, 1, NULL, NULL), BAD, "tuner must not be NULL");
    cohort_autotuner_destroy(NULL);
    cohort_autotune_options_destroy(o);
    cohort_autotune_options_destroy(o2);
    remove(state_file);
}

int run_autotune_tests(const char* scratch); /* called by c_test.c's main() */

int run_autotune_tests(const char* scratch) {
    char state_file[4096];
    snprintf(state_file, sizeof state_file, "%s/c_test_autotune_%ld.json", scratch, (long)getpid());
    cohort_comm* c = NULL;
    if (CHECK_OK(cohort_comm_create(0, 1, NULL, &c))) {
        int before = tune_failed;
        test_comm_tuning(c);
        printf("%-18s %s\n", "comm_tuning", tune_failed == before ? "ok" : "FAILED");
        before = tune_failed;
        test_options_errors();
        printf("%-18s %s\n", "autotune_options", tune_failed == before ? "ok" : "FAILED");
        before = tune_failed;
        test_tuner(c, state_file);
        printf("%-18s %s\n", "autotuner", tune_failed == before ? "ok" : "FAILED");
        cohort_comm_destroy(c);
    }
    return tune_failed;
}
