/*
 * cohort.h: the stable C ABI of cohort.
 *
 * The contract (read this before calling anything):
 *
 *  1. Names. Every function is cohort_<handle>_<verb>, where <handle> is the
 *     handle it works on, passed first (cohort_comm_allreduce(comm, ...)),
 *     and <verb> says what it does or which property it reads
 *     (cohort_comm_rank). A function that needs no handle is named for the
 *     thing it works on the same way (cohort_dtype_size, cohort_epoch_order,
 *     cohort_gpu_backends, cohort_rules_check_file).
 *  2. Handles. Handles are opaque. A constructor is named for the handle it
 *     makes, takes that handle's "**out" last, and pairs with
 *     cohort_<handle>_destroy; its verb is one of: _create; _load_file and
 *     _load_string (from a file or from memory); _from_env (from the process
 *     environment); _from_<other handle> (cohort_context_from_expr,
 *     cohort_comm_from_membership); or the operation that makes it
 *     (cohort_expr_compile, cohort_shards_split, cohort_shard_plan_replan,
 *     cohort_gpu_probe_open, cohort_transfer_submit). No other function
 *     uses these verbs. The one exception: an asynchronous operation,
 *     cohort_comm_<op>_async, gives a cohort_work (pair with
 *     cohort_work_destroy) as the result of the operation. Destroy
 *     functions accept NULL and never fail.
 *  3. Status codes. Every fallible function returns an int status: COHORT_OK
 *     (0) on success, one of the positive COHORT_ERR_* codes otherwise (at
 *     most COHORT_ERR_LAST, the largest code this header knows). Codes never
 *     change value and are never reused; a new code gets the next number and
 *     moves COHORT_ERR_LAST. Out-parameters are written only on success,
 *     except the *count of a COHORT_ERR_BUFFER_TOO_SMALL failure.
 *  4. No C++ exception ever crosses this boundary. After a failure,
 *     cohort_last_error() returns the message of the last failure on the
 *     calling thread (what failed, where, and what to do about it);
 *     cohort_strerror(code) names a code.
 *  5. Types. Buffers are passed as pointer + length; integers are fixed
 *     width; strings passed in are NUL-terminated UTF-8 unless a length is
 *     given. Ranks, and counts of ranks (world sizes), are int32_t, so that
 *     -1 can say "not known". Other counts and indices are unsigned.
 *  6. Units. Every duration and every point in time is a double counting
 *     seconds (timeouts, deadlines, intervals, windows, measured step times;
 *     times since the Unix epoch or any fixed epoch). A parameter's name
 *     says it where the name alone would not (timeout_seconds). Sizes are
 *     uint64_t bytes.
 *  7. Ownership. Input pointers stay owned by the caller and are copied if
 *     kept. A "const char*" returned through an out-parameter is borrowed
 *     from the handle it came from and stays valid until that handle is
 *     destroyed or modified. A "char**" out-parameter receives a string the
 *     library allocated for the caller, NUL-terminated, and is always
 *     followed by a "size_t*" that receives its length without the NUL (that
 *     length may be NULL). The caller releases such strings, and any other
 *     memory the library allocated for it, with cohort_free(), the one free
 *     function (never with its own free(): the caller may use a different C
 *     runtime).
 *  8. Shapes. An answer of a fixed, small shape comes in out-parameters
 *     (a choice among a few as an int32_t COHORT_* constant); JSON is used
 *     only for answers whose shape varies (lists, nested records), and the
 *     same answer has the same shape wherever it comes from.
 *  9. Callbacks are a function pointer plus a void* user_data that the
 *     library passes back untouched and never frees.
 * 10. Thread safety: distinct handles may be used from distinct threads at
 *     once. One handle may be read from several threads at once, but a call
 *     that modifies it must not overlap any other call on it; a GPU monitor,
 *     a workload registry and a transfer scheduler are the exceptions:
 *     every call but destroy may overlap (they lock). A
 *     communicator's operations (the collectives, blocking or _async, and
 *     cohort_comm_close) must be issued from one thread at a time, in the
 *     same order on every rank; its queries may come from any thread, and a
 *     work handle may be tested and waited on from any thread.
 * 11. Enumerations are int32_t constants and flag sets uint32_t constants,
 *     never C enums, so their size is part of the ABI.
 * 12. The ABI is checked: tests/capi/check_abi.py compares the built library
 *     with abi/libcohort.abi, and any change, compatible or not, fails until
 *     the baseline is regenerated on purpose (scripts/abi_baseline.sh) in the
 *     same commit (docs/c-api.md, "ABI stability").
 */
#ifndef COHORT_H
#define COHORT_H

#include <stddef.h>
#include <stdint.h>

#define COHORT_VERSION_MAJOR 0
#define COHORT_VERSION_MINOR 1
#define COHORT_VERSION_PATCH 0

#if defined(_WIN32)
#if defined(COHORT_BUILDING_LIBRARY)
#define COHORT_API __declspec(dllexport)
#else
#define COHORT_API
#endif
#elif defined(COHORT_BUILDING_LIBRARY)
#define COHORT_API __attribute__((visibility("default")))
#else
#define COHORT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status */

#define COHORT_OK 0
#define COHORT_ERR_INVALID_ARGUMENT 1 /* a bad argument to an API call */
#define COHORT_ERR_PARSE 2            /* malformed or invalid file/text */
#define COHORT_ERR_IO 3               /* a file could not be read */
#define COHORT_ERR_NOT_FOUND 4        /* a named thing does not exist */
#define COHORT_ERR_OUT_OF_RANGE 5     /* an index past the end */
#define COHORT_ERR_TIMEOUT 6          /* a deadline passed */
#define COHORT_ERR_UNAVAILABLE 7      /* a peer or service cannot be reached */
#define COHORT_ERR_NO_MEMORY 8        /* an allocation failed */
#define COHORT_ERR_CALLBACK 9         /* a user callback reported failure */
#define COHORT_ERR_INTERNAL 10        /* a bug in cohort: please report it */
#define COHORT_ERR_BUFFER_TOO_SMALL 11 /* the caller's buffer is too small */
#define COHORT_ERR_UNSATISFIABLE 12   /* a request the inputs cannot meet */
#define COHORT_ERR_PEER_FAILED 13     /* a peer died, closed or sent garbage */
#define COHORT_ERR_MISMATCH 14        /* ranks called different operations */
#define COHORT_ERR_CLOSED 15          /* the communicator is broken or closed */
#define COHORT_ERR_PERMISSION_DENIED 16 /* a secret or token did not match */
/* The largest code above; a library newer than this header may return
 * larger ones, which cohort_strerror calls "unknown status code". */
#define COHORT_ERR_LAST COHORT_ERR_PERMISSION_DENIED

/* "0.1.0"; static storage. */
COHORT_API const char* cohort_version(void);
/* The message of the last failure on this thread, or "" if none; static
 * thread-local storage, valid until the next failing call on this thread. */
COHORT_API const char* cohort_last_error(void);
/* A short name for a status code ("invalid argument"); static storage. */
COHORT_API const char* cohort_strerror(int code);
/* Releases memory the library returned through a char** (or other
 * library-allocated) out-parameter. NULL is ignored. */
COHORT_API void cohort_free(void* ptr);

/* --------------------------------------------------------------- topology */

/* Node roles. */
#define COHORT_ROLE_WORKER 0
#define COHORT_ROLE_CHIEF 1
#define COHORT_ROLE_EVALUATOR 2
#define COHORT_ROLE_PARAMETER_SERVER 3
#define COHORT_ROLE_COORDINATOR 4
/* Role masks for rank orders: bit (1 << role). */
#define COHORT_ROLES_TRAINING ((1u << COHORT_ROLE_WORKER) | (1u << COHORT_ROLE_CHIEF))
#define COHORT_ROLES_ALL 0x1Fu

/* Node status. */
#define COHORT_STATUS_READY 0
#define COHORT_STATUS_JOINING 1
#define COHORT_STATUS_DRAINING 2
#define COHORT_STATUS_DOWN 3

/* Locality levels, closest first. */
#define COHORT_LEVEL_HOST 0
#define COHORT_LEVEL_SWITCH 1
#define COHORT_LEVEL_RACK 2
#define COHORT_LEVEL_ZONE 3
#define COHORT_LEVEL_REGION 4

/* Node string fields for cohort_topology_node_str. */
#define COHORT_FIELD_ID 0
#define COHORT_FIELD_HOST 1
#define COHORT_FIELD_ADDRESS 2
#define COHORT_FIELD_SWITCH 3
#define COHORT_FIELD_RACK 4
#define COHORT_FIELD_ZONE 5
#define COHORT_FIELD_REGION 6
#define COHORT_FIELD_ROLE 7   /* "worker", "chief", ... */
#define COHORT_FIELD_STATUS 8 /* "ready", "joining", ... */

/* File formats for *_load_string. AUTO guesses from the text. */
#define COHORT_FORMAT_AUTO 0
#define COHORT_FORMAT_YAML 1
#define COHORT_FORMAT_JSON 2
#define COHORT_FORMAT_LISTING 3 /* datasets only: "PATH BYTES [RECORDS]" lines */

typedef struct cohort_topology cohort_topology;

/* An empty cluster, to fill with cohort_topology_add_node. */
COHORT_API int cohort_topology_create(cohort_topology** out);
/* Loads a cluster file (.yaml, .yml or .json; see docs/formats.md). Errors
 * name the file, line, column and field path. */
COHORT_API int cohort_topology_load_file(const char* path, cohort_topology** out);
/* Same from memory; source_name (may be NULL) is used in messages. */
COHORT_API int cohort_topology_load_string(const char* text, size_t length, int32_t format,
                                           const char* source_name, cohort_topology** out);
COHORT_API void cohort_topology_destroy(cohort_topology* topology);

/* Adds a node with status READY and no GPUs. id must be unique; host may be
 * NULL or "" (then the node is its own host); address may be NULL. */
COHORT_API int cohort_topology_add_node(cohort_topology* topology, const char* id,
                                        const char* host, const char* address, int32_t role);
/* Sets one locality label (level SWITCH..REGION; "" or NULL clears it). */
COHORT_API int cohort_topology_set_locality(cohort_topology* topology, const char* id,
                                            int32_t level, const char* label);
COHORT_API int cohort_topology_set_gpus(cohort_topology* topology, const char* id,
                                        uint32_t gpu_count, uint64_t gpu_memory_bytes);
COHORT_API int cohort_topology_set_status(cohort_topology* topology, const char* id,
                                          int32_t status);

/* Number of nodes, in file (insertion) order. */
COHORT_API int cohort_topology_node_count(const cohort_topology* topology, uint32_t* out);
/* Index of the node with this id. */
COHORT_API int cohort_topology_find(const cohort_topology* topology, const char* id,
                                    uint32_t* index);
/* A string field (COHORT_FIELD_*) of node `index`; borrowed (contract 7). */
COHORT_API int cohort_topology_node_str(const cohort_topology* topology, uint32_t index,
                                        int32_t field, const char** out);
COHORT_API int cohort_topology_node_info(const cohort_topology* topology, uint32_t index,
                                         int32_t* role, int32_t* status, uint32_t* gpu_count,
                                         uint64_t* gpu_memory_bytes);
/* The whole cluster as JSON in the file schema; free with cohort_free. */
COHORT_API int cohort_topology_to_json(const cohort_topology* topology, char** json,
                                       size_t* length);

/* ------------------------------------------------------------- rank order */

typedef struct cohort_rank_order cohort_rank_order;

typedef struct cohort_rank_info {
    uint32_t node_index;       /* index into the topology */
    int32_t local_rank;        /* rank within its host */
    int32_t local_world_size;  /* ranked nodes on its host */
    int32_t node_rank;         /* index of its host among hosts in rank order */
} cohort_rank_info;

/* Ranks the READY nodes whose role bit is in role_mask (0 means
 * COHORT_ROLES_TRAINING), contiguous per host, switch, rack, zone and region,
 * chief first. The same set of nodes always gets the same ranks. */
COHORT_API int cohort_rank_order_create(const cohort_topology* topology, uint32_t role_mask,
                                        cohort_rank_order** out);
COHORT_API void cohort_rank_order_destroy(cohort_rank_order* order);
COHORT_API int cohort_rank_order_size(const cohort_rank_order* order, int32_t* world_size);
COHORT_API int cohort_rank_order_host_count(const cohort_rank_order* order, uint32_t* hosts);
COHORT_API int cohort_rank_order_get(const cohort_rank_order* order, int32_t rank, cohort_rank_info* out);
/* The rank of a node id; COHORT_ERR_NOT_FOUND if it is not ranked. */
COHORT_API int cohort_rank_order_rank_of(const cohort_rank_order* order, const char* id, int32_t* rank);
/* How many edges of the closed ring rank 0 -> 1 -> ... -> 0 join two nodes
 * in different groups at `level` (COHORT_LEVEL_*). */
COHORT_API int cohort_rank_order_ring_crossings(const cohort_rank_order* order, int32_t level, uint32_t* crossings);

/* ---------------------------------------------------------------- dataset */

#define COHORT_RECORDS_UNKNOWN UINT64_MAX

typedef struct cohort_dataset cohort_dataset;

COHORT_API int cohort_dataset_create(cohort_dataset** out);
/* Loads a dataset listing (.yaml, .yml, .json, or a text listing; see
 * docs/formats.md). */
COHORT_API int cohort_dataset_load_file(const char* path, cohort_dataset** out);
COHORT_API int cohort_dataset_load_string(const char* text, size_t length, int32_t format,
                                          const char* source_name, cohort_dataset** out);
COHORT_API void cohort_dataset_destroy(cohort_dataset* dataset);
/* records may be COHORT_RECORDS_UNKNOWN. Paths must be unique. */
COHORT_API int cohort_dataset_add_file(cohort_dataset* dataset, const char* path,
                                       uint64_t bytes, uint64_t records);
COHORT_API int cohort_dataset_file_count(const cohort_dataset* dataset, uint32_t* out);
COHORT_API int cohort_dataset_file(const cohort_dataset* dataset, uint32_t index,
                                   const char** path, uint64_t* bytes, uint64_t* records);
COHORT_API int cohort_dataset_total_bytes(const cohort_dataset* dataset, uint64_t* out);

/* ----------------------------------------------------------------- shards */

typedef struct cohort_shards cohort_shards;

/* Splits the dataset into shards of byte ranges. Give exactly one of
 * shard_bytes (a target: shards are as even as possible and none larger) or
 * shard_count; the other is 0. No shard is empty; every byte of every file
 * is in exactly one shard; a shard may span consecutive files. The shards
 * keep their own copy of the file list. */
COHORT_API int cohort_shards_split(const cohort_dataset* dataset, uint64_t shard_bytes,
                                   uint64_t shard_count, cohort_shards** out);
COHORT_API void cohort_shards_destroy(cohort_shards* shards);
COHORT_API int cohort_shards_count(const cohort_shards* shards, uint64_t* out);
/* Bytes and estimated records (COHORT_RECORDS_UNKNOWN if any file's record
 * count is unknown) of one shard, and how many file segments it has. */
COHORT_API int cohort_shards_info(const cohort_shards* shards, uint64_t shard, uint64_t* bytes,
                                  uint64_t* records, uint32_t* segments);
/* Segment `segment` of a shard: file index and byte range [begin, end). */
COHORT_API int cohort_shards_segment(const cohort_shards* shards, uint64_t shard,
                                     uint32_t segment, uint32_t* file, uint64_t* begin,
                                     uint64_t* end);

/* ------------------------------------------------------------- shard plan */

#define COHORT_STRATEGY_ROUND_ROBIN 0
#define COHORT_STRATEGY_HASH 1
#define COHORT_STRATEGY_LOCALITY 2
#define COHORT_STRATEGY_RANDOM 3
#define COHORT_STRATEGY_CUSTOM 4

typedef struct cohort_plan_options cohort_plan_options;
typedef struct cohort_shard_plan cohort_shard_plan;

/* Custom strategy: returns the member index (0 .. member_count-1) for replica
 * `replica` of `shard`, given the members already chosen for it (`taken`,
 * `taken_count` entries), or a negative value to abort planning with
 * COHORT_ERR_CALLBACK. A member already taken is rejected. Called from the
 * planning thread only, for every shard in order, replica 0 first. */
typedef int64_t (*cohort_assign_fn)(void* user_data, uint64_t shard, uint32_t replica,
                                    const uint32_t* taken, uint32_t taken_count,
                                    uint32_t member_count);

/* Defaults: HASH, replication 1, seed 0, load slack 0, weights
 * locality 1.0, load 0.5, hardware 0.1. */
COHORT_API int cohort_plan_options_create(cohort_plan_options** out);
COHORT_API void cohort_plan_options_destroy(cohort_plan_options* options);
COHORT_API int cohort_plan_options_set_strategy(cohort_plan_options* options, int32_t strategy);
COHORT_API int cohort_plan_options_set_replication(cohort_plan_options* options,
                                                   uint32_t replication);
COHORT_API int cohort_plan_options_set_seed(cohort_plan_options* options, uint64_t seed);
/* Which ready nodes hold shards: a mask of (1 << COHORT_ROLE_*); 0 means
 * COHORT_ROLES_TRAINING, the default. */
COHORT_API int cohort_plan_options_set_roles(cohort_plan_options* options, uint32_t role_mask);
/* HASH: a node may hold up to ceil(average * (1 + slack)) placements. */
COHORT_API int cohort_plan_options_set_load_slack(cohort_plan_options* options, double slack);
/* LOCALITY: how much a node having the data, its load and its hardware
 * (GPU count x memory, relative to the best node) weigh. */
COHORT_API int cohort_plan_options_set_weights(cohort_plan_options* options, double locality,
                                               double load, double hardware);
/* LOCALITY: node `node_id` holds `file_path` with score in [0, 1]
 * (1 = on local disk). Files and nodes not named score 0. */
COHORT_API int cohort_plan_options_add_locality(cohort_plan_options* options,
                                                const char* node_id, const char* file_path,
                                                double score);
/* LOCALITY: adds every entry of a locality file, YAML or JSON
 * {NODE_ID: {FILE_PATH: SCORE}} (docs/formats.md). */
COHORT_API int cohort_plan_options_add_locality_file(cohort_plan_options* options, const char* path);
/* CUSTOM: the callback; user_data is passed back untouched. */
COHORT_API int cohort_plan_options_set_custom(cohort_plan_options* options,
                                              cohort_assign_fn fn, void* user_data);

/* Assigns every shard to `replication` distinct members. The members are
 * the READY nodes of `members` whose role is in the options' role mask. The plan copies what it needs:
 * the shards and members may be destroyed afterwards. */
COHORT_API int cohort_shard_plan_create(const cohort_shards* shards,
                                        const cohort_topology* members,
                                        const cohort_plan_options* options,
                                        cohort_shard_plan** out);
/* A new plan for a changed membership: shards of departed members move,
 * plus the fewest needed to bring newcomers up to an even share; the rest
 * stay. The new plan's cohort_shard_plan_moved reports how many placements
 * moved. options may be NULL to reuse the plan's own. */
COHORT_API int cohort_shard_plan_replan(const cohort_shard_plan* plan,
                                        const cohort_topology* new_members,
                                        const cohort_plan_options* options,
                                        cohort_shard_plan** out);
COHORT_API void cohort_shard_plan_destroy(cohort_shard_plan* plan);

COHORT_API int cohort_shard_plan_shard_count(const cohort_shard_plan* plan, uint64_t* out);
COHORT_API int cohort_shard_plan_replication(const cohort_shard_plan* plan, uint32_t* out);
COHORT_API int cohort_shard_plan_member_count(const cohort_shard_plan* plan, uint32_t* out);
/* Borrowed id of member `member`. */
COHORT_API int cohort_shard_plan_member_id(const cohort_shard_plan* plan, uint32_t member,
                                           const char** id);
/* The member holding replica `replica` of `shard` (replica 0 is primary). */
COHORT_API int cohort_shard_plan_owner(const cohort_shard_plan* plan, uint64_t shard,
                                       uint32_t replica, uint32_t* member);
/* How many placements (shard replicas) a member holds. */
COHORT_API int cohort_shard_plan_member_load(const cohort_shard_plan* plan, uint32_t member, uint64_t* load);
/* The shards a member holds, ascending. Always sets *count to the full
 * count; fills `shards` only if capacity >= count, else returns
 * COHORT_ERR_BUFFER_TOO_SMALL (call with capacity 0 to size the buffer). */
COHORT_API int cohort_shard_plan_member_shards(const cohort_shard_plan* plan, uint32_t member,
                                               uint64_t* shards, size_t capacity,
                                               size_t* count);
/* Placements moved by the replan that made this plan (0 for a fresh plan). */
COHORT_API int cohort_shard_plan_moved(const cohort_shard_plan* plan, uint64_t* moved);
/* The plan as JSON (strategy, members, shards with segments, owners, loads);
 * free with cohort_free. */
COHORT_API int cohort_shard_plan_to_json(const cohort_shard_plan* plan, char** json,
                                         size_t* length);

/* ------------------------------------------------------------ epoch order */

#define COHORT_EPOCH_SHUFFLE 1u   /* permute; otherwise keep 0..n-1 order */
#define COHORT_EPOCH_DROP_LAST 2u /* drop the tail instead of padding */

/* The indices rank `rank` of `world_size` visits in `epoch`, as torch's
 * DistributedSampler: a permutation of 0..n-1 from (seed, epoch), identical
 * on every rank and platform, padded by repeating from its start (or
 * trimmed with DROP_LAST) to a multiple of world_size, then every
 * world_size-th index from position `rank`. Always sets *count to the full
 * count; fills `indices` only if capacity >= count, else returns
 * COHORT_ERR_BUFFER_TOO_SMALL. */
COHORT_API int cohort_epoch_order(uint64_t n, uint64_t seed, uint64_t epoch, int32_t rank, int32_t world_size,
                                  uint32_t flags, uint64_t* indices, size_t capacity, size_t* count);

/* ------------------------------------------------------------------ rules */

/* Value types of variables (cohort_symbols_declare, cohort_context_get,
 * cohort_expr_value). Sizes (100MB) are INT bytes, durations (30s) NUMBER
 * seconds. NONE: missing, or not known at compile time. */
#define COHORT_TYPE_NONE 0
#define COHORT_TYPE_BOOL 1
#define COHORT_TYPE_INT 2
#define COHORT_TYPE_NUMBER 3
#define COHORT_TYPE_STRING 4
#define COHORT_TYPE_LIST 5

/* Three-valued truth: a comparison with a variable missing from the context
 * is UNKNOWN; UNKNOWN || true is YES and UNKNOWN && false is NO. */
#define COHORT_TRUTH_NO 0
#define COHORT_TRUTH_YES 1
#define COHORT_TRUTH_UNKNOWN 2

/* Rule states. */
#define COHORT_RULE_INACTIVE 0
#define COHORT_RULE_PENDING 1 /* the condition holds, `for` not yet over */
#define COHORT_RULE_FIRING 2

/* cohort_rules_create flags. */
#define COHORT_RULES_ALLOW_UNHANDLED 1u /* accept action types with no handler */

typedef struct cohort_symbols cohort_symbols;
typedef struct cohort_expr cohort_expr;
typedef struct cohort_context cohort_context;
typedef struct cohort_rules cohort_rules;

/* A symbol table: variable names bound to slots, optionally typed. Several
 * expressions compiled against one table share one context. The table is
 * shared, not copied: expressions and contexts made from it keep it alive
 * after cohort_symbols_destroy. Compiling against it adds names, so it must
 * not overlap other calls that use it (contract 10). */
COHORT_API int cohort_symbols_create(cohort_symbols** out);
COHORT_API void cohort_symbols_destroy(cohort_symbols* symbols);
/* Declares a variable's type (COHORT_TYPE_BOOL..STRING), checked when
 * expressions compile; INVALID_ARGUMENT if declared before with another. */
COHORT_API int cohort_symbols_declare(cohort_symbols* symbols, const char* name, int32_t type);
COHORT_API int cohort_symbols_count(const cohort_symbols* symbols, uint32_t* count);
/* NOT_FOUND if no expression or declaration has named it. */
COHORT_API int cohort_symbols_find(const cohort_symbols* symbols, const char* name,
                                   uint32_t* slot);
/* Name (borrowed) and declared type (COHORT_TYPE_NONE if undeclared) of a
 * slot; either out-pointer may be NULL. */
COHORT_API int cohort_symbols_name(const cohort_symbols* symbols, uint32_t slot,
                                   const char** name, int32_t* type);

/* Compiles a condition such as "gpu_memory > 85 AND file_type == 'model'"
 * (docs/rules.md); release with cohort_expr_destroy. symbols NULL gives the
 * expression a private table. PARSE errors give the position with a caret
 * line and, for unknown names, the closest known one. */
COHORT_API int cohort_expr_compile(const char* text, size_t length, cohort_symbols* symbols,
                                   cohort_expr** out);
COHORT_API void cohort_expr_destroy(cohort_expr* expr);
/* The source text; borrowed. */
COHORT_API int cohort_expr_text(const cohort_expr* expr, const char** text);
/* The result type if known at compile time, else COHORT_TYPE_NONE. */
COHORT_API int cohort_expr_type(const cohort_expr* expr, int32_t* type);
/* The variables the expression reads; names borrowed. */
COHORT_API int cohort_expr_variable_count(const cohort_expr* expr, uint32_t* count);
COHORT_API int cohort_expr_variable(const cohort_expr* expr, uint32_t index, const char** name);
/* The fast path: COHORT_TRUTH_* (a type error counts as UNKNOWN). No
 * allocation. The context must come from the expression's symbol table. */
COHORT_API int cohort_expr_test(const cohort_expr* expr, const cohort_context* context,
                                int32_t* truth);
/* As cohort_expr_test, and, if json is not NULL, why:
 * {"truth": "yes"|"no"|"unknown", "missing": [names], "error": "..."};
 * free *json with cohort_free. length may be NULL. */
COHORT_API int cohort_expr_evaluate(const cohort_expr* expr, const cohort_context* context,
                                    int32_t* truth, char** json, size_t* length);
/* The value of the whole expression (a number for "a + 1"): its type
 * (COHORT_TYPE_NONE when unknown) and, if text is not NULL, its text
 * ("true", "42", "0.5", a string unquoted); free *text with cohort_free. */
COHORT_API int cohort_expr_value(const cohort_expr* expr, const cohort_context* context, int32_t* type, char** text,
                                 size_t* length);
/* Every sub-expression's value, outermost first, as a JSON array of
 * {"text", "value", "depth"}; free with cohort_free. length may be NULL. */
COHORT_API int cohort_expr_explain(const cohort_expr* expr, const cohort_context* context,
                                   char** json, size_t* length);

/* A context holds the variables' values for evaluations. It belongs to one
 * symbol table and is accepted only by expressions and engines of that
 * table. It stays valid while expressions are added to the table or rules
 * reloaded. The three constructors pair with cohort_context_destroy. */
COHORT_API int cohort_context_create(const cohort_symbols* symbols, cohort_context** out);
COHORT_API int cohort_context_from_expr(const cohort_expr* expr, cohort_context** out);
COHORT_API int cohort_context_from_rules(const cohort_rules* rules, cohort_context** out);
COHORT_API void cohort_context_destroy(cohort_context* context);
/* Setting by name: NOT_FOUND for a name the symbol table does not know,
 * INVALID_ARGUMENT for a value of the wrong declared type. Strings are
 * copied. */
COHORT_API int cohort_context_set_bool(cohort_context* context, const char* name, int32_t value);
COHORT_API int cohort_context_set_int(cohort_context* context, const char* name, int64_t value);
COHORT_API int cohort_context_set_number(cohort_context* context, const char* name,
                                         double value);
COHORT_API int cohort_context_set_string(cohort_context* context, const char* name,
                                         const char* value, size_t length);
/* The value parsed as a person types it: true/false, 42, 0.5, 100MB
 * (bytes), 30s (seconds), 'quoted' or "quoted", else the text itself. */
COHORT_API int cohort_context_set_text(cohort_context* context, const char* name,
                                       const char* text);
/* The fast path: look the slot up once, then set by slot. */
COHORT_API int cohort_context_slot(const cohort_context* context, const char* name,
                                   uint32_t* slot);
COHORT_API int cohort_context_set_bool_at(cohort_context* context, uint32_t slot,
                                          int32_t value);
COHORT_API int cohort_context_set_int_at(cohort_context* context, uint32_t slot, int64_t value);
COHORT_API int cohort_context_set_number_at(cohort_context* context, uint32_t slot,
                                            double value);
COHORT_API int cohort_context_set_string_at(cohort_context* context, uint32_t slot,
                                            const char* value, size_t length);
/* Makes one variable missing again; NOT_FOUND for an unknown name. */
COHORT_API int cohort_context_unset(cohort_context* context, const char* name);
/* Makes every variable missing. */
COHORT_API int cohort_context_clear(cohort_context* context);
/* A variable's type (COHORT_TYPE_NONE if missing) and, if text is not NULL,
 * its value as text (as cohort_expr_value); free *text with cohort_free. */
COHORT_API int cohort_context_get(const cohort_context* context, const char* name, int32_t* type, char** text,
                                  size_t* length);

/* Action handler: called during cohort_rules_evaluate, on its thread, for
 * each action of each firing rule in priority order. Every string is
 * borrowed for the call only; parameters_json is a JSON object. Returns 0,
 * or non-zero for a failure, which the evaluation reports in its "errors"
 * (with "action"; the message says "it returned N") without stopping the
 * other handlers. It must
 * not call back into the same engine. */
typedef int32_t (*cohort_action_fn)(void* user_data, const char* rule, int64_t priority,
                                    const char* action_type, const char* target,
                                    const char* parameters_json);

/* A rule engine with no rules; flags: COHORT_RULES_ALLOW_UNHANDLED or 0. */
COHORT_API int cohort_rules_create(uint32_t flags, cohort_rules** out);
COHORT_API void cohort_rules_destroy(cohort_rules* rules);
/* Registers the handler of one action type, replacing an earlier one.
 * Register before loading: loading fails on an action type without a
 * handler unless the engine or the file allows unhandled actions. */
COHORT_API int cohort_rules_on(cohort_rules* rules, const char* action_type,
                               cohort_action_fn fn, void* user_data);
/* Loads or hot-reloads a rule file (YAML or JSON, docs/rules.md), following
 * its includes. On any error the last good rule set keeps running; errors
 * name file:line:column and the field path. Rules whose id and condition
 * are unchanged keep their state. */
COHORT_API int cohort_rules_reload_file(cohort_rules* rules, const char* path);
/* Same from memory: format COHORT_FORMAT_AUTO, _YAML or _JSON; source_name
 * (may be NULL) is used in messages. */
COHORT_API int cohort_rules_reload_string(cohort_rules* rules, const char* text, size_t length, int32_t format,
                                          const char* source_name);
/* Evaluates every enabled rule at time `now` (seconds, any epoch, never
 * going backwards) and runs the handlers of the rules that fire. If json is
 * not NULL it receives (free with cohort_free)
 *   {"time": now,
 *    "fired": [{"rule", "priority", "actions": [{"type", "target",
 *               "parameters": {...}}], "labels": {...}}],   highest first
 *    "events": [{"rule", "from", "to", "time"}],            state changes
 *    "errors": [{"rule", "message"} or, for a failed handler,
 *               {"rule", "message", "action"}]}
 * States are "inactive", "pending", "firing". length may be NULL. */
COHORT_API int cohort_rules_evaluate(cohort_rules* rules, const cohort_context* context,
                                     double now, char** json, size_t* length);
/* Every sub-expression's value for one rule, as cohort_expr_explain.
 * NOT_FOUND for an unknown rule id. */
COHORT_API int cohort_rules_explain(const cohort_rules* rules, const char* rule,
                                    const cohort_context* context, char** json, size_t* length);
/* A rule's COHORT_RULE_* state; NOT_FOUND for an unknown rule id. */
COHORT_API int cohort_rules_state(const cohort_rules* rules, const char* rule, int32_t* state);
/* Rules of the loaded set (0 before the first load), in file order. */
COHORT_API int cohort_rules_count(const cohort_rules* rules, uint32_t* count);
/* Borrowed id of rule `index`; valid until the next load or destroy. */
COHORT_API int cohort_rules_rule_id(const cohort_rules* rules, uint32_t index, const char** id);
/* The loaded rule set as JSON:
 *   {"rules": [{"id", "description", "condition", "priority", "enabled",
 *               "for", "keep_firing_for", "cooldown", "labels", "actions",
 *               "source"}],
 *    "variables": {name: type}, "warnings": [...], "allow_unhandled_actions"}
 * (empty before the first load); free with cohort_free. */
COHORT_API int cohort_rules_describe(const cohort_rules* rules, char** json, size_t* length);
/* Validates a rule file without an engine (action handlers are not
 * checked); on success *json describes it as cohort_rules_describe. */
COHORT_API int cohort_rules_check_file(const char* path, char** json, size_t* length);
COHORT_API int cohort_rules_check_string(const char* text, size_t length, int32_t format,
                                         const char* source_name, char** json,
                                         size_t* json_length);

/* -------------------------------------------------------------------- gpu */

/* What the GPUs are doing, without ever hanging the caller (docs/gpu.md).
 * A probe reads through one backend: NVML loaded at run time, nvidia-smi
 * run under a hard deadline, or a simulated file. Every query has a
 * deadline; a query that misses it is abandoned on the probe's own thread
 * and the caller gets the last good readings marked stale. Unlike the rest
 * of the library, probes and monitors start threads of their own.
 *
 * Samples come as JSON (free with cohort_free):
 *   {"time", "backend", "health": "ok"|"unresponsive"|"failed", "stale",
 *    "error", "latency_seconds", "gpus": [{"index", "uuid", "name",
 *    "pci_bus_id", "memory_total_bytes", ..., "processes": [...],
 *    "mig_instances": [...], "xid_events": [...]}]}
 * A field with no value is {"state": "not_supported"} (the GPU or driver
 * cannot report it) or {"state": "not_available"} (not this time), never a
 * made-up zero. */

/* Probe health (cohort_gpu_summary.health). */
#define COHORT_GPU_HEALTH_OK 0
#define COHORT_GPU_HEALTH_UNRESPONSIVE 1 /* the backend missed the deadline */
#define COHORT_GPU_HEALTH_FAILED 2       /* the backend answered with an error */

/* Metrics for cohort_gpu_monitor_stats. */
#define COHORT_GPU_METRIC_MEMORY_USED 0 /* used / total memory, percent */
#define COHORT_GPU_METRIC_MEMORY_BUSY 1 /* memory bandwidth busy, percent */
#define COHORT_GPU_METRIC_UTILIZATION 2 /* SMs busy, percent */
#define COHORT_GPU_METRIC_TEMPERATURE 3 /* degrees Celsius */
#define COHORT_GPU_METRIC_POWER 4       /* power draw, watts */

typedef struct cohort_gpu_probe cohort_gpu_probe;
typedef struct cohort_gpu_monitor cohort_gpu_monitor;

/* One sample boiled down for a caller that polls: the maxima across GPUs
 * are what the monitor publishes to rules (gpu_memory, gpu_memory_busy,
 * gpu_util, gpu_temperature, gpu_power). A maximum no GPU reported is NaN.
 * The layout is part of the ABI: it changes only with the major version. */
typedef struct cohort_gpu_summary {
    double time;            /* seconds since the Unix epoch */
    double latency_seconds; /* how long the query took */
    uint32_t gpu_count;
    int32_t health;         /* COHORT_GPU_HEALTH_* */
    int32_t stale;          /* 1: the readings are the last good ones, not new */
    uint32_t process_count; /* compute processes on all GPUs */
    uint64_t memory_used_bytes;  /* sum over the GPUs that report it */
    uint64_t memory_total_bytes; /* sum over the GPUs that report it */
    double max_memory_used_percent;
    double max_memory_busy_percent;
    double max_utilization_percent;
    double max_temperature_celsius;
    double max_power_watts;
} cohort_gpu_summary;

/* Which backends this machine has, trying each (nvidia-smi under
 * deadline_seconds): a JSON array of {"backend": "nvml"|"nvidia-smi"|
 * "file"|"none", "available": bool, "reason": "..."} ("reason" says why
 * not, "" when available); free with cohort_free. length may be NULL. */
COHORT_API int cohort_gpu_backends(double deadline_seconds, char** json, size_t* length);

/* Opens a probe. spec: "auto" (NVML, then nvidia-smi, then none), "nvml",
 * "smi", "file:PATH" (simulated GPUs) or "none"; NULL means "auto".
 * deadline_seconds (> 0, at most a day) bounds every query. A named
 * backend that cannot be used fails with COHORT_ERR_UNAVAILABLE and the
 * reason ("libnvidia-ml.so.1 not found: ..."); "auto" does not fail for
 * that. A simulated file that does not load fails with COHORT_ERR_IO or
 * COHORT_ERR_PARSE (FILE:LINE:COLUMN and the field). */
COHORT_API int cohort_gpu_probe_open(const char* spec, double deadline_seconds,
                                     cohort_gpu_probe** out);
/* Never waits for a stuck query. */
COHORT_API void cohort_gpu_probe_destroy(cohort_gpu_probe* probe);
/* The backend in use: "nvml", "nvidia-smi", "file:PATH" or "none";
 * borrowed. */
COHORT_API int cohort_gpu_probe_backend(const cohort_gpu_probe* probe, const char** backend);
/* Why each backend was or was not chosen: a JSON array of {"backend",
 * "chosen": bool, "reason"} in the order tried; free with cohort_free. */
COHORT_API int cohort_gpu_probe_selection(const cohort_gpu_probe* probe, char** json,
                                          size_t* length);
/* Takes a sample (JSON as above); returns within the deadline whatever the
 * backend does. A failed or late query still succeeds: the sample says so
 * in "health", "stale" and "error". */
COHORT_API int cohort_gpu_probe_sample(cohort_gpu_probe* probe, char** json, size_t* length);
/* Takes a sample and summarises it; no allocation for the caller. */
COHORT_API int cohort_gpu_probe_sample_summary(cohort_gpu_probe* probe,
                                               cohort_gpu_summary* out);

/* A monitor: samples in the background every interval_seconds (> 0) once
 * started, keeps the last `history` (>= 1) samples per GPU, and answers
 * the I/O path's questions through a GPU rule pack: rules_path, or NULL
 * for the shipped rules/gpu_io.yaml.
 * Ownership: on success the probe's backend moves into the monitor. The
 * probe handle stays the caller's to destroy, and its backend and selection
 * can still be read, but sampling it fails from then on (sample through the
 * monitor). On failure the probe is left as it was. A rule pack is loaded
 * and checked here (PARSE for an action without its factor or delay); the
 * shipped one on first use (NOT_FOUND from the call that needs it if it
 * cannot be found; COHORT_RULES_DIR names its folder).
 * Calls on one monitor may come from several threads at once, except
 * cohort_gpu_monitor_destroy. */
COHORT_API int cohort_gpu_monitor_create(cohort_gpu_probe* probe, double interval_seconds,
                                         uint32_t history, const char* rules_path,
                                         cohort_gpu_monitor** out);
/* Stops the sampler first. */
COHORT_API void cohort_gpu_monitor_destroy(cohort_gpu_monitor* monitor);
/* Starts or stops the background sampler; either is a no-op if it already
 * is in that state. */
COHORT_API int cohort_gpu_monitor_start(cohort_gpu_monitor* monitor);
COHORT_API int cohort_gpu_monitor_stop(cohort_gpu_monitor* monitor);
/* 1 while the sampler runs, else 0. */
COHORT_API int cohort_gpu_monitor_running(const cohort_gpu_monitor* monitor, int32_t* running);
/* Takes one sample now, on the calling thread, and keeps it like the
 * sampler's; *json as cohort_gpu_probe_sample (json may be NULL). */
COHORT_API int cohort_gpu_monitor_sample_now(cohort_gpu_monitor* monitor, char** json,
                                             size_t* length);
/* The latest sample; COHORT_ERR_NOT_FOUND before the first one. */
COHORT_API int cohort_gpu_monitor_latest(const cohort_gpu_monitor* monitor, char** json,
                                         size_t* length);
COHORT_API int cohort_gpu_monitor_latest_summary(const cohort_gpu_monitor* monitor,
                                                 cohort_gpu_summary* out);
/* The kept samples of the GPU whose "index" is `gpu`, oldest first: a JSON
 * array of {"time", "gpu": {...one GPU as in a sample...}}. Stale samples
 * are not kept. "[]" before the first sample; COHORT_ERR_NOT_FOUND for an
 * index the latest sample lacks. */
COHORT_API int cohort_gpu_monitor_history(const cohort_gpu_monitor* monitor, uint32_t gpu,
                                          char** json, size_t* length);
/* Min, mean and max of a COHORT_GPU_METRIC_* of GPU `gpu` (its index) over
 * the kept samples of the window_seconds (>= 0; INFINITY for all) before
 * the latest sample. *count is how many had the metric (0: min, mean and
 * max are 0). min, mean and max may be NULL. NOT_FOUND as for _history. */
COHORT_API int cohort_gpu_monitor_stats(const cohort_gpu_monitor* monitor, uint32_t gpu,
                                        int32_t metric, double window_seconds, uint64_t* count,
                                        double* min, double* mean, double* max);
/* Sets the GPU variables the context's symbol table knows, from the latest
 * sample: gpu_memory (used / total %), gpu_memory_busy, gpu_util,
 * gpu_temperature and gpu_power as the maximum across GPUs, and per GPU
 * gpuN.memory, ...; the others are skipped. */
COHORT_API int cohort_gpu_monitor_publish(const cohort_gpu_monitor* monitor,
                                          cohort_context* context);
/* From the rule pack and the latest sample: the prefetch factor (the
 * smallest reduce_prefetch factor firing now; 1.0 = normal). */
COHORT_API int cohort_gpu_monitor_prefetch_factor(cohort_gpu_monitor* monitor, double* factor);
/* Seconds to hold a transfer of `bytes` of `kind` ("model", "dataset",
 * ...): the largest delay_transfer delay firing now, else 0. Asks for a
 * transfer of priority 0 that is not a prefetch (the shipped pack holds
 * those while a GPU is hot); _transfer_delay_for says which. */
COHORT_API int cohort_gpu_monitor_transfer_delay(cohort_gpu_monitor* monitor, uint64_t bytes,
                                                 const char* kind, double* seconds);
/* As cohort_gpu_monitor_transfer_delay, for a transfer of `priority` (the
 * rule variable transfer_priority: the transfer's plus its workload's) that
 * is a read-ahead when `prefetch` is 1 (the variable prefetch), not when 0;
 * another prefetch is INVALID_ARGUMENT. */
COHORT_API int cohort_gpu_monitor_transfer_delay_for(cohort_gpu_monitor* monitor, uint64_t bytes,
                                                     const char* kind, int32_t priority, int32_t prefetch,
                                                     double* seconds);

/* ------------------------------------------------------------ collectives */

/* All-reduce, broadcast, barrier, allgather and reduce-scatter among `size`
 * ranks over TCP (docs/collectives.md). Ranks meet through a store: a
 * "tcp://HOST:PORT" server that rank 0 hosts, or a "file:///DIR" folder
 * every rank can reach; a communicator of size 1 needs none. Every rank
 * ends with identical bytes. A dead, silent or disagreeing peer fails the
 * operation within its timeout with an error naming it, never a hang; the
 * communicator is then broken (COHORT_ERR_CLOSED from every later
 * operation) and a new one must be created.
 *
 * Operations: every rank must issue the same operations with the same
 * arguments (counts, types, ops, roots) in the same order, from one thread
 * at a time per communicator (contract 10); otherwise every rank fails with
 * COHORT_ERR_MISMATCH. timeout_seconds bounds one operation: 0 means the
 * communicator's default (cohort_comm_options_set_timeout); a negative
 * value, or one above a year, is INVALID_ARGUMENT. Buffers stay the
 * caller's; a blocking call is done with them when it returns, an
 * asynchronous one when its work has finished (cohort_work_test says 1 or
 * cohort_work_wait returned its status). A NULL buffer is accepted only
 * with a count of 0.
 *
 * Failures: TIMEOUT (a peer never came, naming it), PEER_FAILED (a peer
 * died or sent garbage), MISMATCH (ranks called different operations or
 * arguments), CLOSED (the communicator is broken or closed),
 * PERMISSION_DENIED (a secret did not match), UNAVAILABLE (a peer or the
 * store cannot be reached), INVALID_ARGUMENT. */

/* Element types (cohort::DataType). */
#define COHORT_DTYPE_FLOAT32 0
#define COHORT_DTYPE_FLOAT64 1
#define COHORT_DTYPE_FLOAT16 2  /* IEEE 754 binary16 */
#define COHORT_DTYPE_BFLOAT16 3 /* the upper half of a float32 */
#define COHORT_DTYPE_INT32 4
#define COHORT_DTYPE_INT64 5
#define COHORT_DTYPE_UINT8 6

/* Reduction operators (cohort::ReduceOp). */
#define COHORT_OP_SUM 0
#define COHORT_OP_PROD 1
#define COHORT_OP_MIN 2
#define COHORT_OP_MAX 3
#define COHORT_OP_AVG 4 /* sum / ranks (integer division for integer types) */

/* All-reduce algorithms (cohort::Algorithm). */
#define COHORT_ALGO_AUTO 0         /* chosen by size and topology */
#define COHORT_ALGO_STAR 1         /* rank 0 gathers, reduces, sends back */
#define COHORT_ALGO_RING 2         /* reduce-scatter then allgather */
#define COHORT_ALGO_DOUBLING 3     /* recursive doubling, for small messages */
#define COHORT_ALGO_HIERARCHICAL 4 /* within hosts, then a ring of leaders */
#define COHORT_ALGO_SHM 5          /* every rank on one host, through shared memory */

/* How a rank's data reaches another (cohort::Transport), chosen at set-up,
 * best first: shared memory, direct copies (process_vm_readv), TCP. */
#define COHORT_TRANSPORT_SELF 0
#define COHORT_TRANSPORT_SHM 1
#define COHORT_TRANSPORT_DIRECT 2
#define COHORT_TRANSPORT_TCP 3

typedef struct cohort_comm_options cohort_comm_options;
typedef struct cohort_comm cohort_comm;
typedef struct cohort_work cohort_work;

/* Names: "float32", "sum", "ring", ...; "unknown" for a value outside the
 * constants. Static storage. */
COHORT_API const char* cohort_dtype_name(int32_t dtype);
COHORT_API const char* cohort_reduce_op_name(int32_t op);
COHORT_API const char* cohort_algorithm_name(int32_t algorithm);
/* "self", "shm", "direct", "tcp"; "unknown" outside the constants. */
COHORT_API const char* cohort_transport_name(int32_t transport);
/* Bytes per element of a COHORT_DTYPE_*; 0 for a value outside them. */
COHORT_API size_t cohort_dtype_size(int32_t dtype);
/* The constant for a name: the names above and, for dtypes, the aliases
 * float, double, half, bf16, int, long and byte; INVALID_ARGUMENT naming
 * the closest known name otherwise. */
COHORT_API int cohort_dtype_parse(const char* name, int32_t* dtype);
COHORT_API int cohort_reduce_op_parse(const char* name, int32_t* op);
COHORT_API int cohort_algorithm_parse(const char* name, int32_t* algorithm);

/* Options for cohort_comm_create; the communicator copies them, so they may
 * be destroyed or changed afterwards. Defaults: no store, job id "cohort",
 * generation 0, timeouts 60 s, secret $COHORT_SECRET, address
 * $COHORT_SOCKET_ADDR, else the interface $COHORT_SOCKET_IFNAME, else the
 * one routing to the store; host label the machine's host name; fusion
 * threshold 64 MiB, socket buffers 4 MiB, frames of at most 4 MiB. In the
 * string setters NULL or "" restores the default. */
COHORT_API int cohort_comm_options_create(cohort_comm_options** out);
COHORT_API void cohort_comm_options_destroy(cohort_comm_options* options);
/* Where ranks meet: "tcp://HOST:PORT" (rank 0 hosts the server; IPv6 as
 * [ADDR]:PORT), "file:///ABSOLUTE/DIR", "etcd://HOST:PORT[,...]/PREFIX"
 * (docs/launch-env.md) or "coordinator://HOST:PORT/JOB/GENERATION".
 * Checked by cohort_comm_create. */
COHORT_API int cohort_comm_options_set_store(cohort_comm_options* options, const char* url);
/* Connections refuse peers of another job id (1 to 256 bytes) or
 * generation; together they also keep jobs apart in a shared store. */
COHORT_API int cohort_comm_options_set_job_id(cohort_comm_options* options, const char* job_id);
COHORT_API int cohort_comm_options_set_generation(cohort_comm_options* options,
                                                  uint64_t generation);
/* The default timeout of each operation: > 0, at most a year. */
COHORT_API int cohort_comm_options_set_timeout(cohort_comm_options* options, double timeout_seconds);
/* Bounds the whole of cohort_comm_create (store, addresses, connections,
 * handshakes): > 0, at most a year. */
COHORT_API int cohort_comm_options_set_connect_timeout(cohort_comm_options* options, double timeout_seconds);
/* A shared secret of `length` bytes (any bytes; length 0 restores the
 * default): every connection proves both sides know it. secret may be NULL
 * only with length 0. */
COHORT_API int cohort_comm_options_set_secret(cohort_comm_options* options, const char* secret,
                                              size_t length);
/* TLS on every connection between ranks: the paths of
 * the PEM files of the CA that signs every rank's certificate, of this
 * rank's certificate and of its unencrypted private key. Both ends of each
 * connection check the other's certificate against the CA. All three, or
 * none (NULL or "": back to the default, $COHORT_TLS_CA, $COHORT_TLS_CERT
 * and $COHORT_TLS_KEY). The files are read by cohort_comm_create, which
 * fails with INVALID_ARGUMENT naming a file it cannot use, and with
 * PERMISSION_DENIED when a peer's certificate or TLS use does not match.
 * Direct copies between processes are off under TLS. */
COHORT_API int cohort_comm_options_set_tls(cohort_comm_options* options, const char* ca_file,
                                           const char* cert_file, const char* key_file);
/* The address to listen on and advertise: "HOST" or "HOST:PORT". */
COHORT_API int cohort_comm_options_set_address(cohort_comm_options* options,
                                               const char* address);
/* The network interface whose address to use ("eth0"). */
COHORT_API int cohort_comm_options_set_ifname(cohort_comm_options* options, const char* ifname);
/* The host this rank is on, for the hierarchical algorithm: ranks with equal
 * labels share a host. */
COHORT_API int cohort_comm_options_set_host_label(cohort_comm_options* options,
                                                  const char* label);
/* Named all-reduce packs tensors into buffers of at most this many bytes
 * (>= 1). */
COHORT_API int cohort_comm_options_set_fusion_threshold(cohort_comm_options* options,
                                                        uint64_t bytes);
/* SO_SNDBUF / SO_RCVBUF, at most 1 GiB; 0 keeps the kernel's default. */
COHORT_API int cohort_comm_options_set_socket_buffer(cohort_comm_options* options,
                                                     uint64_t bytes);
/* The largest frame sent or accepted, 4 KiB to 256 MiB; messages are cut
 * into frames of at most this size. Every rank must use the same. */
COHORT_API int cohort_comm_options_set_max_frame(cohort_comm_options* options, uint64_t bytes);
/* The bytes of the shared-memory segment a host's ranks share, at most
 * 64 GiB; 0 turns shared memory off. Default $COHORT_SHM_SIZE, else 8 MiB.
 * A segment that cannot be made is no error: the host falls back to direct
 * copies or TCP (cohort_comm_describe says why). Every rank of a host must
 * use the same size. */
COHORT_API int cohort_comm_options_set_shm_size(cohort_comm_options* options, uint64_t bytes);

/* Joins the communicator as `rank` of `size` (0 <= rank < size): meets the
 * other ranks through the store and connects to each; blocks until all have
 * come or the connect timeout passes. options NULL means the defaults
 * (enough for size 1). TIMEOUT names the ranks that never registered;
 * UNAVAILABLE or PERMISSION_DENIED say what differed when a peer refuses
 * the handshake. Pairs with cohort_comm_destroy. */
COHORT_API int cohort_comm_create(int32_t rank, int32_t size, const cohort_comm_options* options,
                                  cohort_comm** out);
/* Closes (as cohort_comm_close, errors ignored) and frees. NULL is ignored.
 * Must not overlap any other call on the communicator; its works stay
 * valid (cohort_work_destroy). */
COHORT_API void cohort_comm_destroy(cohort_comm* comm);
/* Says goodbye to the peers (they see a clean close, not a failure) and
 * releases the sockets, after running the asynchronous operations already
 * issued (each fails at once if the communicator is broken). Later
 * operations fail with COHORT_ERR_CLOSED; closing twice is a no-op. An
 * operation, so one thread at a time (contract 10). */
COHORT_API int cohort_comm_close(cohort_comm* comm);
COHORT_API int cohort_comm_rank(const cohort_comm* comm, int32_t* rank);
COHORT_API int cohort_comm_size(const cohort_comm* comm, int32_t* size);
/* 1 once an operation failed and broke the communicator (or it was
 * closed), else 0. Never waits: a watchdog thread may call it while an
 * operation runs. */
COHORT_API int cohort_comm_is_broken(const cohort_comm* comm, int32_t* broken);
/* Why it broke ("" while healthy); free with cohort_free. Never waits. */
COHORT_API int cohort_comm_broken_reason(const cohort_comm* comm, char** reason, size_t* length);
/* The ranks (ascending) whose process exited or died while connected:
 * their connection ended between frames with no goodbye and no abort frame
 * (Communicator::dead_ranks). A rank that closed its communicator, gave
 * up, broke off mid-frame or only went silent is not among them. What a
 * survivor reports to the coordinator (cohort_membership_report_dead).
 * Always sets *count to the full count; fills `ranks` only if capacity >=
 * count, else returns COHORT_ERR_BUFFER_TOO_SMALL (call with NULL and
 * capacity 0 to size the buffer). Never waits. */
COHORT_API int cohort_comm_dead_ranks(const cohort_comm* comm, int32_t* ranks, size_t capacity, size_t* count);
/* Breaks the communicator from any thread (the one exception to contract
 * 7 besides the queries): the operation under way, or else the next one,
 * fails with COHORT_ERR_CLOSED and "aborted: REASON", and the peers are
 * told, so theirs fail at once too, naming this rank. For a watchdog that
 * knows the world is over while a peer that stopped keeps an operation
 * waiting. A no-op once broken or closed. Must not overlap
 * cohort_comm_destroy. `reason` may be NULL. */
COHORT_API int cohort_comm_abort(cohort_comm* comm, const char* reason);
/* The host label rank `rank` registered; borrowed from the communicator
 * (valid until it is destroyed). OUT_OF_RANGE for a rank >= size. */
COHORT_API int cohort_comm_host(const cohort_comm* comm, int32_t rank, const char** host);
/* The algorithm (COHORT_ALGO_*, never AUTO) that COHORT_ALGO_AUTO picks for
 * an all-reduce of `bytes` bytes. */
COHORT_API int cohort_comm_choose(const cohort_comm* comm, uint64_t bytes, int32_t* algorithm);
/* How this rank exchanges data with rank `rank` (COHORT_TRANSPORT_*).
 * OUT_OF_RANGE for a rank outside 0..size-1. */
COHORT_API int cohort_comm_transport(const cohort_comm* comm, int32_t rank, int32_t* transport);
/* What the set-up chose, as a JSON object (UTF-8, NUL-terminated): "rank",
 * "size", "hosts", "transports" (names by rank), "shm" ({"bytes",
 * "slot_bytes", "ranks"} or null), "listen" ({"address", "port",
 * "chosen_by"}: where this rank listens and why there; null for one rank)
 * "shm_unavailable" (why this host's ranks share no memory although it
 * was wanted, or null) and "direct_unavailable" ({"rank": why} for the
 * peers reached over TCP rather than by direct copies, or null). Free with
 * cohort_free. */
COHORT_API int cohort_comm_describe(const cohort_comm* comm, char** json, size_t* length);

/* Reduces `count` elements of `dtype` across the ranks with `op`; every
 * rank's `out` gets the result. in and out may be the same buffer (in
 * place) but must not otherwise overlap. algorithm: COHORT_ALGO_*, the
 * same on every rank. */
COHORT_API int cohort_comm_allreduce(cohort_comm* comm, const void* in, void* out, uint64_t count, int32_t dtype,
                                     int32_t op, int32_t algorithm, double timeout_seconds);
/* Rank `root`'s `bytes` bytes of `data` end in every rank's `data`. */
COHORT_API int cohort_comm_broadcast(cohort_comm* comm, void* data, uint64_t bytes, int32_t root,
                                     double timeout_seconds);
/* Returns once every rank has called it. */
COHORT_API int cohort_comm_barrier(cohort_comm* comm, double timeout_seconds);
/* Every rank contributes `bytes` bytes of `in`; `out` (size * bytes bytes)
 * gets them in rank order. */
COHORT_API int cohort_comm_allgather(cohort_comm* comm, const void* in, void* out, uint64_t bytes,
                                     double timeout_seconds);
/* `in` holds size * count elements; rank r's `out` (count elements) gets
 * the reduction of block r. */
COHORT_API int cohort_comm_reduce_scatter(cohort_comm* comm, const void* in, void* out, uint64_t count, int32_t dtype,
                                          int32_t op, double timeout_seconds);
/* Reduces `n` named buffers in place: buffers[i] holds counts[i] elements
 * of dtypes[i] and is called names[i]. Small buffers are packed together
 * (up to the fusion threshold) in name order, so one call moves many small
 * tensors in few messages. Every rank must pass the same names, counts and
 * types (in any order); names must be distinct (INVALID_ARGUMENT names the
 * duplicate). The arrays may be NULL when n is 0. */
COHORT_API int cohort_comm_allreduce_named(cohort_comm* comm, size_t n, const char* const* names, void* const* buffers,
                                           const uint64_t* counts, const int32_t* dtypes, int32_t op,
                                           double timeout_seconds);

/* Asynchronous forms: check the arguments, queue the operation behind those
 * issued before and return at once with a work handle (pair with
 * cohort_work_destroy). Operations run in issue order on the communicator's
 * own thread; a blocking call issued later waits for them. The buffers
 * must stay valid, and must not be touched, until the work has finished. */
COHORT_API int cohort_comm_allreduce_async(cohort_comm* comm, const void* in, void* out, uint64_t count, int32_t dtype,
                                           int32_t op, int32_t algorithm, double timeout_seconds, cohort_work** work);
COHORT_API int cohort_comm_broadcast_async(cohort_comm* comm, void* data, uint64_t bytes, int32_t root,
                                           double timeout_seconds, cohort_work** work);
COHORT_API int cohort_comm_barrier_async(cohort_comm* comm, double timeout_seconds, cohort_work** work);
COHORT_API int cohort_comm_allgather_async(cohort_comm* comm, const void* in, void* out, uint64_t bytes,
                                           double timeout_seconds, cohort_work** work);
COHORT_API int cohort_comm_reduce_scatter_async(cohort_comm* comm, const void* in, void* out, uint64_t count,
                                                int32_t dtype, int32_t op, double timeout_seconds, cohort_work** work);

/* *done = 1 once the operation finished (successfully or not), else 0.
 * Never blocks. */
COHORT_API int cohort_work_test(const cohort_work* work, int32_t* done);
/* Waits for the operation and returns its status, with its message in
 * cohort_last_error() (the same again if called again). limit_seconds 0 waits
 * until it finishes (its own timeout bounds that); a positive limit (at
 * most a year) gives up after that long with COHORT_ERR_TIMEOUT while the
 * operation goes on. Several threads may test and wait on one work. */
COHORT_API int cohort_work_wait(cohort_work* work, double limit_seconds);
/* Releases the handle only: the operation is not cancelled and goes on, and
 * its buffers must stay valid until it has finished (a later blocking
 * operation on the same communicator, cohort_comm_close and
 * cohort_comm_destroy return only after it). NULL is ignored. A work may
 * outlive its communicator: destroying that finishes or fails every queued
 * operation first, so the work then reports how its operation ended.
 * Must not overlap another call on the same work. */
COHORT_API void cohort_work_destroy(cohort_work* work);

/* ------------------------------------------------------- launch environment */

/* Rank, world size and store from the variables a launcher sets
 * (docs/launch-env.md). The first source found wins:
 *   "cohort"   COHORT_RANK, COHORT_WORLD_SIZE (+ COHORT_LOCAL_RANK,
 *              COHORT_LOCAL_WORLD_SIZE, COHORT_NODE_RANK)
 *   "torchrun" RANK, WORLD_SIZE (+ LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK)
 *   "openmpi"  OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE
 *              (+ OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE)
 *   "slurm"    SLURM_PROCID, SLURM_NTASKS (+ SLURM_LOCALID, SLURM_NODEID,
 *              SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE)
 *   "none"     nothing found: rank 0 of a world of 1.
 * The store is $COHORT_STORE whatever the source, else
 * "tcp://$MASTER_ADDR:$MASTER_PORT", else none (""). An empty variable
 * counts as unset. A non-number, a negative or out-of-range value, or half
 * a pair (RANK without WORLD_SIZE) is INVALID_ARGUMENT naming the variable
 * and its value. The process environment is read once, when the handle is
 * made; later changes to it are not seen. */

typedef struct cohort_launch_env cohort_launch_env;

/* Reads the process environment. Pairs with cohort_launch_env_destroy. */
COHORT_API int cohort_launch_env_from_env(cohort_launch_env** out);
/* NULL is ignored. */
COHORT_API void cohort_launch_env_destroy(cohort_launch_env* env);
/* 0 <= rank < world_size. */
COHORT_API int cohort_launch_env_rank(const cohort_launch_env* env, int32_t* rank);
COHORT_API int cohort_launch_env_world_size(const cohort_launch_env* env, int32_t* world_size);
/* -1 where the launcher does not say: Open MPI gives no node rank, and the
 * COHORT_LOCAL_* or torchrun LOCAL_* variables may be missing. A world of 1
 * is always local rank 0 of 1 on node 0. */
COHORT_API int cohort_launch_env_local_rank(const cohort_launch_env* env, int32_t* local_rank);
COHORT_API int cohort_launch_env_local_world_size(const cohort_launch_env* env,
                                                  int32_t* local_world_size);
COHORT_API int cohort_launch_env_node_rank(const cohort_launch_env* env, int32_t* node_rank);
/* The store URL, "" when none; borrowed from the handle. */
COHORT_API int cohort_launch_env_store(const cohort_launch_env* env, const char** store);
/* "cohort", "torchrun", "openmpi", "slurm" or "none"; borrowed from the
 * handle. */
COHORT_API int cohort_launch_env_source(const cohort_launch_env* env, const char** source);
/* What was read from which variable, and what was set but ignored, one
 * line each ("rank 2 from OMPI_COMM_WORLD_RANK"), for logs. */
COHORT_API int cohort_launch_env_note_count(const cohort_launch_env* env, uint32_t* count);
/* Note `index` (< count, else OUT_OF_RANGE); borrowed from the handle. */
COHORT_API int cohort_launch_env_note(const cohort_launch_env* env, uint32_t index,
                                      const char** note);

/* Reads the process environment as cohort_launch_env_from_env does and joins
 * the communicator as that rank of that world size (cohort_comm_create).
 * options may be NULL (the defaults); its store, when set, wins over the
 * environment's. *source, when source is not NULL, receives the source used
 * ("cohort", "torchrun", "openmpi" or "slurm"; static storage). Fails with
 * NOT_FOUND listing the variables looked for when none is set,
 * INVALID_ARGUMENT for malformed variables or when a world of more than one
 * rank has no store (saying to set COHORT_STORE), then as
 * cohort_comm_create. Pairs with cohort_comm_destroy. */
COHORT_API int cohort_comm_from_env(const cohort_comm_options* options, const char** source, cohort_comm** out);

/* ------------------------------------------------------------- coordinator */

/* The elastic coordinator (docs/coordinator.md): a server hosted in this
 * process, and a client of any coordinator's HTTP API. */

typedef struct cohort_coordinator cohort_coordinator;

/* Starts serving on its own thread. host NULL or "": 127.0.0.1; port 0: any
 * free port; token NULL: $COHORT_COORDINATOR_TOKEN, "": no token needed;
 * data_dir NULL or "": state in memory only. UNAVAILABLE when the address
 * cannot be bound. Pairs with cohort_coordinator_destroy. */
COHORT_API int cohort_coordinator_create(const char* host, uint16_t port, const char* token,
                                         const char* data_dir, cohort_coordinator** out);
/* The same with every option as one JSON object (options_json NULL or "":
 * the defaults), as CoordinatorOptions and cohort-coordinator's flags name
 * them: "host", "port", "token", "data_dir", "max_members",
 * "idempotency_window" (seconds), "idempotency_keys", and for high
 * availability (docs/coordinator.md, "High availability") "etcd" (endpoints,
 * "host:2379,https://host2:2379"), "etcd_prefix", "etcd_cacert",
 * "etcd_cert", "etcd_key", "etcd_user", "etcd_password", "leader_ttl"
 * (whole seconds), "advertise_url", "replica_id"; for HTTPS (PEM files)
 * "tls_cert", "tls_key" and "tls_client_ca" (clients must then present a
 * certificate this CA signed); and the connection limits
 * "max_connections", "max_connections_per_client" (0 to 65536, 0: the
 * default), "idle_timeout", "crowded_idle_timeout" (seconds). An HTTPS
 * coordinator's cohort_coordinator_url is "https://...". INVALID_ARGUMENT naming
 * the field for an unknown field or a value of the wrong type, then as
 * cohort_coordinator_create. Pairs with cohort_coordinator_destroy. */
COHORT_API int cohort_coordinator_from_json(const char* options_json, cohort_coordinator** out);
/* Stops (closing every connection) and releases. NULL is ignored. */
COHORT_API void cohort_coordinator_destroy(cohort_coordinator* coordinator);
COHORT_API int cohort_coordinator_port(const cohort_coordinator* coordinator, uint16_t* port);
/* "http://127.0.0.1:PORT"; borrowed from the handle. */
COHORT_API int cohort_coordinator_url(const cohort_coordinator* coordinator, const char** url);

typedef struct cohort_coordinator_client cohort_coordinator_client;

/* A client of the coordinator at url ("http://HOST:PORT"; its replicas as
 * "http://HOST:PORT,http://HOST:PORT"; or "etcd://HOST:PORT/PREFIX" to find
 * their leader through etcd: the client follows the leader, see
 * docs/coordinator.md). token NULL:
 * $COHORT_COORDINATOR_TOKEN. request_timeout_seconds bounds one HTTP exchange
 * (0: 10 s); failed connections and 5xx answers are retried with backoff
 * until retry_deadline_seconds has passed (negative: 30 s; 0: no retry). Errors
 * by HTTP status: 400 INVALID_ARGUMENT, 401 PERMISSION_DENIED, 404
 * NOT_FOUND, 408 TIMEOUT, 409 MISMATCH, 503 UNAVAILABLE; no answer before
 * the deadline is UNAVAILABLE naming the URL and the last connection error.
 * One client may be used from several threads at once. Pairs with
 * cohort_coordinator_client_destroy. */
COHORT_API int cohort_coordinator_client_create(const char* url, const char* token, double request_timeout_seconds,
                                                double retry_deadline_seconds, cohort_coordinator_client** out);
/* NULL is ignored. */
COHORT_API void cohort_coordinator_client_destroy(cohort_coordinator_client* client);

/* Creates job `job` (or finds it with the same settings). settings_json
 * NULL or "": the defaults, else a JSON object ({"min_nodes": 2, ...}). */
COHORT_API int cohort_coordinator_client_ensure_job(cohort_coordinator_client* client, const char* job,
                                                    const char* settings_json);
/* The job's state as JSON; free *json with cohort_free. */
COHORT_API int cohort_coordinator_client_job_state(cohort_coordinator_client* client, const char* job, char** json,
                                                   size_t* length);
/* Joins node `id` (host and address, its data-plane "HOST:PORT", may be
 * NULL). *active is 1 when the join closed a round with it (then *rank is
 * its rank), else 0 and *rank is -1. Any out-parameter may be NULL. */
COHORT_API int cohort_coordinator_client_join(cohort_coordinator_client* client, const char* job, const char* id,
                                              const char* host, const char* address, uint64_t* generation,
                                              int32_t* active, int32_t* rank);
/* generation: the member's world's while active, 0 while waiting. Metrics
 * below 0 are not sent. *rendezvous is 1 when a new round is open: leave
 * the communicator, join again, read the new world. Out-parameters may be
 * NULL. */
COHORT_API int cohort_coordinator_client_heartbeat(cohort_coordinator_client* client, const char* job,
                                                   const char* member, uint64_t generation, int64_t step,
                                                   double step_time, double samples_per_sec, uint64_t* job_generation,
                                                   int32_t* active, int32_t* rendezvous);
COHORT_API int cohort_coordinator_client_leave(cohort_coordinator_client* client, const char* job, const char* member);
/* Leaves on the member's behalf marking it failed, with why (a launcher that
 * saw its worker die): the member is "failed" at once, not after
 * failure_timeout, and the job opens a new round. `failure` must not be
 * NULL or empty. */
COHORT_API int cohort_coordinator_client_leave_failed(cohort_coordinator_client* client, const char* job,
                                                      const char* member, const char* failure);
/* The member's world as JSON, as GET .../world answers it: {"state":
 * "active", "generation", "rank", "world_size", "local_rank",
 * "local_world_size", "node_rank", "peers": [{"rank", "id", "host",
 * "address"}]} ({"state": "waiting", "generation"} while it waits); free
 * *json with cohort_free. */
COHORT_API int cohort_coordinator_client_world(cohort_coordinator_client* client, const char* job, const char* member,
                                               char** json, size_t* length);
/* Heartbeats at the job's interval until the member has a world, then as
 * cohort_coordinator_client_world; TIMEOUT after timeout_seconds. */
COHORT_API int cohort_coordinator_client_wait_for_world(cohort_coordinator_client* client, const char* job,
                                                        const char* member, double timeout_seconds, char** json,
                                                        size_t* length);
/* The store of the job's generation `generation` (MISMATCH once that is
 * not the current one). Values are bytes. */
COHORT_API int cohort_coordinator_client_store_set(cohort_coordinator_client* client, const char* job,
                                                   uint64_t generation, const char* key, const void* value,
                                                   size_t length);
/* Waits up to timeout_seconds (0: not at all, NOT_FOUND when absent; TIMEOUT
 * after a wait) for the key. *value gets the bytes plus a NUL; free it with
 * cohort_free. */
COHORT_API int cohort_coordinator_client_store_get(cohort_coordinator_client* client, const char* job,
                                                   uint64_t generation, const char* key, double timeout_seconds,
                                                   char** value, size_t* length);
/* Adds delta to the integer stored under key (absent: 0) and gives the sum
 * in *value (may be NULL). INVALID_ARGUMENT when the value stored is not a
 * decimal integer. */
COHORT_API int cohort_coordinator_client_store_add(cohort_coordinator_client* client, const char* job,
                                                   uint64_t generation, const char* key, int64_t delta, int64_t* value);
/* Stores `desired` when the key's value equals `expected` (expected NULL:
 * when the key is absent). *stored (may be NULL) is 1 when it stored;
 * *current gets the value after the call plus a NUL (NULL when the key is
 * absent); free it with cohort_free. current may be NULL. */
COHORT_API int cohort_coordinator_client_store_compare_and_set(cohort_coordinator_client* client, const char* job,
                                                               uint64_t generation, const char* key,
                                                               const void* expected, size_t expected_length,
                                                               const void* desired, size_t desired_length,
                                                               int32_t* stored, char** current, size_t* current_length);
/* Waits up to timeout_seconds for every one of the `count` keys; TIMEOUT naming
 * the keys still missing. */
COHORT_API int cohort_coordinator_client_store_wait(cohort_coordinator_client* client, const char* job,
                                                    uint64_t generation, const char* const* keys, size_t count,
                                                    double timeout_seconds);
/* Deletes the key; *deleted (may be NULL) is 1 when it was there. */
COHORT_API int cohort_coordinator_client_store_delete(cohort_coordinator_client* client, const char* job,
                                                      uint64_t generation, const char* key, int32_t* deleted);
/* A heartbeat with any metrics (NULL: none) as JSON, in the form of the
 * heartbeat route (docs/coordinator.md, "Heartbeats"): {"step",
 * "step_time", "samples_per_sec", "data_wait", "collective_wait",
 * "collective_seq", "in_collective", "gpu", "samples": [{"age", "step",
 * ...}]}. *reply gets the answer: {"generation", "state", "rendezvous"
 * and, while active, "rank", "world_size"}; free it with cohort_free.
 * INVALID_ARGUMENT naming the field for metrics of the wrong shape. */
COHORT_API int cohort_coordinator_client_heartbeat_json(cohort_coordinator_client* client, const char* job,
                                                        const char* member, uint64_t generation,
                                                        const char* metrics_json, char** reply, size_t* length);
/* Registers the job's dataset ({"shards": [{"id", "bytes"?, "hosts"?}],
 * "epochs"?, "shuffle"?, "seed"?, "lease_duration"?}). */
COHORT_API int cohort_coordinator_client_register_dataset(cohort_coordinator_client* client, const char* job,
                                                          const char* plan_json);
/* The member's next shard lease as JSON: {"granted", "finished", and when
 * granted "lease", "shard_id", "shard", "epoch", "bytes", "expiry"}; free
 * *json with cohort_free. */
COHORT_API int cohort_coordinator_client_next_shard(cohort_coordinator_client* client, const char* job,
                                                    const char* member, char** json, size_t* length);
/* Outcomes of a lease reported done (cohort_*_shard_done). */
#define COHORT_SHARD_COUNTED 0      /* this report counted the shard */
#define COHORT_SHARD_COUNTED_LATE 1 /* the lease had expired, but the shard was not done yet */
#define COHORT_SHARD_ALREADY_DONE 2 /* someone reported the shard first: not counted again */

/* Reports a lease done; *outcome (may be NULL) is a COHORT_SHARD_*
 * constant. */
COHORT_API int cohort_coordinator_client_shard_done(cohort_coordinator_client* client, const char* job,
                                                    const char* member, uint64_t lease, int32_t* outcome);
/* Outcomes of a lease given back (cohort_*_shard_release). */
#define COHORT_SHARD_RELEASED 0 /* the shard goes to the next member that asks, now */
#define COHORT_SHARD_REQUEUED 1 /* it was back in the queue already (expired, member removed, given back) */
#define COHORT_SHARD_REPORTED 2 /* the lease was reported done: nothing to give back */

/* Gives an outstanding lease of `member` back unread (a loader that stops
 * with shards read ahead), so its shard need not wait for the lease to
 * expire; *outcome (may be NULL) is a COHORT_SHARD_RELEASED, _REQUEUED or
 * _REPORTED constant. NOT_FOUND for a member or lease the job does not
 * have, INVALID_ARGUMENT for a lease granted to another member. */
COHORT_API int cohort_coordinator_client_shard_release(cohort_coordinator_client* client, const char* job,
                                                       const char* member, uint64_t lease, int32_t* outcome);

/* -------------------------------------------------------------- membership */

/* This process as a member of an elastic job (docs/elastic.md): it joins the
 * coordinator, heartbeats on a thread of its own with the metrics recorded
 * below, says when a new round opens, and builds each world's communicator
 * on the coordinator's store. Unlike other handles, every call on a
 * membership but destroy may overlap any other (it locks). */

typedef struct cohort_membership cohort_membership;

/* coordinator: "http://HOST:PORT" or "HOST:PORT", a comma-separated list of
 * those (the replicas), or "etcd://HOST:PORT/PREFIX"; job: the job to join.
 * member NULL or "": HOST-PID; host NULL or "": the machine's host name. The
 * token is $COHORT_COORDINATOR_TOKEN. Contacts nobody yet. Pairs with
 * cohort_membership_destroy. */
COHORT_API int cohort_membership_create(const char* coordinator, const char* job, const char* member,
                                        const char* host, cohort_membership** out);
/* The same from $COHORT_COORDINATOR, $COHORT_JOB, $COHORT_ROLE (role
 * groups, below), $COHORT_MEMBER, $COHORT_HOST,
 * $COHORT_COORDINATOR_TOKEN and $COHORT_GENERATION (set by a launcher that
 * joined this member already: it is not joined again). INVALID_ARGUMENT
 * naming the variable when one is missing or malformed. Pairs with
 * cohort_membership_destroy. */
COHORT_API int cohort_membership_from_env(cohort_membership** out);
/* Stops heartbeating (waiting at most for the heartbeat under way) without
 * leaving the job. NULL is ignored. */
COHORT_API void cohort_membership_destroy(cohort_membership* membership);
/* The member's id and job; borrowed from the handle. */
COHORT_API int cohort_membership_member(const cohort_membership* membership, const char** member);
COHORT_API int cohort_membership_job(const cohort_membership* membership, const char** job);

/* Joins (or, after cohort_membership_round_pending said so, joins the new
 * round), heartbeats, and waits up to timeout_seconds for the member's world:
 * {"state": "active", "generation", "rank", "world_size", "local_rank",
 * "local_world_size", "node_rank"}; free *world_json with cohort_free.
 * With no round pending it returns the current world at once. TIMEOUT when
 * the round has not closed in time (the member keeps waiting in the job:
 * call again); NOT_FOUND for an unknown job. */
COHORT_API int cohort_membership_next_world(cohort_membership* membership, double timeout_seconds, char** world_json,
                                            size_t* length);
/* *pending is 1 once a heartbeat answer said a new round is open (or the
 * member is no longer in its world): finish or abandon the step, destroy
 * the communicator, call cohort_membership_next_world. */
COHORT_API int cohort_membership_round_pending(const cohort_membership* membership, int32_t* pending);
/* Asks the coordinator for a new round now (after a failed collective);
 * *pending (may be NULL) is then as cohort_membership_round_pending says,
 * 1 at once when the coordinator has a round open. */
COHORT_API int cohort_membership_request_round(cohort_membership* membership, int32_t* pending);
/* After a collective failed on `comm` (the communicator of the last world):
 * tells the coordinator which members of that world died (the ranks of
 * cohort_comm_dead_ranks, mapped to member ids), so it marks them failed
 * at once instead of waiting last_call for them, then asks for a round as
 * cohort_membership_request_round. *reported (may be NULL) gets how many
 * members were reported, *pending (may be NULL) as
 * cohort_membership_round_pending. A refused report (this member is
 * stale, the world moved on) is no error. */
COHORT_API int cohort_membership_report_dead(cohort_membership* membership, const cohort_comm* comm, int32_t* reported,
                                             int32_t* pending);
/* A communicator for the last world, bootstrapped on the coordinator's store
 * of its generation (blocks until every rank of the world made one).
 * INVALID_ARGUMENT before the first world. Pairs with cohort_comm_destroy. */
COHORT_API int cohort_comm_from_membership(const cohort_membership* membership, cohort_comm** out);

/* One training step for the next heartbeat, in seconds; a negative value is
 * not measured and not sent. At most 64 steps are kept between two
 * heartbeats, the oldest dropped first. */
COHORT_API int cohort_membership_record_step(cohort_membership* membership, uint64_t step, double step_time,
                                             double samples_per_sec, double data_wait,
                                             double collective_wait);
/* The collective the program is in (inside 1) or last left (inside 0), by
 * its sequence number: hang diagnosis names the ranks that never entered
 * the collective the others wait in. */
COHORT_API int cohort_membership_set_collective(cohort_membership* membership, uint64_t sequence,
                                                int32_t inside);
/* GPU samples (any JSON value, e.g. a GPU monitor's) sent with the
 * heartbeats from now on; NULL or "" sends none. INVALID_ARGUMENT when it
 * is not JSON. */
COHORT_API int cohort_membership_set_gpu_json(cohort_membership* membership, const char* json);

/* The member's next shard lease, as cohort_coordinator_client_next_shard; free
 * *json with cohort_free. */
COHORT_API int cohort_membership_next_shard(cohort_membership* membership, char** json, size_t* length);
/* Reports a lease done, as cohort_coordinator_client_shard_done. */
COHORT_API int cohort_membership_shard_done(cohort_membership* membership, uint64_t lease, int32_t* outcome);
/* Gives a lease back unread, as cohort_coordinator_client_shard_release. */
COHORT_API int cohort_membership_shard_release(cohort_membership* membership, uint64_t lease, int32_t* outcome);

/* Stops heartbeating and says goodbye: the job opens a new round at once.
 * Calling it again does nothing; cohort_membership_next_world joins again. */
COHORT_API int cohort_membership_leave(cohort_membership* membership);

/* ------------------------------------ data path: workloads and transfers */

/* The GPU workloads of a node and a scheduler of file reads steered by the
 * GPUs (docs/data.md). Like GPU monitors, a registry and a scheduler lock:
 * every call on one but its destroy may overlap any other. A scheduler
 * starts threads of its own (a dispatcher and `workers` I/O threads), and
 * calls the callbacks below on them: a policy on the dispatcher thread, a
 * completion callback on an I/O thread, a registry's liveness check on
 * whichever thread prunes (the scheduler's dispatcher included). Callbacks
 * must return, must not throw, and must neither wait for a transfer of
 * the same scheduler nor destroy it.
 *
 * A workload, as cohort_workload_registry_add takes it and _find and _list
 * give it back (free with cohort_free):
 *   {"id", "pid", "gpus": [GPU indices], "memory_bytes", "priority",
 *    "dataset_files": [...], "model_files": [...], "access": "sequential"|
 *    "random", and in answers only "io_bytes_per_second", "batch_size",
 *    "epoch_seconds" (0: not reported), "gpu_memory": [{"gpu", "bytes"}]
 *    (what its process holds per GPU, from the last observation),
 *    "gpu_memory_total"}.
 * A transfer's result (cohort_transfer_result, and a completion callback):
 *   {"id", "status": COHORT_OK or a COHORT_ERR_* code, "error" (naming the
 *    file and the offset), "bytes", "staged" (the staging file, "" if not
 *    staged; the caller removes it), "missed_deadline", "waited_seconds",
 *    "seconds", "decisions": [DECISION...]},
 * and a decision (also cohort_transfer_scheduler_explain's array):
 *   {"at_seconds" (after submit), "rule" ("scheduler" for its own),
 *    "action" (delay_transfer, prioritize, reduce_prefetch, stage_transfer,
 *    dispatch, deadline, policy), "values": {NAME: number}, "effect" (in
 *    words), "delay_seconds"}. */

typedef struct cohort_workload_registry cohort_workload_registry;
typedef struct cohort_transfer_scheduler cohort_transfer_scheduler;
typedef struct cohort_transfer cohort_transfer;
typedef struct cohort_transfer_actions cohort_transfer_actions;

/* Whether process `pid` still runs: 1 yes, 0 it ended. */
typedef int32_t (*cohort_pid_alive_fn)(void* user_data, int64_t pid);

/* An empty registry. alive NULL: a process has ended when kill(pid, 0) says
 * ESRCH, /proc shows a zombie, or the pid was reused by a newer process;
 * else alive(user_data, pid) decides (pids of another PID namespace, tests).
 * Pairs with cohort_workload_registry_destroy. */
COHORT_API int cohort_workload_registry_create(cohort_pid_alive_fn alive, void* user_data,
                                               cohort_workload_registry** out);
/* NULL is ignored. A scheduler given the registry must be destroyed first. */
COHORT_API void cohort_workload_registry_destroy(cohort_workload_registry* registry);
/* Registers a workload (JSON as above; "id", "pid" and "memory_bytes" are
 * required). INVALID_ARGUMENT naming the field for JSON of the wrong shape,
 * an unknown field, an empty id, a pid <= 0, a memory_bytes of 0, a GPU
 * listed twice, an empty file path, or an id already registered; NOT_FOUND
 * when the process is not running. */
COHORT_API int cohort_workload_registry_add(cohort_workload_registry* registry, const char* workload_json);
/* NOT_FOUND for an id that is not registered. */
COHORT_API int cohort_workload_registry_remove(cohort_workload_registry* registry, const char* id);
/* The live figures the workload reports (0: unknown). NOT_FOUND for an id
 * that is not registered; INVALID_ARGUMENT naming the figure for a negative
 * or non-finite one. */
COHORT_API int cohort_workload_registry_update(cohort_workload_registry* registry, const char* id,
                                               double io_bytes_per_second, uint64_t batch_size,
                                               double epoch_seconds);
/* Per-process GPU memory from the monitor's latest sample (each GPU's
 * process list, where the backend gives one). NOT_FOUND before the
 * monitor's first sample. */
COHORT_API int cohort_workload_registry_observe_monitor(cohort_workload_registry* registry,
                                                        const cohort_gpu_monitor* monitor);
/* Per-process GPU memory the caller measured: bytes[i] for pids[i], counted
 * on each workload's first GPU (GPU 0 when it lists none). INVALID_ARGUMENT
 * for a pid listed twice. */
COHORT_API int cohort_workload_registry_observe_memory(cohort_workload_registry* registry,
                                                       const int64_t* pids, const uint64_t* bytes,
                                                       size_t count);
/* The workload as JSON; NOT_FOUND when it is not registered or its process
 * ended (then it is dropped here). */
COHORT_API int cohort_workload_registry_find(cohort_workload_registry* registry, const char* id,
                                             char** json, size_t* length);
/* Every live workload, by id: a JSON array (the dead ones dropped first). */
COHORT_API int cohort_workload_registry_list(cohort_workload_registry* registry, char** json,
                                             size_t* length);
/* Drops the workloads whose process ended; *json (json may be NULL) gets
 * the JSON array of their ids. */
COHORT_API int cohort_workload_registry_prune(cohort_workload_registry* registry, char** json,
                                              size_t* length);
/* Workloads registered, the dead ones not yet dropped included. */
COHORT_API int cohort_workload_registry_size(const cohort_workload_registry* registry,
                                             uint64_t* size);

/* The scheduler's counters and queue now (TransferStats, docs/data.md,
 * "Metrics"). The layout is part of the ABI: it changes only with the major
 * version. */
typedef struct cohort_transfer_stats {
    uint64_t queued;  /* waiting now, held ones included */
    uint64_t held;    /* of which held by delay_transfer now */
    uint64_t running; /* started and not done */
    uint64_t submitted;
    uint64_t completed;
    uint64_t failed;
    uint64_t dropped;        /* never started: shutdown, a workload that ended */
    uint64_t delayed;        /* transfers held at least once */
    uint64_t prioritized;    /* transfers a prioritize action boosted */
    uint64_t staged;
    uint64_t prefetch_waits; /* prefetch transfers held back by the depth */
    uint64_t misses;         /* finished after their deadline */
    uint64_t bytes;          /* read so far */
    uint64_t memory_pressure_events; /* decisions on a rule of category "memory" */
    uint64_t temperature_events;     /* ... of category "thermal" */
    uint64_t prefetch_depth;         /* prefetch transfers allowed to run now */
    double total_delay_seconds;      /* the holds decided, added up */
    double bytes_per_second;         /* bytes over the seconds since the scheduler was made */
    double prefetch_factor;          /* the last reduce_prefetch factor (1: none) */
} cohort_transfer_stats;

/* A policy: the actions that apply to a transfer now, added to `actions`
 * (borrowed for the call) with cohort_transfer_actions_add. id, workload
 * and kind are borrowed for the call; priority is the transfer's plus its
 * workload's; prefetch is 1 for a read ahead of need. Return 0; anything
 * else is recorded as a "policy" decision (with the message of
 * cohort_transfer_actions_set_error) and no rule applies. Called on the
 * dispatcher thread when a transfer is queued and each time it is about
 * to start. */
typedef int32_t (*cohort_transfer_policy_fn)(void* user_data, const char* id, const char* workload,
                                             const char* kind, uint64_t bytes, int64_t priority,
                                             int32_t prefetch, cohort_transfer_actions* actions);
/* Called once on an I/O thread when a started transfer ends, before
 * cohort_transfer_wait returns for it; the transfer holds its I/O thread
 * until this returns. id and result_json (as cohort_transfer_result) are
 * borrowed for the call. Not called for a transfer that never started
 * (dropped at shutdown or because its workload ended): its handle says so. */
typedef void (*cohort_transfer_done_fn)(void* user_data, const char* id, int32_t status,
                                        const char* result_json, size_t length);

/* Adds one rule's say on the transfer. type: "reduce_prefetch" (factor,
 * >= 0, multiplies the prefetch depth), "delay_transfer" (delay_seconds,
 * 0 to a year, holds it), "prioritize" (boost NULL: the scheduler's
 * prioritize_boost; else *boost is added to its priority) or
 * "stage_transfer" (to the staging directory); the other parameters are
 * ignored for the other types. rule (NULL or "": "policy") and category
 * ("memory" and "thermal" are counted in the stats; NULL: none) are copied.
 * INVALID_ARGUMENT for an unknown type or a factor or delay out of range. */
COHORT_API int cohort_transfer_actions_add(cohort_transfer_actions* actions, const char* rule,
                                           const char* type, const char* category, double factor,
                                           double delay_seconds, const int32_t* boost);
/* A value the rule saw (gpu_memory 91.5, ...), added to the action added
 * last; shown in the decisions. INVALID_ARGUMENT before the first action. */
COHORT_API int cohort_transfer_actions_add_value(cohort_transfer_actions* actions, const char* name,
                                                 double value);
/* Why the policy fails, for a callback that then returns non-zero. */
COHORT_API int cohort_transfer_actions_set_error(cohort_transfer_actions* actions,
                                                 const char* message);

/* A scheduler. options_json (NULL or "": the defaults): {"workers" (I/O
 * threads, 1 to 256, default 2), "prefetch_depth" (>= 1, default 8),
 * "aging_per_second" (> 0, default 1), "prioritize_boost" (default 100),
 * "staging_dir" (an existing directory; absent: no staging),
 * "explain_history" (finished transfers explain still knows, default
 * 1024)}. registry (may be NULL): transfers must name one of its workloads,
 * whose priority they inherit, and are dropped when it ends. The policy is
 * a monitor's GPU rule pack (monitor), or policy(user_data, ...), or none
 * (both NULL). registry and monitor stay the caller's and must outlive the
 * scheduler. INVALID_ARGUMENT naming the field or option (both a monitor
 * and a policy, an option out of range, a staging_dir that is not a
 * directory). Pairs with cohort_transfer_scheduler_destroy. */
COHORT_API int cohort_transfer_scheduler_create(const char* options_json,
                                                cohort_workload_registry* registry,
                                                cohort_gpu_monitor* monitor,
                                                cohort_transfer_policy_fn policy, void* user_data,
                                                cohort_transfer_scheduler** out);
/* Stops taking transfers, lets the running ones finish (their callbacks
 * included), completes the queued ones with COHORT_ERR_CLOSED, and frees.
 * Transfer handles stay valid. NULL is ignored. */
COHORT_API void cohort_transfer_scheduler_destroy(cohort_transfer_scheduler* scheduler);
/* Queues a read. request_json: {"id" (unique among the transfers queued or
 * running), "workload", "path", "offset" (default 0), "length" (bytes,
 * > 0), "priority" (default 0, higher first), "kind" (the rules' file_type,
 * default "dataset"), "prefetch" (default false), "stage" (to the staging
 * directory; default false), "deadline_seconds" (after submit; finishing
 * later counts as a miss)}. The bytes go to buffer (buffer_length >= length;
 * NULL with 0 when staged), which must stay valid and untouched until the
 * transfer has finished. on_done (may be NULL) as above. INVALID_ARGUMENT
 * naming the transfer and the field (JSON of the wrong shape, an unknown
 * field, an empty id or path, a length of 0, no destination, a buffer
 * shorter than length, stage without a staging_dir, an id already queued);
 * NOT_FOUND for a workload the registry does not know; CLOSED while
 * shutting down. Pairs with cohort_transfer_destroy. */
COHORT_API int cohort_transfer_submit(cohort_transfer_scheduler* scheduler, const char* request_json,
                                      void* buffer, uint64_t buffer_length,
                                      cohort_transfer_done_fn on_done, void* user_data,
                                      cohort_transfer** out);
/* Releases the handle only: the transfer goes on and its buffer must stay
 * valid until it finished. NULL is ignored. */
COHORT_API void cohort_transfer_destroy(cohort_transfer* transfer);
/* The transfer's id; borrowed from the handle. */
COHORT_API int cohort_transfer_id(const cohort_transfer* transfer, const char** id);
/* *done = 1 once the transfer finished (read, failed or dropped). Never
 * blocks. */
COHORT_API int cohort_transfer_test(const cohort_transfer* transfer, int32_t* done);
/* Waits for the transfer and returns its status (a failed read's message,
 * naming the file and the offset, in cohort_last_error()). limit_seconds 0
 * waits until it finishes; a positive limit (at most a year) gives up after
 * that long with COHORT_ERR_TIMEOUT while the transfer goes on. */
COHORT_API int cohort_transfer_wait(cohort_transfer* transfer, double limit_seconds);
/* The result as JSON (above); INVALID_ARGUMENT before it finished. */
COHORT_API int cohort_transfer_result(const cohort_transfer* transfer, char** json, size_t* length);
/* The decisions taken on transfer `id` so far (a JSON array), while queued
 * or running or among the last explain_history finished; NOT_FOUND
 * otherwise. */
COHORT_API int cohort_transfer_scheduler_explain(const cohort_transfer_scheduler* scheduler,
                                                 const char* id, char** json, size_t* length);
COHORT_API int cohort_transfer_scheduler_stats(const cohort_transfer_scheduler* scheduler,
                                               cohort_transfer_stats* out);

/* ---------------------------------------------- Data path: the data advisor */

/* How to read the plan's data (docs/data.md, "DataAdvisor"): the prefetch
 * depth for the job and each member, whether to cache, the members with
 * high data locality, and per selected shard the replica to read, how far
 * ahead, where to cache it (none, memory, local_disk) and a priority, each
 * with a reason naming the inputs it came from. options_json is one object:
 *   "batch_size" (required: samples per batch on one node, >= 1),
 *   "memory_budget_bytes" (required: per node, for prefetch and cache; a
 *   number or a size such as "8GiB"), "style" ("allreduce", the default, or
 *   "parameter_server"), "patterns" (globs over the dataset's paths; none:
 *   every file), "sample_bytes" (default: estimated from record counts),
 *   "disk_budget_bytes" (default: no limit), "epochs" (default 1),
 *   "access" ("sequential" or "random"), "locality_threshold" (default
 *   0.8), "prefetch_factor_floor" (the smallest reduce_prefetch factor that
 *   will apply, in (0, 1]; default 1), and "measurements" {"job": M,
 *   "nodes": {NODE_ID: M}}, where M has any of "data_wait_fraction" (or
 *   "data_wait" and "step_time" in seconds), "prefetch_hit_rate",
 *   "read_bytes_per_second", "samples_per_second", "prefetch_depth" (the
 *   batches queued while measuring, 1 to 64). The same options give the
 *   same advice.
 * *advice_json receives the advice (its fields are in docs/data.md); free
 * it with cohort_free. INVALID_ARGUMENT naming the field for an unknown
 * field, a bad value (batch_size 0, a rate below 0, a hit rate above 1) or
 * a malformed pattern; NOT_FOUND for a pattern that matches no file, or
 * measurements for a node that is not a member of the plan. */
COHORT_API int cohort_shard_plan_advise(const cohort_shard_plan* plan, const char* options_json, char** advice_json,
                                        size_t* length);

/* ------------------------------------------------------------ role groups */

/* A job whose processes play several roles (workers plus evaluators or
 * parameter servers): each role is a world of its own, the coordinator job
 * JOB.ROLE, so that one role's rounds never touch another's; the default
 * role ("default" or "worker", or NULL or "") is JOB itself
 * (docs/elastic.md, "Role groups"). cohort_membership_from_env reads the
 * role from $COHORT_ROLE. */

/* The coordinator job of `role` in `job` into *out (free with
 * cohort_free), its length into *length (may be NULL): `job` for the
 * default role, else "job.role".
 * INVALID_ARGUMENT naming the role unless it is 1 to 64 letters, digits,
 * '_' or '-'. */
COHORT_API int cohort_role_job(const char* job, const char* role, char** out, size_t* length);
/* cohort_membership_create for a member of `role` (NULL or "": the
 * default role): it joins cohort_role_job(job, role), and a role the
 * coordinator knows (chief, evaluator, parameter_server, ps) is its
 * descriptor's role. Pairs with cohort_membership_destroy. */
COHORT_API int cohort_membership_from_role(const char* coordinator, const char* job, const char* role,
                                           const char* member, const char* host, cohort_membership** out);
/* The member's role ("default" when none was given); borrowed from the
 * handle. cohort_membership_job gives the role's job. */
COHORT_API int cohort_membership_role(const cohort_membership* membership, const char** role);

/* ---------------------------------------------------------------- Autotuning
 *
 * A communicator's tuning (the fusion threshold, `automatic`'s thresholds,
 * the pipeline chunk) read and changed by field name between operations,
 * and the Autotuner, which tunes them (and any value a program adds, a
 * prefetch depth) online from each step's throughput: rank 0 decides, every
 * rank applies the decision at the same step, the search is bounded in
 * steps and time, then freezes and saves the values per job.
 * docs/collectives.md#autotuning describes the search and its cost. */

/* Tuning fields: "fusion_threshold", "doubling_max", "hierarchical_min",
 * "pipeline_chunk", "shm_single_round_max" (bytes each). INVALID_ARGUMENT
 * for another name, and from set_tuning for a value out of range (the
 * tuning stays as it was). Not collective: every rank must make the same
 * change before the same operation, or the ranks fail that operation with
 * MISMATCH naming what differs. */
COHORT_API int cohort_comm_tuning(const cohort_comm* comm, const char* name, uint64_t* value);
COHORT_API int cohort_comm_set_tuning(cohort_comm* comm, const char* name, uint64_t value);

typedef struct cohort_autotune_options cohort_autotune_options;
typedef struct cohort_autotuner cohort_autotuner;

#define COHORT_AUTOTUNE_COORDINATE 0 /* coordinate descent over each parameter's grid (default) */
#define COHORT_AUTOTUNE_BAYESIAN 1   /* Horovod's anchor: a Gaussian process and expected improvement */

/* Puts `value` in force for parameter `name` on this rank; 0 on success,
 * anything else fails the step (CALLBACK). Called on the thread that calls
 * cohort_autotuner_create or cohort_autotuner_step. */
typedef int (*cohort_tune_apply_fn)(const char* name, double value, void* user_data);

/* Defaults: job "cohort", coordinate search, 3 warm-up steps, 1 settling
 * step after each change, 5 measured steps per candidate (their median),
 * at most 500 steps and 600 s, state file $COHORT_AUTOTUNE_DIR/JOB.json
 * when that is set. Pairs with cohort_autotune_options_destroy. */
COHORT_API int cohort_autotune_options_create(cohort_autotune_options** out);
COHORT_API void cohort_autotune_options_destroy(cohort_autotune_options* options);
COHORT_API int cohort_autotune_options_set_job_id(cohort_autotune_options* options, const char* job_id);
/* COHORT_AUTOTUNE_COORDINATE or COHORT_AUTOTUNE_BAYESIAN. */
COHORT_API int cohort_autotune_options_set_search(cohort_autotune_options* options, int32_t search);
COHORT_API int cohort_autotune_options_set_steps(cohort_autotune_options* options, int32_t warmup_steps,
                                                 int32_t settle_steps, int32_t samples, int32_t max_steps);
COHORT_API int cohort_autotune_options_set_max_seconds(cohort_autotune_options* options, double seconds);
/* NULL or "" keeps the default ($COHORT_AUTOTUNE_DIR/JOB.json, or none). */
COHORT_API int cohort_autotune_options_set_state_file(cohort_autotune_options* options, const char* path);
/* Fixes parameter `name` at `value`: never tuned. */
COHORT_API int cohort_autotune_options_fix(cohort_autotune_options* options, const char* name, double value);
/* One more parameter beside the communicator's: `count` ascending
 * candidates (copied), the value in force now (one of them unless `fixed`
 * is 1), and `apply` with `user_data`, which must stay valid as long as a
 * tuner made from these options. */
COHORT_API int cohort_autotune_options_add_parameter(cohort_autotune_options* options, const char* name,
                                                     const double* candidates, size_t count, double initial,
                                                     int32_t fixed, cohort_tune_apply_fn apply, void* user_data);

/* Collective: every rank of `comm` calls it; rank 0's starting values
 * (a saved state's, or the ones in force) are applied on every rank before
 * it returns. `comm` must outlive the tuner. TIMEOUT when rank 0's decision
 * never came. Pairs with cohort_autotuner_destroy. */
COHORT_API int cohort_autotuner_create(cohort_comm* comm, const cohort_autotune_options* options,
                                       cohort_autotuner** out);
COHORT_API void cohort_autotuner_destroy(cohort_autotuner* tuner);
/* One training step ended with `throughput` (higher is better: bytes/s,
 * samples/s). *changed (may be NULL) is 1 when the next step runs with new
 * values, *frozen (may be NULL) 1 once tuning is over. */
COHORT_API int cohort_autotuner_step(cohort_autotuner* tuner, double throughput, int32_t* changed, int32_t* frozen);
/* The value in force of parameter `name`; NOT_FOUND for an unknown name. */
COHORT_API int cohort_autotuner_value(const cohort_autotuner* tuner, const char* name, double* value);
/* The most steps tuning can take with these options (rank 0; 0 elsewhere). */
COHORT_API int cohort_autotuner_step_bound(const cohort_autotuner* tuner, int64_t* steps);
/* {"job", "search", "rank", "step", "frozen", "values", "best", "measured",
 * "history", "state_file", "notes"}; free *json with cohort_free. length
 * may be NULL. */
COHORT_API int cohort_autotuner_report(const cohort_autotuner* tuner, char** json, size_t* length);

/* ------------------------------------------------ data path: the shard reader */

/* The shards the coordinator leases to a member, read ahead of the training
 * loop (docs/data.md, "ShardReader and ShardLoader"): the reader leases
 * shards of the job's dataset plan, whose shard i must be shard i of
 * `shards` (cohort_shards_plan_json), reads each one's byte ranges of the
 * dataset's files as prefetch transfers of `scheduler` into buffers it
 * owns, and keeps as many shards leased and read ahead as the scheduler's
 * prefetch depth allows now (so a reduce_prefetch rule of its policy reads
 * fewer ahead). scheduler NULL: the reader makes its own, without a policy.
 * options_json (NULL or "": the defaults): {"data_dir" (relative file paths
 * are read under it; absent: the working directory), "workload" (the
 * transfers' workload: one of the scheduler's registry, if it has one),
 * "priority" (the transfers'), "max_ahead" (at most this many shards
 * ahead, 0: no cap), "poll_interval_seconds" (how often to ask while other
 * members hold every shard left, default 0.05), "release_on_close"
 * (default true, below), and for a reader without a scheduler "workers"
 * (default 2) and "prefetch_depth" (default 8)}.
 * Leases and reads start at once. Shards leased and not handed out, or
 * handed out and not reported done, when the reader is destroyed are given
 * back (cohort_membership_shard_release) with release_on_close, so the next
 * member that asks gets them; the first give-back that fails (it waits out
 * the client's retry deadline) stops the rest, which go back to the queue
 * when their lease expires (the plan's lease_duration), or at once when the
 * member leaves or fails. */

typedef struct cohort_shard_reader cohort_shard_reader;

/* Leases of `membership`, which must outlive the reader (as must the
 * scheduler, when given); each wait of
 * cohort_shard_reader_next is added to the member's next recorded step
 * when that step's data_wait is 0 or negative (not measured by the
 * program). Pairs with cohort_shard_reader_destroy. */
COHORT_API int cohort_shard_reader_from_membership(cohort_membership* membership, const cohort_shards* shards,
                                                   cohort_transfer_scheduler* scheduler, const char* options_json,
                                                   cohort_shard_reader** out);
/* Leases of `member` of `job` through `client`, which must outlive the
 * reader; the data wait is the caller's to record. Pairs with
 * cohort_shard_reader_destroy. */
COHORT_API int cohort_shard_reader_create(cohort_coordinator_client* client, const char* job, const char* member,
                                          const cohort_shards* shards, cohort_transfer_scheduler* scheduler,
                                          const char* options_json, cohort_shard_reader** out);
/* Stops leasing, waiting for the lease request under way, gives back the
 * leases it holds (release_on_close), and, for a reader with its own
 * scheduler, waits for the reads started (reads on a given scheduler
 * finish there). NULL is ignored. */
COHORT_API void cohort_shard_reader_destroy(cohort_shard_reader* reader);
/* Waits up to timeout_seconds for the next leased shard's bytes. *finished
 * is 1 when the coordinator says every epoch is done (nothing else is
 * written), else 0 and the shard: its lease, its index in the plan, its
 * epoch, its id, its bytes and their length. *shard_id and *data are
 * borrowed from the reader until cohort_shard_reader_done of that lease or
 * the reader's end. Any out-parameter but finished may be NULL. TIMEOUT
 * when nothing came in time; IO for a read that failed (a file shorter than
 * the layout, a missing file), MISMATCH for a lease the layout does not
 * have, each naming the shard, the file and the offset; the error of a
 * lease request that failed. After an error the next call goes on with the
 * next shard. */
COHORT_API int cohort_shard_reader_next(cohort_shard_reader* reader, double timeout_seconds, int32_t* finished,
                                        uint64_t* lease, uint64_t* shard, uint32_t* epoch, const char** shard_id,
                                        const uint8_t** data, uint64_t* length);
/* Reports the shard of a lease cohort_shard_reader_next handed out done
 * (*outcome, may be NULL: COHORT_SHARD_* as cohort_membership_shard_done)
 * and frees its bytes. INVALID_ARGUMENT for a lease not handed out, or
 * done already. */
COHORT_API int cohort_shard_reader_done(cohort_shard_reader* reader, uint64_t lease, int32_t* outcome);

typedef struct cohort_reader_stats {
    double data_wait_seconds; /* cohort_shard_reader_next blocked, added up */
    uint64_t shards;          /* handed out */
    uint64_t bytes;           /* of those shards */
    uint64_t prefetch_hits;   /* the shard was read when asked for */
    uint64_t prefetch_misses; /* next had to wait for it */
    uint64_t failed;          /* shards whose read failed */
    uint64_t reported;        /* cohort_shard_reader_done calls */
    uint32_t ahead;           /* leased, not yet handed out */
    uint32_t max_ahead;       /* the most there ever were */
    uint32_t depth;           /* shards the reader keeps ahead now */
    int32_t finished;         /* 1: every epoch is done */
} cohort_reader_stats;

COHORT_API int cohort_shard_reader_stats(const cohort_shard_reader* reader, cohort_reader_stats* out);
/* The dataset plan (for cohort_coordinator_client_register_dataset) whose
 * shard i is shard i of `shards`, ids "0", "1", ..., with their sizes, for
 * `epochs` (at least 1); free *json with cohort_free. */
COHORT_API int cohort_shards_plan_json(const cohort_shards* shards, uint32_t epochs, char** json, size_t* length);
/* Time spent waiting for input that the program did not measure itself:
 * added to the next recorded step's data_wait when the program leaves it 0
 * or negative. INVALID_ARGUMENT for a negative or non-finite value. */
COHORT_API int cohort_membership_add_data_wait(cohort_membership* membership, double seconds);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* COHORT_H */
