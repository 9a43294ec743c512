/* explain: the parts of explain replies the read commands share — the
 * winningPlan of a collection read, serverInfo — and the explain of an
 * aggregate in mongod's shape (queryPlanner or stages, executionStats). */
#include "cmd/cmd-private.h"
#include "cmd/view.h"

#include <string.h>

#include "doc/fts.h"
#include "doc/pipeline.h"
#include "store/index.h"
#include "store/wildcard.h"

void explain_append_plan(bson_t *qp, const collection_plan_t *plan, bool exists)
{
    explain_append_plan_filtered(qp, plan, exists, NULL);
}

void explain_append_plan_filtered(bson_t *qp, const collection_plan_t *plan, bool exists,
                                  const bson_t *filter)
{
    bson_t wp, in;
    bson_append_document_begin(qp, "winningPlan", -1, &wp);
    if (!exists) {
        BSON_APPEND_UTF8(&wp, "stage", "EOF");
    } else if (strcmp(plan->stage, "COLLSCAN") == 0) {
        BSON_APPEND_UTF8(&wp, "stage", "COLLSCAN");
        BSON_APPEND_UTF8(&wp, "direction", plan->direction < 0 ? "backward" : "forward");
    } else if (strcmp(plan->stage, "IDHACK") == 0) {
        BSON_APPEND_UTF8(&wp, "stage", "IDHACK");
    } else if (strcmp(plan->stage, "TEXT_MATCH") == 0) {
        bson_t or, prefix = BSON_INITIALIZER;
        BSON_APPEND_UTF8(&wp, "stage", "TEXT_MATCH");
        BSON_APPEND_DOCUMENT(&wp, "indexPrefix", &prefix);
        BSON_APPEND_UTF8(&wp, "indexName", plan->index->name);
        if (plan->text)
            fts_query_append_parsed(plan->text, &wp, "parsedTextQuery");
        BSON_APPEND_INT32(&wp, "textIndexVersion", 3);
        bson_append_document_begin(&wp, "inputStage", -1, &or);
        BSON_APPEND_UTF8(&or, "stage", "TEXT_OR");
        bson_append_document_begin(&or, "inputStage", -1, &in);
        BSON_APPEND_UTF8(&in, "stage", "IXSCAN");
        BSON_APPEND_DOCUMENT(&in, "keyPattern", &plan->index->key);
        BSON_APPEND_UTF8(&in, "indexName", plan->index->name);
        BSON_APPEND_BOOL(&in, "isMultiKey", true);
        BSON_APPEND_BOOL(&in, "isUnique", false);
        BSON_APPEND_UTF8(&in, "direction", "backward");
        bson_append_document_end(&or, &in);
        bson_append_document_end(&wp, &or);
        bson_destroy(&prefix);
    } else if (strcmp(plan->stage, "GEO_NEAR_2D") == 0) { /* a $near on a 2d index */
        BSON_APPEND_UTF8(&wp, "stage", "GEO_NEAR_2D");
        BSON_APPEND_DOCUMENT(&wp, "keyPattern", &plan->index->key);
        BSON_APPEND_UTF8(&wp, "indexName", plan->index->name);
        BSON_APPEND_INT32(&wp, "indexVersion", 2);
    } else {
        BSON_APPEND_UTF8(&wp, "stage", "FETCH");
        if (filter && !bson_empty(filter) && plan->index->hashed >= 0)
            BSON_APPEND_DOCUMENT(&wp, "filter", filter);
        bson_append_document_begin(&wp, "inputStage", -1, &in);
        BSON_APPEND_UTF8(&in, "stage", "IXSCAN");
        if (plan->index->wildcard) { /* as mongod: the $** index expanded for one path */
            bson_t kp;
            bson_append_document_begin(&in, "keyPattern", -1, &kp);
            BSON_APPEND_INT32(&kp, "$_path", 1);
            BSON_APPEND_INT32(&kp, plan->wildcard_path, 1);
            bson_append_document_end(&in, &kp);
        } else {
            BSON_APPEND_DOCUMENT(&in, "keyPattern", &plan->index->key);
        }
        BSON_APPEND_UTF8(&in, "indexName", plan->index->name);
        BSON_APPEND_BOOL(&in, "isMultiKey",
                         plan->index->wildcard
                             ? wildcard_path_multikey(plan->index->wildcard, plan->wildcard_path)
                             : plan->index->multikey);
        BSON_APPEND_BOOL(&in, "isUnique", plan->index->unique);
        BSON_APPEND_UTF8(&in, "direction", plan->direction < 0 ? "backward" : "forward");
        bson_append_document_end(&wp, &in);
        if (plan->index->partial) {
            bson_iter_t pf;
            if (bson_iter_init_find(&pf, &plan->index->spec, "partialFilterExpression"))
                bson_append_value(&wp, "partialFilterExpression", -1, bson_iter_value(&pf));
        }
    }
    if (exists && plan->reason) /* atomdb's own: why the planner chose this plan */
        BSON_APPEND_UTF8(&wp, "atomdbPlanReason", plan->reason);
    bson_append_document_end(qp, &wp);
}

void explain_append_server_info(bson_t *reply)
{
    bson_t si;
    bson_append_document_begin(reply, "serverInfo", -1, &si);
    BSON_APPEND_UTF8(&si, "version", SERVER_MONGODB_VERSION);
    BSON_APPEND_UTF8(&si, "atomdbVersion", ATOMDB_VERSION);
    bson_append_document_end(reply, &si);
}

/* What the stages of an explained aggregate read, cumulated after each
 * stage (from the command's view counters). */
typedef struct explain_stage_reads {
    const view_t *view;
    int64_t *docs, *keys, *scans; /* [i]: after stage i */
} explain_stage_reads_t;

static void explain_stage_done(void *ctx, size_t i)
{
    explain_stage_reads_t *r = ctx;
    r->docs[i] = r->view->docs_examined;
    r->keys[i] = r->view->keys_examined;
    r->scans[i] = r->view->source_collscans;
}

bool explain_aggregate(cmd_ctx_t *ctx, const char *coll, collection_t *c, const pipeline_t *p,
                       const bson_iter_t *stages_it, const collection_plan_t *plan,
                       const char *verbosity, doclist_t *docs, dberr_t *err)
{
    char ns[512];
    snprintf(ns, sizeof ns, "%s.%s", ctx->db, coll ? coll : "$cmd.aggregate");
    const bson_t *lead = pipeline_leading_match(p);
    bson_t empty = BSON_INITIALIZER, qp = BSON_INITIALIZER, rejected = BSON_INITIALIZER;
    bool stats = strcmp(verbosity, "queryPlanner") != 0;
    size_t n = pipeline_nstages(p);
    int64_t *nret = bson_malloc0((n + 1) * sizeof *nret), *ms = bson_malloc0((n + 1) * sizeof *ms);
    int64_t *cum = bson_malloc0(3 * (n + 1) * sizeof *cum);
    explain_stage_reads_t reads = {ctx->view, cum, cum + n + 1, cum + 2 * (n + 1)};
    int64_t input = (int64_t)docs->len;
    int64_t docs0 = ctx->view->docs_examined, keys0 = ctx->view->keys_examined;
    int64_t scans0 = ctx->view->source_collscans;
    uint64_t t0 = uv_hrtime();
    bool ok = !stats || pipeline_run_explain(p, docs, nret, ms, explain_stage_done, &reads, err);
    int64_t total_ms = (int64_t)((uv_hrtime() - t0) / 1000000);
    if (!ok)
        goto cleanup;
    BSON_APPEND_INT32(&qp, "plannerVersion", 1);
    BSON_APPEND_UTF8(&qp, "namespace", ns);
    BSON_APPEND_DOCUMENT(&qp, "parsedQuery", lead ? lead : &empty);
    explain_append_plan(&qp, plan, c != NULL);
    BSON_APPEND_ARRAY(&qp, "rejectedPlans", &rejected);
    size_t first = lead ? 1 : 0;
    bson_t es = BSON_INITIALIZER;
    if (stats) {
        BSON_APPEND_BOOL(&es, "executionSuccess", true);
        BSON_APPEND_INT64(&es, "nReturned", input);
        BSON_APPEND_INT64(&es, "executionTimeMillis", total_ms);
        BSON_APPEND_INT64(&es, "totalKeysExamined", (int64_t)plan->keys_examined);
        BSON_APPEND_INT64(&es, "totalDocsExamined", (int64_t)plan->docs_examined);
    }
    if (n <= first) { /* the whole pipeline is the collection read */
        BSON_APPEND_DOCUMENT(ctx->reply, "queryPlanner", &qp);
        if (stats)
            BSON_APPEND_DOCUMENT(ctx->reply, "executionStats", &es);
    } else {
        bson_t arr, st, cur;
        bson_iter_t el;
        char key[16];
        uint32_t k = 0;
        BSON_APPEND_UTF8(ctx->reply, "explainVersion", "1");
        bson_append_array_begin(ctx->reply, "stages", -1, &arr);
        bson_append_document_begin(&arr, cmd_index_key(k++, key, sizeof key), -1, &st);
        bson_append_document_begin(&st, "$cursor", -1, &cur);
        BSON_APPEND_DOCUMENT(&cur, "queryPlanner", &qp);
        if (stats)
            BSON_APPEND_DOCUMENT(&cur, "executionStats", &es);
        bson_append_document_end(&st, &cur);
        if (stats) {
            BSON_APPEND_INT64(&st, "nReturned", first ? nret[0] : input);
            BSON_APPEND_INT64(&st, "executionTimeMillisEstimate", first ? ms[0] : 0);
        }
        bson_append_document_end(&arr, &st);
        bson_iter_recurse(stages_it, &el);
        for (size_t i = 0; i < n && bson_iter_next(&el); i++) {
            bson_t sd;
            if (i < first || !cmd_iter_doc(&el, &sd))
                continue;
            bson_append_document_begin(&arr, cmd_index_key(k++, key, sizeof key), -1, &st);
            bson_concat(&st, &sd);
            if (stats) {
                BSON_APPEND_INT64(&st, "nReturned", nret[i]);
                BSON_APPEND_INT64(&st, "executionTimeMillisEstimate", ms[i]);
            }
            if (stats && pipeline_stage_reads(p, i)) { /* as mongod's $lookup reports */
                BSON_APPEND_INT64(&st, "totalDocsExamined",
                                  reads.docs[i] - (i ? reads.docs[i - 1] : docs0));
                BSON_APPEND_INT64(&st, "totalKeysExamined",
                                  reads.keys[i] - (i ? reads.keys[i - 1] : keys0));
                BSON_APPEND_INT64(&st, "collectionScans",
                                  reads.scans[i] - (i ? reads.scans[i - 1] : scans0));
            }
            bson_append_document_end(&arr, &st);
        }
        bson_append_array_end(ctx->reply, &arr);
    }
    bson_destroy(&es);
    bson_t cmd = BSON_INITIALIZER;
    bson_copy_to_excluding_noinit(ctx->cmd, &cmd, "explain", "$db", "lsid", "$clusterTime",
                                  "$readPreference", NULL);
    BSON_APPEND_DOCUMENT(ctx->reply, "command", &cmd);
    bson_destroy(&cmd);
    explain_append_server_info(ctx->reply);
cleanup:
    bson_free(nret);
    bson_free(ms);
    bson_free(cum);
    bson_destroy(&qp);
    return ok;
}
