/*
 * c_test_rules.c: the rule engine of the C ABI from plain C11 (loading, hot
 * reload, evaluation, action callbacks, explain, checking files), and the
 * entry that c_test.c's main() calls for every rules test.
 */
#include "c_test_rules.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int rules_passed;
int rules_failed;

void rules_fail(const char* file, int line, const char* what) {
    ++rules_failed;
    fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what);
}

void check_status(const char* file, int line, const char* call, int status, int code, const char* needle) {
    const char* message = cohort_last_error();
    if (status == code && (code == COHORT_OK || strstr(message, needle) != NULL)) {
        ++rules_passed;
        return;
    }
    rules_fail(file, line, call);
    fprintf(stderr, "    returned %d (expected %d), last error: \"%s\"\n", status, code, message);
    if (code != COHORT_OK) fprintf(stderr, "    expected it to contain \"%s\"\n", needle);
}

void check_text(const char* file, int line, const char* what, const char* text, const char* expected, int partly) {
    if (text != NULL && (partly ? strstr(text, expected) != NULL : strcmp(text, expected) == 0)) {
        ++rules_passed;
        return;
    }
    rules_fail(file, line, what);
    fprintf(stderr, "    got \"%s\"\n    %s \"%s\"\n", text ? text : "(null)", partly ? "lacks" : "expected", expected);
}

/* ---------------------------------------------------------------- rules */

static const char kRules[] =
    "version: 1\n"
    "variables: {gpu_memory: number, gpu_temperature: number, file_type: string}\n"
    "rules:\n"
    "  - id: reduce_prefetch\n"
    "    condition: gpu_memory > 85\n"
    "    actions: [{type: reduce_prefetch, target: data_loader, parameters: {factor: 0.5}}]\n"
    "    priority: 100\n"
    "    labels: {severity: warning}\n"
    "  - id: hot_gpu\n"
    "    condition: gpu_temperature > 87\n"
    "    for: 30s\n"
    "    actions: [{type: delay_transfer, parameters: {delay: 30}}]\n"
    "    priority: 90\n"
    "  - id: prioritize_models\n"
    "    condition: gpu_memory > 80 AND file_type == 'model'\n"
    "    actions: [{type: reduce_prefetch, target: io_queue, parameters: {factor: 1}}]\n"
    "    priority: 50\n";

/* What the action callbacks saw. */
typedef struct {
    int calls;
    char rules[4][32];
    int64_t priorities[4];
    char targets[4][32];
    char parameters[4][64];
    int32_t status; /* what to return */
} action_log;

static int32_t record_action(void* user_data, const char* rule, int64_t priority, const char* action_type,
                             const char* target, const char* parameters_json) {
    action_log* log = (action_log*)user_data;
    (void)action_type;
    if (log->calls < 4) {
        snprintf(log->rules[log->calls], sizeof log->rules[0], "%s", rule);
        log->priorities[log->calls] = priority;
        snprintf(log->targets[log->calls], sizeof log->targets[0], "%s", target);
        snprintf(log->parameters[log->calls], sizeof log->parameters[0], "%s", parameters_json);
    }
    ++log->calls;
    return log->status;
}

static int32_t state_of(const cohort_rules* r, const char* rule) {
    int32_t state = -1;
    if (cohort_rules_state(r, rule, &state) != COHORT_OK) return -1;
    return state;
}

static void test_engine(const char* scratch) {
    cohort_rules* r = NULL;
    CHECK_ERR(cohort_rules_create(4u, &r), BAD_ARGUMENT, "cohort_rules_create: flags 0x4 has unknown bits");
    CHECK_OK(cohort_rules_create(0, &r));

    /* Before any load: nothing, but a usable context. */
    uint32_t count = 99;
    const char* id = NULL;
    char* json = NULL;
    size_t length = 0;
    CHECK_OK(cohort_rules_count(r, &count));
    CHECK(count == 0);
    CHECK_ERR(cohort_rules_rule_id(r, 0, &id), COHORT_ERR_OUT_OF_RANGE, "rule 0 is past the end (0 rules)");
    CHECK_OK(cohort_rules_describe(r, &json, &length));
    CHECK_STR(json, "{\"rules\":[],\"variables\":{},\"warnings\":[],\"allow_unhandled_actions\":false}");
    cohort_free(json);

    /* Action types need handlers. */
    CHECK_ERR(cohort_rules_reload_string(r, kRules, strlen(kRules), COHORT_FORMAT_YAML, "inline.yaml"),
              COHORT_ERR_PARSE, "rule 'reduce_prefetch' uses action type 'reduce_prefetch', which has no handler");
    CHECK_HAS(cohort_last_error(), "inline.yaml:");
    action_log prefetch = {0}, delay = {0};
    delay.status = 7;
    CHECK_ERR(cohort_rules_on(r, "reduce_prefetch", NULL, NULL), BAD_ARGUMENT, "cohort_rules_on: fn must not be NULL");
    CHECK_ERR(cohort_rules_on(r, "", record_action, NULL), BAD_ARGUMENT, "cohort_rules_on: action_type is empty");
    CHECK_OK(cohort_rules_on(r, "reduce_prefetch", record_action, &prefetch));
    CHECK_OK(cohort_rules_on(r, "delay_transfer", record_action, &delay));

    char path[1024];
    snprintf(path, sizeof path, "%s/rules.yaml", scratch);
    FILE* f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f == NULL) return;
    fputs(kRules, f);
    fclose(f);
    CHECK_OK(cohort_rules_reload_file(r, path));
    CHECK_OK(cohort_rules_count(r, &count));
    CHECK(count == 3);
    CHECK_OK(cohort_rules_rule_id(r, 1, &id));
    CHECK_STR(id, "hot_gpu");

    cohort_context* ctx = NULL;
    CHECK_OK(cohort_context_from_rules(r, &ctx));
    CHECK_OK(cohort_context_set_number(ctx, "gpu_memory", 91.5));
    CHECK_OK(cohort_context_set_number(ctx, "gpu_temperature", 90));
    CHECK_OK(cohort_context_set_string(ctx, "file_type", "model", 5));

    /* Every rule that fires, in priority order; handlers in that order. */
    CHECK_OK(cohort_rules_evaluate(r, ctx, 0.0, &json, &length));
    CHECK(json != NULL && length == strlen(json));
    CHECK_HAS(json,
              "\"fired\":[{\"rule\":\"reduce_prefetch\",\"priority\":100,\"actions\":[{\"type\":\"reduce_prefetch\","
              "\"target\":\"data_loader\",\"parameters\":{\"factor\":0.5}}],\"labels\":{\"severity\":\"warning\"}},"
              "{\"rule\":\"prioritize_models\",\"priority\":50,");
    CHECK_HAS(json, "{\"rule\":\"hot_gpu\",\"from\":\"inactive\",\"to\":\"pending\",\"time\":0.0}");
    CHECK_HAS(json, "\"errors\":[]");
    cohort_free(json);
    CHECK(prefetch.calls == 2);
    CHECK_STR(prefetch.rules[0], "reduce_prefetch");
    CHECK(prefetch.priorities[0] == 100);
    CHECK_STR(prefetch.targets[0], "data_loader");
    CHECK_STR(prefetch.parameters[0], "{\"factor\":0.5}");
    CHECK_STR(prefetch.rules[1], "prioritize_models");
    CHECK_STR(prefetch.parameters[1], "{\"factor\":1}");
    CHECK(delay.calls == 0);
    CHECK(state_of(r, "hot_gpu") == COHORT_RULE_PENDING);
    CHECK(state_of(r, "reduce_prefetch") == COHORT_RULE_FIRING);

    /* `for` holds 30 s; a failing handler is reported, not fatal. */
    CHECK_OK(cohort_rules_evaluate(r, ctx, 30.0, &json, NULL));
    /* With no cooldown, the rules still firing and true fire again too. */
    CHECK_HAS(json, "\"fired\":[{\"rule\":\"reduce_prefetch\",\"priority\":100,");
    CHECK_HAS(json, "},{\"rule\":\"hot_gpu\",\"priority\":90,");
    CHECK_HAS(json, "{\"rule\":\"hot_gpu\",\"from\":\"pending\",\"to\":\"firing\",\"time\":30.0}");
    CHECK_HAS(json,
              "{\"rule\":\"hot_gpu\",\"message\":\"action 'delay_transfer' handler failed: it returned 7\","
              "\"action\":\"delay_transfer\"}");
    cohort_free(json);
    CHECK(delay.calls == 1);
    CHECK_STR(delay.parameters[0], "{\"delay\":30}");
    CHECK(state_of(r, "hot_gpu") == COHORT_RULE_FIRING);

    /* Missing variables: the rule reports which. json may be NULL. */
    CHECK_OK(cohort_context_unset(ctx, "file_type"));
    CHECK_OK(cohort_context_set_number(ctx, "gpu_memory", 82));
    CHECK_OK(cohort_rules_evaluate(r, ctx, 31.0, NULL, NULL));
    CHECK_OK(cohort_rules_evaluate(r, ctx, 32.0, &json, NULL));
    CHECK_HAS(json, "{\"rule\":\"prioritize_models\",\"message\":\"condition is unknown: 'file_type' is not set");
    cohort_free(json);

    /* explain: every sub-expression's value. */
    CHECK_OK(cohort_rules_explain(r, "prioritize_models", ctx, &json, &length));
    CHECK_HAS(json, "{\"text\":\"gpu_memory > 80\",\"value\":\"true\",\"depth\":1}");
    CHECK_HAS(json, "unknown (file_type missing)");
    cohort_free(json);
    CHECK_ERR(cohort_rules_explain(r, "prioritise_models", ctx, &json, NULL), COHORT_ERR_NOT_FOUND,
              "no rule 'prioritise_models' in the loaded rule set (did you mean 'prioritize_models'?)");
    int32_t state = -1;
    CHECK_ERR(cohort_rules_state(r, "nope", &state), COHORT_ERR_NOT_FOUND, "no rule 'nope'");
    CHECK(state == -1);

    /* Time: finite, never backwards; the context must be this engine's. */
    CHECK_ERR(cohort_rules_evaluate(r, ctx, 10.0, NULL, NULL), BAD_ARGUMENT, "must not go backwards");
    CHECK_ERR(cohort_rules_evaluate(r, ctx, NAN, NULL, NULL), BAD_ARGUMENT,
              "cohort_rules_evaluate: now must be finite");
    cohort_rules* other = NULL;
    cohort_context* other_ctx = NULL;
    CHECK_OK(cohort_rules_create(COHORT_RULES_ALLOW_UNHANDLED, &other));
    CHECK_OK(cohort_context_from_rules(other, &other_ctx));
    CHECK_ERR(cohort_rules_evaluate(r, other_ctx, 40.0, NULL, NULL), BAD_ARGUMENT,
              "cohort_rules_evaluate: the context belongs to another symbol table (create it with "
              "cohort_context_from_rules)");
    CHECK_ERR(cohort_rules_explain(r, "hot_gpu", other_ctx, &json, NULL), BAD_ARGUMENT, "another symbol table");

    /* Hot reload: a bad set keeps the good one running, states and all. */
    static const char kBroken[] =
        "version: 1\nrules:\n  - id: x\n    condition: gpu_memory >\n"
        "    actions: [{type: reduce_prefetch}]\n";
    CHECK_ERR(cohort_rules_reload_string(r, kBroken, strlen(kBroken), COHORT_FORMAT_AUTO, "broken.yaml"),
              COHORT_ERR_PARSE, "broken.yaml:4:16: rules[0].condition:");
    CHECK_OK(cohort_rules_count(r, &count));
    CHECK(count == 3);
    CHECK(state_of(r, "hot_gpu") == COHORT_RULE_FIRING);
    CHECK_OK(cohort_rules_reload_string(r, kRules, strlen(kRules), COHORT_FORMAT_YAML, NULL));
    CHECK(state_of(r, "hot_gpu") == COHORT_RULE_FIRING); /* same id and condition */
    CHECK_ERR(cohort_rules_reload_string(r, kRules, strlen(kRules), COHORT_FORMAT_LISTING, NULL), BAD_ARGUMENT,
              "cohort_rules_reload_string: format 3 is not COHORT_FORMAT_AUTO, _YAML or _JSON");
    CHECK_ERR(cohort_rules_reload_file(r, "/nonexistent/rules.yaml"), COHORT_ERR_IO, "/nonexistent/rules.yaml");

    CHECK_OK(cohort_rules_describe(r, &json, NULL));
    CHECK_HAS(json,
              "{\"id\":\"hot_gpu\",\"description\":\"\",\"condition\":\"gpu_temperature > 87\",\"priority\":90,"
              "\"enabled\":true,\"for\":30.0,\"keep_firing_for\":0.0,\"cooldown\":0.0,\"labels\":{},");
    CHECK_HAS(json,
              "\"variables\":{\"file_type\":\"string\",\"gpu_memory\":\"number\",\"gpu_temperature\":\"number\"}");
    cohort_free(json);

    /* An engine that allows unhandled actions loads without handlers. */
    CHECK_OK(cohort_rules_reload_file(other, path));
    CHECK_OK(cohort_context_set_number(other_ctx, "gpu_memory", 99));
    CHECK_OK(cohort_rules_evaluate(other, other_ctx, 0, &json, NULL));
    CHECK_HAS(json, "\"fired\":[{\"rule\":\"reduce_prefetch\"");
    cohort_free(json);

    CHECK_ERR(cohort_rules_evaluate(NULL, ctx, 0, NULL, NULL), BAD_ARGUMENT, "rules must not be NULL");
    CHECK_ERR(cohort_context_from_rules(NULL, &ctx), BAD_ARGUMENT, "rules must not be NULL");
    CHECK_ERR(cohort_rules_describe(r, NULL, NULL), BAD_ARGUMENT, "json must not be NULL");
    CHECK_ERR(cohort_rules_state(r, NULL, &state), BAD_ARGUMENT, "rule must not be NULL");
    CHECK_ERR(cohort_rules_count(NULL, &count), BAD_ARGUMENT, "cohort_rules_count: rules must not be NULL");
    CHECK_ERR(cohort_rules_rule_id(r, 0, NULL), BAD_ARGUMENT, "id must not be NULL");
    CHECK_ERR(cohort_rules_reload_file(r, NULL), BAD_ARGUMENT, "path must not be NULL");
    cohort_context_destroy(other_ctx);
    cohort_rules_destroy(other);
    cohort_context_destroy(ctx);
    cohort_rules_destroy(r);
    cohort_rules_destroy(NULL);
}

static void test_check(const char* scratch) {
    char path[1024];
    snprintf(path, sizeof path, "%s/rules.yaml", scratch); /* written by test_rules */
    char* json = NULL;
    size_t length = 0;
    CHECK_OK(cohort_rules_check_file(path, &json, &length));
    CHECK_HAS(json, "{\"rules\":[{\"id\":\"reduce_prefetch\",");
    CHECK(json != NULL && length == strlen(json));
    cohort_free(json);
    CHECK_ERR(cohort_rules_check_file("/nonexistent/x.yaml", &json, NULL), COHORT_ERR_IO, "/nonexistent/x.yaml");

    static const char kWarn[] = "{\"version\": 1, \"lists\": {\"spare\": [1]}, \"rules\": []}";
    CHECK_OK(cohort_rules_check_string(kWarn, strlen(kWarn), COHORT_FORMAT_JSON, "w.json", &json, &length));
    CHECK_HAS(json, "list 'spare' is not used by any rule");
    cohort_free(json);
    static const char kTypo[] = "version: 1\nrules:\n  - id: a\n    conditon: x > 1\n    actions: [{type: t}]\n";
    CHECK_ERR(cohort_rules_check_string(kTypo, strlen(kTypo), COHORT_FORMAT_AUTO, "typo.yaml", &json, NULL),
              COHORT_ERR_PARSE, "typo.yaml:4:");
    CHECK_HAS(cohort_last_error(), "'condition'");
    CHECK_ERR(cohort_rules_check_string(kWarn, strlen(kWarn), -1, NULL, &json, NULL), BAD_ARGUMENT,
              "cohort_rules_check_string: format -1");
    CHECK_ERR(cohort_rules_check_file(path, NULL, NULL), BAD_ARGUMENT,
              "cohort_rules_check_file: json must not be NULL");
}

int run_rules_tests(const char* scratch) {
    struct {
        const char* name;
        void (*run)(void);
    } tests[] = {
        {"rules_symbols", test_symbols}, {"rules_expression", test_expression}, {"rules_context", test_context}};
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; ++i) {
        int failed_before = rules_failed;
        tests[i].run();
        printf("%-18s %s\n", tests[i].name, rules_failed == failed_before ? "ok" : "FAILED");
    }
    int failed_before = rules_failed;
    test_engine(scratch);
    printf("%-18s %s\n", "rules_engine", rules_failed == failed_before ? "ok" : "FAILED");
    failed_before = rules_failed;
    test_check(scratch);
    printf("%-18s %s\n", "rules_check", rules_failed == failed_before ? "ok" : "FAILED");
    printf("rules: %d passed, %d failed\n", rules_passed, rules_failed);
    return rules_failed;
}
