/* metrics: the Prometheus text exposition (format 0.0.4) of atomdb's
 * figures — commands by name and outcome with latency histograms,
 * connections, network, documents, cursors, sessions and transactions,
 * document locks and their waits, lease locks, the log (bytes, group-commit
 * batches, fdatasync latency), snapshots and memory. Every family is
 * `atomdb_*` with its unit in the name (docs/operations.md lists them). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "cmd/server.h"
#include "cmd/stats.h"
#include "http/http-private.h"
#include "journal/journal.h"
#include "lease/lease.h"
#include "store/cursor.h"
#include "txn/lockmgr.h"
#include "txn/session.h"
#include "txn/txn.h"

/* # HELP and # TYPE of one family. */
static void metrics_family(buf_t *b, const char *name, const char *type, const char *help)
{
    http_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A family with one unlabelled sample. */
static void metrics_one(buf_t *b, const char *name, const char *type, const char *help,
                        double v)
{
    metrics_family(b, name, type, help);
    http_printf(b, "%s %.17g\n", name, v);
}

/* One histogram's series: cumulative buckets over `bounds`, +Inf, sum and
 * count. `labels` ("" or `command="find",`) goes before le. */
static void metrics_histogram(buf_t *b, const char *name, const char *labels,
                              const double *bounds, int nbounds, const uint64_t *per_bucket,
                              double sum)
{
    uint64_t cum = 0;
    for (int i = 0; i < nbounds; i++) {
        cum += per_bucket[i];
        http_printf(b, "%s_bucket{%sle=\"%g\"} %llu\n", name, labels, bounds[i],
                    (unsigned long long)cum);
    }
    cum += per_bucket[nbounds];
    http_printf(b, "%s_bucket{%sle=\"+Inf\"} %llu\n", name, labels, (unsigned long long)cum);
    size_t ll = strlen(labels);
    if (ll) /* drop the trailing comma for _sum and _count */
        http_printf(b, "%s_sum{%.*s} %.9g\n%s_count{%.*s} %llu\n", name, (int)ll - 1, labels,
                    sum, name, (int)ll - 1, labels, (unsigned long long)cum);
    else
        http_printf(b, "%s_sum %.9g\n%s_count %llu\n", name, sum, name, (unsigned long long)cum);
}

static void metrics_command_counts(const char *name, const stats_cmd_t *s, void *arg)
{
    if (!s->ok && !s->failed)
        return;
    http_printf(arg, "atomdb_commands_total{command=\"%s\",outcome=\"ok\"} %lld\n", name,
                (long long)s->ok);
    http_printf(arg, "atomdb_commands_total{command=\"%s\",outcome=\"error\"} %lld\n", name,
                (long long)s->failed);
}

static void metrics_command_latency(const char *name, const stats_cmd_t *s, void *arg)
{
    if (!s->ok && !s->failed)
        return;
    char labels[96];
    snprintf(labels, sizeof labels, "command=\"%s\",", name);
    uint64_t per[STATS_BUCKETS + 1];
    for (int i = 0; i <= STATS_BUCKETS; i++)
        per[i] = (uint64_t)s->buckets[i];
    metrics_histogram(arg, "atomdb_command_duration_seconds", labels, stats_bucket_bounds,
                      STATS_BUCKETS, per, (double)s->sum_ns / 1e9);
}

static void metrics_leases(const lease_info_t *info, void *arg)
{
    int64_t *acc = arg;
    acc[0] += info->held ? 1 : 0;
    acc[1] += (int64_t)info->waiting;
}


void metrics_render(buf_t *b)
{
    metrics_family(b, "atomdb_build_info", "gauge", "atomdb's version (always 1).");
    http_printf(b, "atomdb_build_info{version=\"%s\",mongodb_version=\"%s\"} 1\n", ATOMDB_VERSION,
                SERVER_MONGODB_VERSION);
    metrics_one(b, "atomdb_uptime_seconds", "gauge", "Seconds since the server started.",
                (double)(uv_hrtime() - server.start_hr) / 1e9);

    metrics_family(b, "atomdb_commands_total", "counter",
                   "Commands finished, by command name and outcome (ok: 1 or an error).");
    cmd_stats_foreach(metrics_command_counts, b);
    metrics_family(b, "atomdb_command_duration_seconds", "histogram",
                   "Command latency from arrival to reply, waits for locks included.");
    cmd_stats_foreach(metrics_command_latency, b);
    metrics_family(b, "atomdb_opcounters_total", "counter",
                   "mongod's opcounters: documents inserted, statements of the other kinds.");
    const server_opcounters_t *o = &server.ops;
    http_printf(b,
                "atomdb_opcounters_total{type=\"insert\"} %lld\n"
                "atomdb_opcounters_total{type=\"query\"} %lld\n"
                "atomdb_opcounters_total{type=\"update\"} %lld\n"
                "atomdb_opcounters_total{type=\"delete\"} %lld\n"
                "atomdb_opcounters_total{type=\"getmore\"} %lld\n"
                "atomdb_opcounters_total{type=\"command\"} %lld\n",
                (long long)o->insert, (long long)o->query, (long long)o->update,
                (long long)o->delete_, (long long)o->getmore, (long long)o->command);
    metrics_one(b, "atomdb_slow_operations_total", "counter",
                "Operations logged as \"Slow query\" (over slowms, sampled).",
                (double)stats_docs.slow_ops);

    metrics_one(b, "atomdb_documents_examined_total", "counter",
                "Documents examined by queries (scans and index fetches).",
                (double)stats_docs.docs_examined);
    metrics_one(b, "atomdb_keys_examined_total", "counter", "Index keys examined by queries.",
                (double)stats_docs.keys_examined);
    metrics_one(b, "atomdb_documents_returned_total", "counter",
                "Documents returned by find, getMore and aggregate.",
                (double)stats_docs.returned);

    metrics_one(b, "atomdb_connections", "gauge", "Client connections open now.",
                (double)server.connections_current);
    metrics_one(b, "atomdb_connections_created_total", "counter",
                "Client connections accepted since start.", (double)server.connections_total);
    metrics_one(b, "atomdb_network_received_bytes_total", "counter",
                "Bytes read from client connections.", (double)server.net_bytes_in);
    metrics_one(b, "atomdb_network_sent_bytes_total", "counter",
                "Bytes of replies written to client connections.", (double)server.net_bytes_out);
    metrics_one(b, "atomdb_network_requests_total", "counter", "Requests received.",
                (double)server.net_requests);
    metrics_one(b, "atomdb_cursors_open", "gauge", "Cursors open now.",
                (double)cursors_count(server.cursors));

    const txn_stats_t *ts = txn_get_stats();
    metrics_one(b, "atomdb_sessions_active", "gauge", "Logical sessions the server keeps.",
                (double)session_count());
    metrics_one(b, "atomdb_transactions_active", "gauge", "Transactions in progress.",
                (double)session_active_txns());
    metrics_one(b, "atomdb_transactions_started_total", "counter", "Transactions started.",
                (double)ts->started);
    metrics_one(b, "atomdb_transactions_committed_total", "counter", "Transactions committed.",
                (double)ts->committed);
    metrics_one(b, "atomdb_transactions_aborted_total", "counter",
                "Transactions aborted (by the client, a conflict, a deadlock or a timeout).",
                (double)ts->aborted);
    metrics_one(b, "atomdb_write_conflicts_total", "counter",
                "Transactional writes refused: the document changed since the snapshot.",
                (double)ts->write_conflicts);
    metrics_one(b, "atomdb_serialization_failures_total", "counter",
                "Serializable commits refused.", (double)ts->serialization_failures);
    metrics_one(b, "atomdb_deadlocks_total", "counter",
                "Wait-for cycles between transactions found (one victim aborted each).",
                (double)ts->deadlocks);

    const lockmgr_stats_t *ls = lockmgr_get_stats();
    metrics_one(b, "atomdb_document_locks_held", "gauge",
                "Documents locked by transactions now.", (double)lockmgr_count());
    metrics_one(b, "atomdb_document_lock_waiters", "gauge",
                "Requests parked on a document lock now.", (double)ls->waiting);
    metrics_one(b, "atomdb_document_lock_waits_total", "counter",
                "Requests that parked on a document lock.", (double)ls->waits);
    metrics_one(b, "atomdb_document_lock_wait_seconds_total", "counter",
                "Time spent parked on document locks by the waits that ended.",
                (double)ls->wait_ns / 1e9);
    metrics_one(b, "atomdb_document_lock_timeouts_total", "counter",
                "Document-lock waits that ran out (maxTransactionLockRequestTimeoutMillis).",
                (double)ls->timeouts);

    int64_t leases[2] = {0, 0};
    lease_foreach(metrics_leases, leases);
    const lease_stats_t *lst = lease_get_stats();
    metrics_one(b, "atomdb_lease_locks_held", "gauge", "Lease locks held now.",
                (double)leases[0]);
    metrics_one(b, "atomdb_lease_locks_waiting", "gauge", "acquireLock requests parked now.",
                (double)leases[1]);
    metrics_one(b, "atomdb_lease_locks_expired_total", "counter",
                "Leases that ran out while held.", (double)lst->expired);
    metrics_one(b, "atomdb_lease_fenced_writes_refused_total", "counter",
                "Writes refused for a stale fencing token.", (double)lst->fenced_refused);

    journal_stats_t js;
    journal_get_stats(&js);
    metrics_one(b, "atomdb_wal_bytes_total", "counter", "Bytes appended to the write-ahead log.",
                (double)js.wal_bytes);
    metrics_one(b, "atomdb_wal_records_total", "counter", "Log records (commits) appended.",
                (double)js.records);
    metrics_one(b, "atomdb_wal_unwritten_records", "gauge",
                "Records appended but not yet handed to the OS (journal lag).",
                (double)(js.last_lsn > js.written_lsn ? js.last_lsn - js.written_lsn : 0));
    metrics_one(b, "atomdb_wal_unsynced_records", "gauge",
                "Records written but not yet fdatasync'ed.",
                (double)(js.last_lsn > js.synced_lsn ? js.last_lsn - js.synced_lsn : 0));
    metrics_one(b, "atomdb_wal_failing", "gauge",
                "1 while the log cannot be written (writes are refused).", js.failing ? 1 : 0);
    metrics_family(b, "atomdb_wal_batch_records", "histogram",
                   "Records per group commit (one write of the log).");
    metrics_histogram(b, "atomdb_wal_batch_records", "", journal_batch_bounds,
                      JOURNAL_BATCH_BUCKETS, js.batch_buckets, (double)js.batch_records);
    metrics_family(b, "atomdb_wal_fsync_duration_seconds", "histogram",
                   "fdatasync latency of the log.");
    metrics_histogram(b, "atomdb_wal_fsync_duration_seconds", "", journal_sync_bounds,
                      JOURNAL_SYNC_BUCKETS, js.sync_buckets, (double)js.sync_ns / 1e9);
    metrics_one(b, "atomdb_snapshots_total", "counter", "Snapshots written since start.",
                (double)js.snapshots);
    metrics_one(b, "atomdb_snapshot_duration_seconds", "gauge",
                "How long the last snapshot took (-1: none since start).",
                js.snapshot_last_ms < 0 ? -1.0 : (double)js.snapshot_last_ms / 1e3);
    metrics_one(b, "atomdb_snapshot_age_seconds", "gauge",
                "Seconds since the last snapshot started, or since start-up.",
                js.snapshot_age_ms < 0 ? -1.0 : (double)js.snapshot_age_ms / 1e3);

    int64_t res, virt;
    cmd_process_memory(&res, &virt);
    metrics_one(b, "atomdb_memory_resident_bytes", "gauge", "Resident memory of the process.",
                (double)res);
    metrics_one(b, "atomdb_memory_virtual_bytes", "gauge", "Virtual memory of the process.",
                (double)virt);
}
