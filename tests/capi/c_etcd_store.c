/* The etcd:// store from C: two ranks, as threads, create communicators on
 * the store URL given as argv[1] and all-reduce. Includes only cohort.h and
 * runs against both libraries, so it also proves that a static link keeps
 * the etcd:// scheme registered. c_etcd_store.sh starts the etcd. */
#define _POSIX_C_SOURCE 200809L
#include <cohort.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const char* g_url;

struct rank_result {
    int32_t rank;
    int status;
    float first, last;
    char error[512];
};

static void* run_rank(void* arg) {
    struct rank_result* r = (struct rank_result*)arg;
    cohort_comm_options* options = NULL;
    cohort_comm* comm = NULL;
    float data[64];
    size_t i;
    for (i = 0; i < 64; ++i) data[i] = (float)(r->rank + 1);
    r->status = cohort_comm_options_create(&options);
    if (r->status == COHORT_OK) r->status = cohort_comm_options_set_store(options, g_url);
    if (r->status == COHORT_OK) r->status = cohort_comm_options_set_address(options, "127.0.0.1");
    if (r->status == COHORT_OK) r->status = cohort_comm_options_set_connect_timeout(options, 30.0);
    if (r->status == COHORT_OK) r->status = cohort_comm_create(r->rank, 2, options, &comm);
    if (r->status == COHORT_OK)
        r->status = cohort_comm_allreduce(comm, data, data, 64, COHORT_DTYPE_FLOAT32, COHORT_OP_SUM,
                                          COHORT_ALGO_AUTO, 30.0);
    if (r->status != COHORT_OK) snprintf(r->error, sizeof r->error, "%s", cohort_last_error());
    r->first = data[0];
    r->last = data[63];
    cohort_comm_destroy(comm);
    cohort_comm_options_destroy(options);
    return NULL;
}

int main(int argc, char** argv) {
    pthread_t threads[2];
    struct rank_result results[2];
    int32_t rank;
    int failed = 0;
    if (argc != 2) {
        fprintf(stderr, "usage: %s etcd://HOST:PORT/PREFIX\n", argv[0]);
        return 2;
    }
    g_url = argv[1];
    memset(results, 0, sizeof results);
    for (rank = 0; rank < 2; ++rank) {
        results[rank].rank = rank;
        pthread_create(&threads[rank], NULL, run_rank, &results[rank]);
    }
    for (rank = 0; rank < 2; ++rank) pthread_join(threads[rank], NULL);
    for (rank = 0; rank < 2; ++rank) {
        if (results[rank].status != COHORT_OK) {
            fprintf(stderr, "rank %d: status %d: %s\n", (int)rank, results[rank].status, results[rank].error);
            failed = 1;
        } else if (results[rank].first != 3.0f || results[rank].last != 3.0f) {
            fprintf(stderr, "rank %d: got %g and %g, expected 3\n", (int)rank, (double)results[rank].first,
                    (double)results[rank].last);
            failed = 1;
        }
    }
    if (!failed) printf("ok: 2 ranks all-reduced through %s\n", g_url);
    return failed;
}
