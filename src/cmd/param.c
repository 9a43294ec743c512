/* param: the server parameters of getParameter / setParameter (and
 * --setParameter at start), one table row per parameter: how to read it,
 * how to set it, and whether it may change at runtime. A name that is not
 * in the table is refused, never accepted and ignored. */
#include "cmd/cmd-private.h"
#include "cmd/access.h"

#include <math.h>
#include <string.h>

#include "cmd/op.h"
#include "doc/pipeline.h"
#include "store/collection.h"
#include "store/cursor.h"
#include "txn/txn.h"
#include "util/fiber.h"
#include "util/log.h"

static int64_t param_cursor_timeout_ms = CURSOR_IDLE_TIMEOUT_MS;
static int32_t param_log_level;                       /* logLevel 0..5 (atomdb logs debug from 1) */
static bson_t param_log_verbosity = BSON_INITIALIZER; /* logComponentVerbosity as set */
static bool param_ttl_enabled = true;                 /* ttlMonitorEnabled */
static int32_t param_ttl_sleep_s = 1; /* ttlMonitorSleepSecs (mongod's default is 60) */
static int64_t param_ttl_last_ms;     /* when the TTL monitor last ran */

/* How getParameter shows a plain parameter (get_plain, set_plain). */
typedef enum param_type {
    PARAM_INT32,
    PARAM_INT64,
    PARAM_BOOL, /* set from true/false or a number (non-zero is true) */
} param_type_t;

/* One parameter: `get` appends its value to `out` under `name`; `set`
 * checks and applies the value at `it`. A plain parameter (get_plain,
 * set_plain) is a number or a bool in one of i32, i64, b, or behind
 * read/write. */
typedef struct param {
    const char *name;
    void (*get)(const struct param *p, bson_t *out);
    bool (*set)(const struct param *p, const bson_iter_t *it, dberr_t *err);
    bool runtime;             /* settable by the setParameter command (else at start only) */
    int64_t lo, hi;           /* bounds of a numeric parameter */
    param_type_t type;        /* a plain parameter's type */
    int32_t *i32;             /* its variable, */
    int64_t *i64;
    bool *b;
    int64_t (*read)(void);    /* or its value kept elsewhere (another module, a conversion) */
    void (*write)(int64_t v); /* ... and its setter */
} param_t;

/* -- value helpers -- */

/* The integer at `it` within [p->lo, p->hi]; BadValue otherwise. */
static bool param_int(const param_t *p, const bson_iter_t *it, int64_t *out, dberr_t *err)
{
    if (!BSON_ITER_HOLDS_NUMBER(it))
        return dberr_set(err, DBERR_BAD_VALUE, "Invalid value for parameter %s: must be a number",
                         p->name);
    if (BSON_ITER_HOLDS_DOUBLE(it)) {
        double d = bson_iter_double(it);
        if (d != floor(d) || d < (double)p->lo || d > (double)p->hi)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "Invalid value for parameter %s: %g is not an integer from %lld to "
                             "%lld",
                             p->name, d, (long long)p->lo, (long long)p->hi);
    }
    int64_t v = bson_iter_as_int64(it);
    if (v < p->lo || v > p->hi)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "Invalid value for parameter %s: %lld is not in the range %lld to %lld",
                         p->name, (long long)v, (long long)p->lo, (long long)p->hi);
    *out = v;
    return true;
}

/* A boolean parameter (as 0 or 1): true/false, or a number (non-zero is
 * true), as mongod coerces. */
static bool param_bool(const param_t *p, const bson_iter_t *it, int64_t *out, dberr_t *err)
{
    if (!BSON_ITER_HOLDS_BOOL(it) && !BSON_ITER_HOLDS_NUMBER(it))
        return dberr_set(err, DBERR_BAD_VALUE, "Invalid value for parameter %s: must be a boolean",
                         p->name);
    *out = bson_iter_as_bool(it);
    return true;
}

/* -- rows -- */

static void get_plain(const param_t *p, bson_t *out)
{
    int64_t v = p->read ? p->read() : p->i32 ? *p->i32 : p->i64 ? *p->i64 : *p->b;
    switch (p->type) {
    case PARAM_INT32:
        BSON_APPEND_INT32(out, p->name, (int32_t)v);
        break;
    case PARAM_INT64:
        BSON_APPEND_INT64(out, p->name, v);
        break;
    case PARAM_BOOL:
        BSON_APPEND_BOOL(out, p->name, v != 0);
        break;
    }
}

static bool set_plain(const param_t *p, const bson_iter_t *it, dberr_t *err)
{
    int64_t v = 0;
    if (!(p->type == PARAM_BOOL ? param_bool(p, it, &v, err) : param_int(p, it, &v, err)))
        return false;
    if (p->write)
        p->write(v);
    else if (p->i32)
        *p->i32 = (int32_t)v; /* p->lo and p->hi keep it in range */
    else if (p->i64)
        *p->i64 = v;
    else
        *p->b = v != 0;
    return true;
}

static void get_fcv(const param_t *p, bson_t *out)
{
    bson_t doc;
    bson_append_document_begin(out, p->name, -1, &doc);
    BSON_APPEND_UTF8(&doc, "version", "7.0");
    bson_append_document_end(out, &doc);
}

static bool set_fcv(const param_t *p, const bson_iter_t *it, dberr_t *err)
{
    return dberr_set(err, DBERR_ILLEGAL_OPERATION,
                     "Unable to set featureCompatibilityVersion with setParameter: it is "
                     "always 7.0 in atomdb (setFeatureCompatibilityVersion reports it)");
}

static void get_isolation(const param_t *p, bson_t *out)
{
    BSON_APPEND_UTF8(out, p->name, txn_isolation_name((txn_isolation_t)server.txn_isolation));
}

static bool set_isolation(const param_t *p, const bson_iter_t *it, dberr_t *err)
{
    txn_isolation_t level;
    if (!BSON_ITER_HOLDS_UTF8(it) || !txn_parse_isolation(bson_iter_utf8(it, NULL), &level))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "atomdbTransactionIsolation must be 'snapshot' or 'serializable'");
    server.txn_isolation = level;
    return true;
}

/* atomdb has one log threshold: any verbosity above 0 turns debug lines on. */
static void param_apply_log_level(void)
{
    bool debug = param_log_level > 0;
    bson_iter_t it;
    if (bson_iter_init(&it, &param_log_verbosity)) {
        while (bson_iter_next(&it)) {
            if (BSON_ITER_HOLDS_NUMBER(&it) && bson_iter_as_int64(&it) > 0)
                debug = true;
            if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
                bson_iter_t v;
                if (bson_iter_recurse(&it, &v) && bson_iter_find(&v, "verbosity") &&
                    bson_iter_as_int64(&v) > 0)
                    debug = true;
            }
        }
    }
    log_set_level(debug ? LOG_DEBUG : LOG_INFO);
}

/* logLevel: at least 1 while debug lines are on (--log-level debug at
 * start). */
static int64_t param_log_level_now(void)
{
    return param_log_level == 0 && log_get_level() == LOG_DEBUG ? 1 : param_log_level;
}

static void param_set_log_level(int64_t v)
{
    param_log_level = (int32_t)v;
    param_apply_log_level();
}

static void get_log_verbosity(const param_t *p, bson_t *out)
{
    bson_t doc;
    bson_append_document_begin(out, p->name, -1, &doc);
    BSON_APPEND_INT32(&doc, "verbosity", (int32_t)param_log_level_now());
    bson_iter_t it;
    if (bson_iter_init(&it, &param_log_verbosity)) {
        while (bson_iter_next(&it))
            if (strcmp(bson_iter_key(&it), "verbosity"))
                bson_append_iter(&doc, NULL, 0, &it);
    }
    bson_append_document_end(out, &doc);
}

/* {verbosity: n, <component>: n | {verbosity: n}}: kept as given; atomdb
 * logs debug lines when any level is above 0 (it has one threshold). */
static bool set_log_verbosity(const param_t *p, const bson_iter_t *it, dberr_t *err)
{
    bson_t doc;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !cmd_iter_doc(it, &doc))
        return dberr_set(err, DBERR_BAD_VALUE, "Invalid value for parameter %s: must be an object",
                         p->name);
    bson_t merged = BSON_INITIALIZER;
    bson_iter_t c;
    bson_iter_init(&c, &doc);
    while (bson_iter_next(&c)) {
        const char *k = bson_iter_key(&c);
        bool ok = BSON_ITER_HOLDS_NUMBER(&c) || BSON_ITER_HOLDS_DOCUMENT(&c);
        if (ok && BSON_ITER_HOLDS_NUMBER(&c))
            ok = bson_iter_as_int64(&c) >= -1 && bson_iter_as_int64(&c) <= 5;
        if (!ok) {
            bson_destroy(&merged);
            return dberr_set(err, DBERR_BAD_VALUE,
                             "Invalid verbosity for %s: expected a number from -1 to 5 or an "
                             "object",
                             k);
        }
        if (strcmp(k, "verbosity") == 0) {
            param_log_level = (int32_t)bson_iter_as_int64(&c);
            continue;
        }
        bson_append_iter(&merged, NULL, 0, &c);
    }
    bson_iter_init(&c, &param_log_verbosity);
    while (bson_iter_next(&c)) /* components not named now keep their level */
        if (!bson_has_field(&merged, bson_iter_key(&c)))
            bson_append_iter(&merged, NULL, 0, &c);
    bson_destroy(&param_log_verbosity);
    bson_steal(&param_log_verbosity, &merged);
    param_apply_log_level();
    return true;
}

static void get_bson_depth(const param_t *p, bson_t *out)
{
    BSON_APPEND_INT32(out, p->name, 200);
}

/* internalQueryExecYieldPeriodMS: how long a long operation holds the
 * loop before others run (docs/design.md), in milliseconds */
static int64_t param_yield_ms(void)
{
    return fiber_slice_us() / 1000;
}

static void param_set_yield_ms(int64_t ms)
{
    fiber_set_slice_us(ms * 1000);
}

static void get_scram(const param_t *p, bson_t *out)
{
    BSON_APPEND_INT32(out, p->name,
                      access_iterations(p->name[5] == 'I' ? SCRAM_SHA_1 : SCRAM_SHA_256));
}

static bool set_scram(const param_t *p, const bson_iter_t *it, dberr_t *err)
{
    if (!BSON_ITER_HOLDS_NUMBER(it))
        return dberr_set(err, DBERR_BAD_VALUE, "%s must be a number", p->name);
    return access_set_iterations(p->name[5] == 'I' ? SCRAM_SHA_1 : SCRAM_SHA_256,
                                 bson_iter_as_int64(it), err);
}

static void get_auth_mechanisms(const param_t *p, bson_t *out)
{
    bson_t arr;
    bson_append_array_begin(out, p->name, -1, &arr);
    BSON_APPEND_UTF8(&arr, "0", "SCRAM-SHA-1");
    BSON_APPEND_UTF8(&arr, "1", "SCRAM-SHA-256");
    bson_append_array_end(out, &arr);
}

/* notablescan, kept by the collection layer */
static int64_t param_notablescan(void)
{
    return collection_notablescan();
}

static void param_set_notablescan(int64_t on)
{
    collection_set_notablescan(on != 0);
}

#define RUNTIME true
#define STARTUP false
static const param_t param_table[] = {
    {"featureCompatibilityVersion", get_fcv, set_fcv, RUNTIME, 0, 0},
    {"maxTransactionLockRequestTimeoutMillis", get_plain, set_plain, RUNTIME, INT32_MIN, INT32_MAX,
     PARAM_INT32, .i32 = &server.txn_lock_timeout_ms},
    {"transactionLifetimeLimitSeconds", get_plain, set_plain, RUNTIME, 1, INT32_MAX, PARAM_INT32,
     .i32 = &server.txn_lifetime_s},
    {"atomdbTransactionIsolation", get_isolation, set_isolation, RUNTIME, 0, 0},
    {"logLevel", get_plain, set_plain, RUNTIME, 0, 5, PARAM_INT32, .read = param_log_level_now,
     .write = param_set_log_level},
    {"logComponentVerbosity", get_log_verbosity, set_log_verbosity, RUNTIME, 0, 0},
    {"cursorTimeoutMillis", get_plain, set_plain, RUNTIME, 1, INT64_MAX, PARAM_INT64,
     .i64 = &param_cursor_timeout_ms},
    {"maxBSONDepth", get_bson_depth, NULL, STARTUP, 0, 0},
    {"internalQueryExecYieldPeriodMS", get_plain, set_plain, RUNTIME, 0, 1000, PARAM_INT32,
     .read = param_yield_ms, .write = param_set_yield_ms},
    {"atomdbYieldPeriodMicros", get_plain, set_plain, RUNTIME, 0, 1000000, PARAM_INT64,
     .read = fiber_slice_us, .write = fiber_set_slice_us},
    {"atomdbBusyYieldPeriodMicros", get_plain, set_plain, RUNTIME, 0, 1000000, PARAM_INT64,
     .read = op_busy_slice, .write = op_set_busy_slice_us},
    {"internalQueryMaxBlockingSortMemoryUsageBytes", get_plain, set_plain, RUNTIME, 1, INT64_MAX,
     PARAM_INT64, .i64 = &pipeline_limits.sort_bytes},
    {"internalDocumentSourceGroupMaxMemoryBytes", get_plain, set_plain, RUNTIME, 1, INT64_MAX,
     PARAM_INT64, .i64 = &pipeline_limits.group_bytes},
    {"internalQueryMaxPushBytes", get_plain, set_plain, RUNTIME, 1, INT64_MAX, PARAM_INT64,
     .i64 = &pipeline_limits.push_bytes},
    {"internalQueryMaxAddToSetBytes", get_plain, set_plain, RUNTIME, 1, INT64_MAX, PARAM_INT64,
     .i64 = &pipeline_limits.add_to_set_bytes},
    {"internalDocumentSourceSetWindowFieldsMaxMemoryBytes", get_plain, set_plain, RUNTIME, 1,
     INT64_MAX, PARAM_INT64, .i64 = &pipeline_limits.window_bytes},
    {"internalQueryMaxAllowedDensifyDocs", get_plain, set_plain, RUNTIME, 1, INT64_MAX, PARAM_INT64,
     .i64 = &pipeline_limits.densify_docs},
    {"scramIterationCount", get_scram, set_scram, RUNTIME, 0, 0},
    {"scramSHA256IterationCount", get_scram, set_scram, RUNTIME, 0, 0},
    {"authenticationMechanisms", get_auth_mechanisms, NULL, STARTUP, 0, 0},
    {"atomdbFrameTimeoutSecs", get_plain, set_plain, RUNTIME, 1, 86400, PARAM_INT32,
     .i32 = &server.frame_timeout_s},
    {"ttlMonitorEnabled", get_plain, set_plain, RUNTIME, 0, 0, PARAM_BOOL, .b = &param_ttl_enabled},
    {"ttlMonitorSleepSecs", get_plain, set_plain, RUNTIME, 1, INT32_MAX, PARAM_INT32,
     .i32 = &param_ttl_sleep_s},
    {"notablescan", get_plain, set_plain, RUNTIME, 0, 0, PARAM_BOOL, .read = param_notablescan,
     .write = param_set_notablescan},
};
#define PARAM_COUNT (sizeof param_table / sizeof param_table[0])

static const param_t *param_find(const char *name)
{
    for (size_t i = 0; i < PARAM_COUNT; i++)
        if (strcmp(param_table[i].name, name) == 0)
            return &param_table[i];
    return NULL;
}

/* Appends `p` to `out`: its value, or with `details` mongod's
 * {value, settableAtRuntime, settableAtStartup}. */
static void param_append(const param_t *p, bool details, bson_t *out)
{
    if (!details) {
        p->get(p, out);
        return;
    }
    bson_t one = BSON_INITIALIZER, doc;
    p->get(p, &one);
    bson_iter_t it;
    bson_iter_init(&it, &one);
    bson_iter_next(&it);
    bson_append_document_begin(out, p->name, -1, &doc);
    bson_append_value(&doc, "value", -1, bson_iter_value(&it));
    BSON_APPEND_BOOL(&doc, "settableAtRuntime", p->set && p->runtime);
    BSON_APPEND_BOOL(&doc, "settableAtStartup", true);
    bson_append_document_end(out, &doc);
    bson_destroy(&one);
}

/* {getParameter: 1 | '*' | {allParameters, showDetails}, <name>: 1, ...} */
bool cmd_get_parameter(cmd_ctx_t *ctx, dberr_t *err)
{
    bool all = BSON_ITER_HOLDS_UTF8(&ctx->arg) && strcmp(bson_iter_utf8(&ctx->arg, NULL), "*") == 0;
    bool details = false;
    if (BSON_ITER_HOLDS_DOCUMENT(&ctx->arg)) {
        bson_t opts;
        bson_iter_t o;
        cmd_iter_doc(&ctx->arg, &opts);
        bson_iter_init(&o, &opts);
        while (bson_iter_next(&o)) {
            const char *k = bson_iter_key(&o);
            if (strcmp(k, "allParameters") == 0)
                all = bson_iter_as_bool(&o);
            else if (strcmp(k, "showDetails") == 0)
                details = bson_iter_as_bool(&o);
            else
                return dberr_set(err, 40415, "BSON field 'getParameter.%s' is an unknown field.",
                                 k);
        }
    }
    if (all) {
        for (size_t i = 0; i < PARAM_COUNT; i++)
            param_append(&param_table[i], details, ctx->reply);
        return true;
    }
    bson_iter_t it;
    cmd_args_init(ctx, &it);
    int found = 0;
    while (cmd_args_next(&it)) {
        const param_t *p = param_find(bson_iter_key(&it));
        if (!p)
            continue;
        param_append(p, details, ctx->reply);
        found++;
    }
    if (!found)
        return dberr_set(err, DBERR_INVALID_OPTIONS, "no option found to get");
    return true;
}

/* Sets parameter `p` (param_find(name): NULL when there is none) to the
 * value at `it`; `at_start` for --setParameter (start-only parameters are
 * allowed there). */
static bool param_set_one(const param_t *p, const char *name, const bson_iter_t *it, bool at_start,
                          dberr_t *err)
{
    if (!p)
        return dberr_set(err, DBERR_INVALID_OPTIONS,
                         "attempted to set unrecognized parameter [%s], use help:true to see "
                         "options ",
                         name);
    if (!p->set)
        return dberr_set(err, DBERR_ILLEGAL_OPERATION,
                         "not allowed to change [%s]: atomdb's value is fixed", name);
    if (!p->runtime && !at_start)
        return dberr_set(err, DBERR_ILLEGAL_OPERATION, "not allowed to change [%s] at runtime",
                         name);
    return p->set(p, it, err);
}

bool param_set(const char *name, const bson_iter_t *it, dberr_t *err)
{
    return param_set_one(param_find(name), name, it, true, err);
}

bool cmd_set_parameter(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_iter_t it;
    cmd_args_init(ctx, &it);
    int set = 0;
    while (cmd_args_next(&it)) {
        const char *k = bson_iter_key(&it);
        const param_t *p = param_find(k);
        if (p) { /* mongod replies {was: <old value>} */
            bson_t was = BSON_INITIALIZER;
            bson_iter_t w;
            p->get(p, &was);
            if (bson_iter_init(&w, &was) && bson_iter_next(&w) && !set)
                bson_append_value(ctx->reply, "was", -1, bson_iter_value(&w));
            bson_destroy(&was);
        }
        if (!param_set_one(p, k, &it, false, err))
            return false;
        set++;
    }
    if (!set)
        return dberr_set(err, DBERR_INVALID_OPTIONS,
                         "no option found to set, use help:true to "
                         "see options ");
    return true;
}

int64_t param_cursor_timeout(void)
{
    return param_cursor_timeout_ms;
}

bool param_ttl_due(int64_t now_ms)
{
    if (!param_ttl_enabled)
        return false;
    if (param_ttl_last_ms && now_ms - param_ttl_last_ms < (int64_t)param_ttl_sleep_s * 1000)
        return false;
    param_ttl_last_ms = now_ms;
    return true;
}
