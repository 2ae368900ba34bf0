/*
 * c_test_env.c: the launch environment through the C ABI, from plain C11
 * (with POSIX setenv). Sets COHORT_RANK=0 COHORT_WORLD_SIZE=1, reads it
 * back with every getter, joins a world of one with cohort_comm_from_env,
 * then checks the errors for a malformed value and for no store. Restores
 * the variables it touches. Includes nothing from cohort but cohort.h;
 * c_test.c's main() runs it.
 */
#define _XOPEN_SOURCE 700 /* setenv, unsetenv */

#include "cohort.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int env_passed;
static int env_failed;

static void env_fail(const char* file, int line, const char* what) {
    ++env_failed;
    fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what);
}

/* status must be `code`; unless it is COHORT_OK, the last error must contain `needle`. */
static void check_status(const char* file, int line, const char* call, int status, int code, const char* needle) {
    const char* message = cohort_last_error();
    if (status == code && (code == COHORT_OK || strstr(message, needle) != NULL)) {
        ++env_passed;
        return;
    }
    env_fail(file, line, call);
    fprintf(stderr, "    returned %d (%s; expected %d), last error: \"%s\"\n", status, cohort_strerror(status), code,
            message);
    if (code != COHORT_OK) fprintf(stderr, "    expected it to contain \"%s\"\n", needle);
}

static void check_has(const char* file, int line, const char* what, const char* text, const char* needle) {
    if (text != NULL && strstr(text, needle) != NULL) {
        ++env_passed;
        return;
    }
    env_fail(file, line, what);
    fprintf(stderr, "    got \"%s\"\n    lacks \"%s\"\n", text ? text : "(null)", needle);
}

#define CHECK(cond) ((cond) ? (void)++env_passed : env_fail(__FILE__, __LINE__, #cond))
#define CHECK_OK(call) check_status(__FILE__, __LINE__, #call, (call), COHORT_OK, "")
#define CHECK_ERR(call, code, needle) check_status(__FILE__, __LINE__, #call, (call), (code), (needle))
#define CHECK_HAS(text, needle) check_has(__FILE__, __LINE__, #text, (text), (needle))

/* The variables the tests set, saved first and put back after. */
static const char* const touched[] = {"COHORT_RANK", "COHORT_WORLD_SIZE", "COHORT_STORE", "MASTER_ADDR", "MASTER_PORT"};
#define N_TOUCHED (sizeof touched / sizeof touched[0])
static char* saved[N_TOUCHED];

static void save_env(void) {
    for (size_t i = 0; i < N_TOUCHED; ++i) {
        const char* value = getenv(touched[i]);
        saved[i] = NULL;
        if (value != NULL) {
            saved[i] = malloc(strlen(value) + 1);
            if (saved[i] != NULL) strcpy(saved[i], value);
        }
        unsetenv(touched[i]);
    }
}

static void restore_env(void) {
    for (size_t i = 0; i < N_TOUCHED; ++i) {
        if (saved[i] != NULL) {
            setenv(touched[i], saved[i], 1);
            free(saved[i]);
            saved[i] = NULL;
        } else {
            unsetenv(touched[i]);
        }
    }
}

static void test_read(void) {
    cohort_launch_env* env = NULL;
    int32_t value = -7;
    uint32_t count = 0;
    const char* text = NULL;

    setenv("COHORT_RANK", "0", 1);
    setenv("COHORT_WORLD_SIZE", "1", 1);
    CHECK_OK(cohort_launch_env_from_env(&env));
    CHECK(env != NULL);
    CHECK_OK(cohort_launch_env_rank(env, &value));
    CHECK(value == 0);
    CHECK_OK(cohort_launch_env_world_size(env, &value));
    CHECK(value == 1);
    CHECK_OK(cohort_launch_env_local_rank(env, &value));
    CHECK(value == 0);
    CHECK_OK(cohort_launch_env_local_world_size(env, &value));
    CHECK(value == 1);
    CHECK_OK(cohort_launch_env_node_rank(env, &value));
    CHECK(value == 0);
    CHECK_OK(cohort_launch_env_store(env, &text));
    CHECK(text != NULL && text[0] == '\0');
    CHECK_OK(cohort_launch_env_source(env, &text));
    CHECK(text != NULL && strcmp(text, "cohort") == 0);
    CHECK_OK(cohort_launch_env_note_count(env, &count));
    CHECK(count >= 2);
    CHECK_OK(cohort_launch_env_note(env, 0, &text));
    CHECK_HAS(text, "rank 0 from COHORT_RANK");
    text = NULL;
    CHECK_ERR(cohort_launch_env_note(env, count, &text), COHORT_ERR_OUT_OF_RANGE, "past the");
    CHECK(text == NULL); /* untouched on failure */

    /* NULL arguments */
    CHECK_ERR(cohort_launch_env_from_env(NULL), COHORT_ERR_INVALID_ARGUMENT, "out must not be NULL");
    CHECK_ERR(cohort_launch_env_rank(NULL, &value), COHORT_ERR_INVALID_ARGUMENT, "env must not be NULL");
    CHECK_ERR(cohort_launch_env_world_size(env, NULL), COHORT_ERR_INVALID_ARGUMENT, "world_size must not be NULL");
    CHECK_ERR(cohort_launch_env_store(env, NULL), COHORT_ERR_INVALID_ARGUMENT, "store must not be NULL");
    CHECK_ERR(cohort_launch_env_source(NULL, &text), COHORT_ERR_INVALID_ARGUMENT, "cohort_launch_env_source");
    cohort_launch_env_destroy(env);
    cohort_launch_env_destroy(NULL);

    /* A store from MASTER_ADDR/MASTER_PORT, and COHORT_STORE winning over it. */
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    env = NULL;
    CHECK_OK(cohort_launch_env_from_env(&env));
    CHECK_OK(cohort_launch_env_store(env, &text));
    CHECK(text != NULL && strcmp(text, "tcp://127.0.0.1:29500") == 0);
    cohort_launch_env_destroy(env);
    setenv("COHORT_STORE", "file:///tmp/cohort-c-test-unused", 1);
    env = NULL;
    CHECK_OK(cohort_launch_env_from_env(&env));
    CHECK_OK(cohort_launch_env_store(env, &text));
    CHECK(text != NULL && strcmp(text, "file:///tmp/cohort-c-test-unused") == 0);
    cohort_launch_env_destroy(env);
    unsetenv("COHORT_STORE");
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");

    /* A malformed value: the variable and its value in the message; out untouched. */
    setenv("COHORT_RANK", "zero", 1);
    env = NULL;
    CHECK_ERR(cohort_launch_env_from_env(&env), COHORT_ERR_INVALID_ARGUMENT, "COHORT_RANK='zero' is not a number");
    CHECK(env == NULL);
    setenv("COHORT_RANK", "0", 1);
}

static void test_init(void) {
    cohort_comm* comm = NULL;
    cohort_comm_options* options = NULL;
    const char* source = NULL;
    int32_t value = -1;
    int32_t x = 5;

    setenv("COHORT_RANK", "0", 1);
    setenv("COHORT_WORLD_SIZE", "1", 1);
    CHECK_OK(cohort_comm_from_env(NULL, &source, &comm));
    CHECK(comm != NULL);
    CHECK(source != NULL && strcmp(source, "cohort") == 0);
    CHECK_OK(cohort_comm_rank(comm, &value));
    CHECK(value == 0);
    CHECK_OK(cohort_comm_size(comm, &value));
    CHECK(value == 1);
    CHECK_OK(cohort_comm_allreduce(comm, &x, &x, 1, COHORT_DTYPE_INT32, COHORT_OP_SUM, COHORT_ALGO_AUTO, 0));
    CHECK(x == 5);
    cohort_comm_destroy(comm);

    /* With options, and source NULL. */
    comm = NULL;
    CHECK_OK(cohort_comm_options_create(&options));
    CHECK_OK(cohort_comm_options_set_job_id(options, "c-test-env"));
    CHECK_OK(cohort_comm_from_env(options, NULL, &comm));
    CHECK(comm != NULL);
    cohort_comm_destroy(comm);

    CHECK_ERR(cohort_comm_from_env(options, NULL, NULL), COHORT_ERR_INVALID_ARGUMENT, "out must not be NULL");

    /* Two ranks and no store: the message says what to set. */
    setenv("COHORT_WORLD_SIZE", "2", 1);
    comm = NULL;
    source = NULL;
    CHECK_ERR(cohort_comm_from_env(options, &source, &comm), COHORT_ERR_INVALID_ARGUMENT, "set COHORT_STORE");
    CHECK(comm == NULL && source == NULL);

    /* No launcher variables at all. */
    unsetenv("COHORT_RANK");
    unsetenv("COHORT_WORLD_SIZE");
    if (getenv("RANK") == NULL && getenv("OMPI_COMM_WORLD_RANK") == NULL && getenv("SLURM_PROCID") == NULL &&
        getenv("WORLD_SIZE") == NULL && getenv("OMPI_COMM_WORLD_SIZE") == NULL) {
        CHECK_ERR(cohort_comm_from_env(NULL, NULL, &comm), COHORT_ERR_NOT_FOUND, "no launcher variables found");
        CHECK(comm == NULL);
    }
    cohort_comm_options_destroy(options);
}

int run_env_tests(void); /* called by c_test.c's main() */

int run_env_tests(void) {
    struct {
        const char* name;
        void (*run)(void);
    } tests[] = {
        {"env_read", test_read},
        {"env_init", test_init},
    };
    save_env();
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; ++i) {
        int failed_before = env_failed;
        tests[i].run();
        printf("%-18s %s\n", tests[i].name, env_failed == failed_before ? "ok" : "FAILED");
    }
    restore_env();
    printf("env: %d passed, %d failed\n", env_passed, env_failed);
    return env_failed;
}
