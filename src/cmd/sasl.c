/* sasl: authentication commands as mongod speaks them — saslStart and
 * saslContinue carrying SCRAM-SHA-1 / SCRAM-SHA-256 messages (src/auth/scram.c),
 * skipEmptyExchange, the speculativeAuthenticate and saslSupportedMechs
 * parts of hello, logout, and failed logins logged without the proof. */
#include "cmd/access.h"

#include <string.h>

#include "auth/backoff.h"
#include "util/log.h"

#define SASL_PAYLOAD_MAX 16384 /* longest SASL message accepted */

/* ---- per-address backoff after failed logins (auth/backoff.h) ----
 * A saslStart that must wait is parked on a timer; the loop keeps serving
 * everyone else. */
#define SASL_BACKOFF_SLOTS 256

static backoff_slot_t sasl_failed_slots[SASL_BACKOFF_SLOTS];
static backoff_t sasl_failed = {sasl_failed_slots, SASL_BACKOFF_SLOTS};

/* The IP part of "ip:port" into `out`. */
static void sasl_ip(const char *remote, char *out, size_t size)
{
    snprintf(out, size, "%s", remote);
    char *colon = strrchr(out, ':');
    if (colon)
        *colon = '\0';
}

static void sasl_note_result(cmd_client_t *client, bool ok)
{
    char ip[64];
    sasl_ip(client->remote, ip, sizeof ip);
    backoff_note(&sasl_failed, ip, ok, server_now_ms());
}

/* How long a login from this client's address waits now (0: not at all). */
static uint64_t sasl_backoff_ms(const cmd_client_t *client)
{
    char ip[64];
    sasl_ip(client->remote, ip, sizeof ip);
    return (uint64_t)backoff_delay_ms(&sasl_failed, ip, server_now_ms());
}

static void sasl_on_backoff(uv_timer_t *t)
{
    cmd_client_t *client = t->data;
    cmd_auth_t *a = client->auth;
    uv_close((uv_handle_t *)t, (uv_close_cb)bson_free);
    a->backoff_timer = NULL;
    a->backoff_served = true;
    client->rerun_parked(client); /* runs saslStart again, now without waiting */
}

/* The payload under `it` (BinData, or base64 text as old shells send it)
 * into a new buffer. */
static bool sasl_payload(const bson_iter_t *it, uint8_t **out, size_t *n, dberr_t *err)
{
    *out = NULL;
    *n = 0;
    if (BSON_ITER_HOLDS_BINARY(it)) {
        bson_subtype_t st;
        uint32_t len;
        const uint8_t *data;
        bson_iter_binary(it, &st, &len, &data);
        if (len > SASL_PAYLOAD_MAX)
            return dberr_set(err, DBERR_BAD_VALUE, "SASL payload too long");
        *out = bson_malloc(len + 1);
        memcpy(*out, data, len);
        *n = len;
        return true;
    }
    if (BSON_ITER_HOLDS_UTF8(it)) {
        uint32_t len;
        const char *s = bson_iter_utf8(it, &len);
        if (len > SASL_PAYLOAD_MAX * 2)
            return dberr_set(err, DBERR_BAD_VALUE, "SASL payload too long");
        *out = bson_malloc(len / 4 * 3 + 1);
        long got = scram_b64_decode(s, len, *out, len / 4 * 3 + 1);
        if (got < 0) {
            bson_free(*out);
            *out = NULL;
            return dberr_set(err, DBERR_BAD_VALUE, "SASL payload is not valid base64");
        }
        *n = (size_t)got;
        return true;
    }
    return dberr_set(err, DBERR_TYPE_MISMATCH, "SASL payload must be BinData or a base64 string");
}

static void sasl_log_failure(cmd_ctx_t *ctx, const char *mech, const char *user, const char *db,
                             bool speculative, const dberr_t *err)
{
    char client[96];
    snprintf(client, sizeof client, "%s", ctx->client->remote);
    log_event(LOG_INFO, "ACCESS", 5286307, "Failed to authenticate", LOG_STR("client", client),
              LOG_BOOL("isSpeculative", speculative), LOG_STR("mechanism", mech),
              LOG_STR("user", user), LOG_STR("db", db), LOG_STR("error", err->msg),
              LOG_INT("result", err->code));
}

static void sasl_log_success(cmd_ctx_t *ctx, const char *mech, const char *user, const char *db,
                             bool speculative)
{
    log_event(LOG_INFO, "ACCESS", 5286306, "Successfully authenticated",
              LOG_STR("client", ctx->client->remote), LOG_BOOL("isSpeculative", speculative),
              LOG_STR("mechanism", mech), LOG_STR("user", user), LOG_STR("db", db),
              LOG_INT("result", 0));
}

/* Appends {conversationId: 1, done, payload} to `out`. */
static void sasl_append_step(bson_t *out, bool done, const char *payload, size_t n)
{
    BSON_APPEND_INT32(out, "conversationId", 1);
    BSON_APPEND_BOOL(out, "done", done);
    bson_append_binary(out, "payload", -1, BSON_SUBTYPE_BINARY, (const uint8_t *)payload,
                       (uint32_t)n);
}

/* The credential of db.user for `m`; false (and a fake one) when the user
 * or that mechanism's credential does not exist. */
static bool sasl_credential(const char *db, const char *user, scram_mech_t m, scram_cred_t *out)
{
    record_t *r = access_find_user(db, user);
    if (r) {
        bson_t doc, creds;
        bson_iter_t it, c;
        record_view(r, &doc);
        if (bson_iter_init_find(&it, &doc, "credentials") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
            bson_iter_recurse(&it, &c) && bson_iter_find(&c, scram_mech_name(m)) &&
            cmd_iter_doc(&c, &creds) && scram_cred_parse(m, &creds, out))
            return true;
    }
    scram_cred_fake(m, user, out);
    return false;
}

/* Starts a conversation from a saslStart document `cmd` against `db`:
 * reads client-first and appends the first step's reply to `out`. */
static bool sasl_start(cmd_ctx_t *ctx, const char *db, const bson_t *cmd, bool speculative,
                       bson_t *out, dberr_t *err)
{
    bson_iter_t it;
    const char *mech_name = "";
    scram_mech_t mech;
    uint8_t *payload = NULL;
    size_t n = 0;
    char *first = NULL;
    size_t first_len = 0;
    bool ok = false;
    cmd_auth_t *a = access_auth(ctx->client);
    scram_server_t *conv = NULL;
    if (!bson_iter_init_find(&it, cmd, "mechanism")) {
        dberr_set(err, 40414, "BSON field 'saslStart.mechanism' is missing but a required field");
        goto cleanup;
    }
    if (!BSON_ITER_HOLDS_UTF8(&it)) {
        cmd_wrong_type(err, &it, "type 'string'", "saslStart.mechanism");
        goto cleanup;
    }
    mech_name = bson_iter_utf8(&it, NULL);
    if (!scram_mech_parse(mech_name, &mech)) {
        dberr_set(err, 334, "Received authentication for mechanism %s which is not enabled",
                  mech_name);
        goto cleanup;
    }
    if (!bson_iter_init_find(&it, cmd, "payload")) {
        dberr_set(err, 40414, "BSON field 'saslStart.payload' is missing but a required field");
        goto cleanup;
    }
    if (!sasl_payload(&it, &payload, &n, err))
        goto cleanup;
    bool skip_empty = false;
    bson_iter_t o, se;
    if (bson_iter_init_find(&o, cmd, "options") && BSON_ITER_HOLDS_DOCUMENT(&o) &&
        bson_iter_recurse(&o, &se) && bson_iter_find(&se, "skipEmptyExchange"))
        skip_empty = bson_iter_as_bool(&se);
    if (strlen(db) >= sizeof a->conv_db) {
        dberr_set(err, DBERR_BAD_VALUE, "database name too long");
        goto cleanup;
    }
    conv = scram_server_new(mech);
    if (!scram_server_read_first(conv, payload, n, err))
        goto cleanup;
    scram_cred_t cred;
    bool known = sasl_credential(db, conv->user, mech, &cred);
    if (!known && speculative) {
        /* as mongod: no speculative reply for an unknown user (or one
         * without this mechanism), so the driver starts over with the
         * mechanism saslSupportedMechs names and fails there */
        dberr_set(err, 18, "Authentication failed.");
        goto cleanup;
    }
    if (!scram_server_write_first(conv, &cred, known, &first, &first_len, err))
        goto cleanup;
    /* a new conversation replaces one in progress */
    scram_server_free(a->conv);
    a->conv = conv;
    conv = NULL;
    snprintf(a->conv_db, sizeof a->conv_db, "%s", db);
    a->conv_skip_empty = skip_empty;
    a->conv_awaiting_empty = false;
    a->conv_speculative = speculative;
    sasl_append_step(out, false, first, first_len);
    ok = true;
cleanup:
    if (!ok)
        sasl_log_failure(ctx, mech_name, conv && conv->user[0] ? conv->user : "", db, speculative,
                         err);
    scram_server_free(conv);
    bson_free(payload);
    bson_free(first);
    return ok;
}

bool cmd_sasl_start(cmd_ctx_t *ctx, dberr_t *err)
{
    cmd_auth_t *a = access_auth(ctx->client);
    uint64_t wait = a->backoff_served ? 0 : sasl_backoff_ms(ctx->client);
    a->backoff_served = false;
    if (wait && !a->backoff_timer) {
        log_event(LOG_INFO, "ACCESS", 9000001, "Delaying a login after repeated failures",
                  LOG_STR("client", ctx->client->remote), LOG_INT("delayMillis", (int64_t)wait));
        a->backoff_timer = bson_malloc0(sizeof *a->backoff_timer);
        uv_timer_init(server.loop, a->backoff_timer);
        a->backoff_timer->data = ctx->client;
        uv_timer_start(a->backoff_timer, sasl_on_backoff, wait, 0);
        ctx->parked = true;
        return true;
    }
    return sasl_start(ctx, ctx->db, ctx->cmd, false, ctx->reply, err);
}

void sasl_end(cmd_auth_t *a)
{
    scram_server_free(a->conv);
    a->conv = NULL;
    a->conv_awaiting_empty = false;
}

bool cmd_sasl_continue(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_iter_t it;
    cmd_auth_t *a = access_auth(ctx->client);
    if (!cmd_find(ctx, "conversationId", &it) || !BSON_ITER_HOLDS_NUMBER(&it))
        return dberr_set(err, 40414,
                         "BSON field 'saslContinue.conversationId' is missing but a required "
                         "field");
    if (!a->conv || bson_iter_as_int64(&it) != 1)
        return dberr_set(err, DBERR_PROTOCOL_ERROR, "No SASL session state found");
    if (!cmd_find(ctx, "payload", &it))
        return dberr_set(err, 40414,
                         "BSON field 'saslContinue.payload' is missing but a required field");
    uint8_t *payload = NULL;
    size_t n = 0;
    char *final = NULL;
    size_t final_len = 0;
    bool ok = false;
    scram_server_t *conv = a->conv;
    const char *mech = scram_mech_name(conv->mech);
    if (!sasl_payload(&it, &payload, &n, err))
        goto done;
    if (a->conv_awaiting_empty) {
        if (n != 0) {
            dberr_set(err, DBERR_BAD_VALUE, "SCRAM conversation already completed");
            goto done;
        }
        sasl_append_step(ctx->reply, true, "", 0);
        sasl_end(a);
        ok = true;
        goto done;
    }
    if (!scram_server_read_final(conv, payload, n, &final, &final_len, err)) {
        if (err->code == 18)
            sasl_note_result(ctx->client, false);
        goto done;
    }
    sasl_note_result(ctx->client, true);
    if (!access_login(ctx->client, a->conv_db, conv->user, err))
        goto done;
    sasl_log_success(ctx, mech, conv->user, a->conv_db, a->conv_speculative);
    if (a->conv_skip_empty) {
        sasl_append_step(ctx->reply, true, final, final_len);
        sasl_end(a);
    } else {
        sasl_append_step(ctx->reply, false, final, final_len);
        a->conv_awaiting_empty = true;
    }
    ok = true;
done:
    if (!ok && a->conv) {
        sasl_log_failure(ctx, mech, conv->user, a->conv_db, a->conv_speculative, err);
        sasl_end(a);
    }
    bson_free(payload);
    bson_free(final);
    return ok;
}

bool cmd_logout(cmd_ctx_t *ctx, dberr_t *err)
{
    access_logout(ctx->client);
    return true;
}

bool cmd_authenticate(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_iter_t it;
    const char *mech = cmd_find(ctx, "mechanism", &it) && BSON_ITER_HOLDS_UTF8(&it)
                           ? bson_iter_utf8(&it, NULL)
                           : "MONGODB-CR";
    return dberr_set(err, 334, "Received authentication for mechanism %s which is not enabled",
                     mech);
}

void sasl_hello_append(cmd_ctx_t *ctx, bson_t *reply)
{
    bson_iter_t it;
    if (cmd_find(ctx, "saslSupportedMechs", &it) && BSON_ITER_HOLDS_UTF8(&it)) {
        const char *name = bson_iter_utf8(&it, NULL), *dot = strchr(name, '.');
        char db[64];
        if (dot && (size_t)(dot - name) < sizeof db) {
            memcpy(db, name, (size_t)(dot - name));
            db[dot - name] = '\0';
            record_t *r = access_find_user(db, dot + 1);
            bson_t doc, arr;
            bson_iter_t c, m;
            if (r) {
                record_view(r, &doc);
                bson_append_array_begin(reply, "saslSupportedMechs", -1, &arr);
                uint32_t n = 0;
                char key[16];
                if (bson_iter_init_find(&c, &doc, "credentials") && bson_iter_recurse(&c, &m))
                    while (bson_iter_next(&m))
                        bson_append_utf8(&arr, cmd_index_key(n++, key, sizeof key), -1,
                                         bson_iter_key(&m), -1);
                bson_append_array_end(reply, &arr);
            }
        }
    }
    bson_t spec;
    /* an address in backoff gets no speculative login: the driver then
     * sends saslStart, which waits */
    if (sasl_backoff_ms(ctx->client) == 0 && cmd_find(ctx, "speculativeAuthenticate", &it) &&
        BSON_ITER_HOLDS_DOCUMENT(&it) &&
        cmd_iter_doc(&it, &spec)) {
        bson_iter_t d;
        const char *db = bson_iter_init_find(&d, &spec, "db") && BSON_ITER_HOLDS_UTF8(&d)
                             ? bson_iter_utf8(&d, NULL)
                             : ctx->db;
        bson_t step = BSON_INITIALIZER;
        dberr_t err = {0};
        bson_iter_t first;
        /* only saslStart can be speculative here (MONGODB-X509's
         * authenticate is not supported) */
        if (bson_iter_init(&first, &spec) && bson_iter_next(&first) &&
            strcmp(bson_iter_key(&first), "saslStart") == 0 &&
            sasl_start(ctx, db, &spec, true, &step, &err))
            BSON_APPEND_DOCUMENT(reply, "speculativeAuthenticate", &step);
        bson_destroy(&step);
    }
}
