/* statuspage: the live status page at GET / on the metrics port — one
 * server-rendered HTML page (no script, inline SVG, refreshes itself every
 * 2 s): throughput and latency of the last two minutes, connections, lease
 * locks with holder, token, expiry and FIFO queue, transactions with what
 * each waits for (the wait-for graph drawn) and how close each is to its
 * lifetime limit, the slowest recent operations, and the journal. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cmd/server.h"
#include "cmd/stats.h"
#include "http/http-private.h"
#include "journal/journal.h"
#include "lease/lease.h"
#include "txn/lockmgr.h"
#include "txn/session.h"
#include "txn/txn.h"

#define STATUS_MAX_TXNS 64
#define STATUS_MAX_EDGES 128

/* A transaction in progress, as the page names it. */
typedef struct status_txn {
    const txn_t *txn;
    char label[40];       /* "lsid 1a2b3c4d txn 7" */
    int64_t age_ms;
    int64_t left_ms;      /* until transactionLifetimeLimitSeconds */
    size_t locks;
    const txn_t *waits_for;
} status_txn_t;

/* One wait: `from` waits for `to` on the document `what`. */
typedef struct status_edge {
    int from, to;
    char what[160];
} status_edge_t;

typedef struct status_state {
    status_txn_t txns[STATUS_MAX_TXNS];
    int ntxns;
    status_edge_t edges[STATUS_MAX_EDGES];
    int nedges;
    int64_t now;
} status_state_t;

static void status_collect_txn(const session_t *s, void *arg)
{
    status_state_t *st = arg;
    if (!s->txn || s->state != SESSION_TXN_IN_PROGRESS || st->ntxns == STATUS_MAX_TXNS)
        return;
    status_txn_t *t = &st->txns[st->ntxns++];
    t->txn = s->txn;
    snprintf(t->label, sizeof t->label, "lsid %02x%02x%02x%02x txn %" PRId64, s->id[0], s->id[1],
             s->id[2], s->id[3], s->txn_number);
    t->age_ms = st->now - txn_started_ms(s->txn);
    t->left_ms = (int64_t)server.txn_lifetime_s * 1000 - t->age_ms;
    txn_locks(s->txn, &t->locks);
    t->waits_for = txn_waiting_for(s->txn);
}

static int status_txn_index(const status_state_t *st, const txn_t *t)
{
    for (int i = 0; i < st->ntxns; i++)
        if (st->txns[i].txn == t)
            return i;
    return -1;
}

/* "db.coll, _id key 0a1b…" from a lock key (lockmgr_key's bytes). */
static void status_key_text(const buf_t *key, char *out, size_t size)
{
    const char *db = (const char *)key->data;
    size_t dl = strnlen(db, key->len);
    const char *coll = dl < key->len ? db + dl + 1 : "";
    size_t cl = dl + 1 < key->len ? strnlen(coll, key->len - dl - 1) : 0;
    size_t off = dl + 1 + cl + 1;
    char hex[2 * 8 + 1] = "";
    for (size_t i = 0; i < 8 && off + i < key->len; i++)
        snprintf(hex + 2 * i, 3, "%02x", key->data[off + i]);
    snprintf(out, size, "%.*s.%.*s, _id key %s%s", (int)dl, db, (int)cl, coll, hex,
             key->len > off + 8 ? "…" : "");
}

static void status_collect_lock(const buf_t *key, txn_t *holder, txn_t *const *waiters,
                                size_t nwaiters, void *arg)
{
    status_state_t *st = arg;
    int to = status_txn_index(st, holder);
    for (size_t i = 0; i < nwaiters && st->nedges < STATUS_MAX_EDGES; i++) {
        int from = status_txn_index(st, waiters[i]);
        if (from < 0 || to < 0)
            continue;
        status_edge_t *e = &st->edges[st->nedges++];
        e->from = from;
        e->to = to;
        status_key_text(key, e->what, sizeof e->what);
    }
}

/* An inline SVG sparkline of `n` values. */
static void status_sparkline(buf_t *b, const double *v, int n, const char *unit)
{
    const int w = 360, h = 48;
    double max = 0;
    for (int i = 0; i < n; i++)
        if (v[i] > max)
            max = v[i];
    http_printf(b, "<svg class=\"spark\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">", w,
                h, w, h);
    if (n > 1) {
        http_puts(b, "<polyline fill=\"none\" stroke=\"#2a6fdb\" stroke-width=\"1.5\" points=\"");
        for (int i = 0; i < n; i++)
            http_printf(b, "%.1f,%.1f ", (double)i * (w - 2) / (HTTP_HISTORY - 1) + 1,
                        h - 2 - (max > 0 ? v[i] / max * (h - 6) : 0));
        http_puts(b, "\"/>");
    }
    http_printf(b, "</svg> <span class=\"num\">now %.3g %s, max %.3g</span>", n ? v[n - 1] : 0.0,
                unit, max);
}

static void status_lease_row(const lease_info_t *l, void *arg)
{
    buf_t *b = arg;
    int64_t now = lease_now_ms();
    http_puts(b, "<tr><td class=\"lock\">");
    http_html_escape(b, l->name);
    http_puts(b, "</td><td class=\"holder\">");
    if (l->held)
        http_html_escape(b, l->owner);
    else
        http_puts(b, "<i>free</i>");
    http_printf(b, "</td><td>%" PRId64 "</td><td>", l->token);
    if (l->held)
        http_printf(b, "%" PRId64 " ms (conn %" PRId64 ")", l->expires - now, l->conn_id);
    http_puts(b, "</td><td class=\"queue\">");
    for (size_t i = 0; i < l->nqueue; i++) {
        http_printf(b, "%s%zu. ", i ? "<br>" : "", i + 1);
        http_html_escape(b, l->queue[i]);
        http_printf(b, " (gives up in %" PRId64 " ms)", l->queue_deadline[i] - now);
    }
    if (l->waiting > l->nqueue)
        http_printf(b, "<br>… %zu more", l->waiting - l->nqueue);
    http_puts(b, "</td></tr>\n");
}

static void status_slow_row(const stats_slow_op_t *op, void *arg)
{
    buf_t *b = arg;
    time_t t = (time_t)(op->at_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    http_printf(b, "<tr><td>%02d:%02d:%02d</td><td>", tm.tm_hour, tm.tm_min, tm.tm_sec);
    http_html_escape(b, op->command);
    http_puts(b, "</td><td>");
    http_html_escape(b, op->ns);
    http_printf(b, "</td><td>%" PRId64 " ms</td><td>%" PRId64 " ms</td><td>", op->millis,
                op->wait_millis);
    http_html_escape(b, op->plan);
    http_puts(b, "</td></tr>\n");
}

/* The wait-for graph: transactions on a circle, an arrow from each waiter
 * to the holder it waits for. */
static void status_graph(buf_t *b, const status_state_t *st)
{
    int n = st->ntxns;
    const int size = 420, r = 150, c = size / 2;
    http_printf(b, "<svg class=\"graph\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">"
                   "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"28\" refY=\"5\" "
                   "markerWidth=\"8\" markerHeight=\"8\" orient=\"auto\"><path d=\"M0,0L10,5L0,"
                   "10z\" fill=\"#c0392b\"/></marker></defs>",
                size, size, size, size);
    double xs[STATUS_MAX_TXNS], ys[STATUS_MAX_TXNS];
    for (int i = 0; i < n; i++) {
        double a = 2 * M_PI * i / (n ? n : 1) - M_PI / 2;
        xs[i] = c + (n > 1 ? r * cos(a) : 0);
        ys[i] = c + (n > 1 ? r * sin(a) : 0);
    }
    for (int i = 0; i < st->nedges; i++) {
        const status_edge_t *e = &st->edges[i];
        http_printf(b, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#c0392b\" "
                       "stroke-width=\"2\" marker-end=\"url(#arrow)\"/>",
                    xs[e->from], ys[e->from], xs[e->to], ys[e->to]);
    }
    for (int i = 0; i < n; i++) {
        http_printf(b, "<circle cx=\"%.0f\" cy=\"%.0f\" r=\"18\" fill=\"%s\"/>"
                       "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">",
                    xs[i], ys[i], st->txns[i].waits_for ? "#f5b7b1" : "#abebc6", xs[i],
                    ys[i] + 32);
        http_html_escape(b, st->txns[i].label);
        http_puts(b, "</text>");
    }
    http_puts(b, "</svg>");
}

static void status_section(buf_t *b, const char *title)
{
    http_printf(b, "<h2>%s</h2>\n", title);
}

void statuspage_render(buf_t *b)
{
    static status_state_t st; /* loop thread only; too big for the stack */
    memset(&st, 0, sizeof st);
    st.now = server_now_ms();
    session_foreach(status_collect_txn, &st);
    lockmgr_foreach(status_collect_lock, &st);

    http_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                  "<meta http-equiv=\"refresh\" content=\"2\"><title>atomdb status</title>"
                  "<style>body{font:14px sans-serif;margin:1.5em;color:#222}"
                  "table{border-collapse:collapse;margin:.3em 0}"
                  "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}"
                  "th{background:#f0f0f0}.num{color:#555}.warn{background:#fdebd0}"
                  "h2{margin:1.2em 0 .3em;font-size:16px}svg text{font-size:11px}</style>"
                  "</head><body>\n");
    uint64_t up_s = (uv_hrtime() - server.start_hr) / 1000000000ull;
    http_printf(b, "<h1>atomdb %s</h1><p>up %" PRIu64 " s &middot; %lld connections (%lld "
                   "since start) &middot; replica set ",
                ATOMDB_VERSION, up_s, (long long)server.connections_current,
                (long long)server.connections_total);
    http_html_escape(b, server.config.replset);
    http_puts(b, " &middot; <a href=\"/metrics\">/metrics</a></p>\n");

    status_section(b, "Throughput and latency (last 2 minutes)");
    http_sample_t hist[HTTP_HISTORY];
    int n = http_history(hist);
    double ops[HTTP_HISTORY], lat[HTTP_HISTORY];
    for (int i = 0; i < n; i++) {
        ops[i] = (double)hist[i].commands;
        lat[i] = hist[i].latency_s * 1e3;
    }
    http_puts(b, "<p>commands/s ");
    status_sparkline(b, ops, n, "/s");
    http_puts(b, "</p><p>mean latency ");
    status_sparkline(b, lat, n, "ms");
    http_puts(b, "</p>\n");

    status_section(b, "Lease locks");
    http_puts(b, "<table id=\"leases\"><tr><th>lock</th><th>holder (owner)</th><th>token</th>"
                  "<th>expires in</th><th>waiting, first in line first</th></tr>\n");
    size_t before = b->len;
    lease_foreach(status_lease_row, b);
    if (b->len == before)
        http_puts(b, "<tr><td colspan=\"5\"><i>no lock held or awaited</i></td></tr>\n");
    http_puts(b, "</table>\n");

    status_section(b, "Transactions");
    const txn_stats_t *ts = txn_get_stats();
    http_printf(b, "<p>%d in progress &middot; lifetime limit %d s &middot; %" PRIu64
                   " deadlocks found since start &middot; %" PRIu64 " write conflicts</p>\n",
                st.ntxns, server.txn_lifetime_s, ts->deadlocks, ts->write_conflicts);
    http_puts(b, "<table id=\"txns\"><tr><th>transaction</th><th>age</th><th>times out in</th>"
                  "<th>locks held</th><th>waits for</th></tr>\n");
    for (int i = 0; i < st.ntxns; i++) {
        const status_txn_t *t = &st.txns[i];
        bool close = t->left_ms < (int64_t)server.txn_lifetime_s * 250;
        http_printf(b, "<tr%s><td>", close ? " class=\"warn\"" : "");
        http_html_escape(b, t->label);
        http_printf(b, "</td><td>%" PRId64 " ms</td><td>%" PRId64 " ms</td><td>%zu</td><td>",
                    t->age_ms, t->left_ms, t->locks);
        int shown = 0;
        for (int e = 0; e < st.nedges; e++) {
            if (st.edges[e].from != i)
                continue;
            http_printf(b, "%s", shown++ ? "<br>" : "");
            http_html_escape(b, st.txns[st.edges[e].to].label);
            http_puts(b, " on ");
            http_html_escape(b, st.edges[e].what);
        }
        http_puts(b, "</td></tr>\n");
    }
    if (!st.ntxns)
        http_puts(b, "<tr><td colspan=\"5\"><i>none</i></td></tr>\n");
    http_puts(b, "</table>\n");
    if (st.ntxns)
        status_graph(b, &st);

    status_section(b, "Slowest recent operations (over slowms)");
    http_printf(b, "<p>slowms %d, sampleRate %g</p>", stats_slow.slowms, stats_slow.sample_rate);
    http_puts(b, "<table id=\"slow\"><tr><th>at (UTC)</th><th>command</th><th>namespace</th>"
                  "<th>took</th><th>waited</th><th>plan</th></tr>\n");
    before = b->len;
    stats_slow_foreach(status_slow_row, b);
    if (b->len == before)
        http_puts(b, "<tr><td colspan=\"6\"><i>none</i></td></tr>\n");
    http_puts(b, "</table>\n");

    status_section(b, "Journal");
    journal_stats_t js;
    journal_get_stats(&js);
    static const char *modes[] = {"none", "write", "fsync"};
    http_printf(b, "<table id=\"journal\"><tr><th>mode</th><td>%s</td></tr>"
                   "<tr><th>last record</th><td>%" PRIu64 "</td></tr>"
                   "<tr><th>written to the OS up to</th><td>%" PRIu64 "</td></tr>"
                   "<tr><th>fdatasync'ed up to</th><td>%" PRIu64 "</td></tr>"
                   "<tr><th>state</th><td>%s</td></tr>"
                   "<tr><th>log bytes since start</th><td>%" PRIu64 "</td></tr>"
                   "<tr><th>group commits</th><td>%" PRIu64 " (%.2f records each)</td></tr>"
                   "<tr><th>fdatasync</th><td>%" PRIu64 " calls, mean %.3f ms</td></tr>"
                   "<tr><th>snapshots</th><td>%" PRIu64 " since start; last took %" PRId64
                   " ms; %s%" PRId64 " s since the last</td></tr></table>\n",
                js.mode <= JOURNAL_FSYNC ? modes[js.mode] : "?", js.last_lsn, js.written_lsn,
                js.synced_lsn, js.failing ? "<b>FAILING: writes are refused</b>" : "ok",
                js.wal_bytes, js.batches,
                js.batches ? (double)js.batch_records / (double)js.batches : 0.0, js.syncs,
                js.syncs ? (double)js.sync_ns / 1e6 / (double)js.syncs : 0.0, js.snapshots,
                js.snapshot_last_ms, js.snapshot_running ? "one running now; " : "",
                js.snapshot_age_ms / 1000);
    http_puts(b, "</body></html>\n");
}
