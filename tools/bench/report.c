/* report.c: the bench's outputs — the text table, the JSON rows (keys fixed by
 * issue 7) and a hand-written SVG chart of throughput against clients, one
 * panel per scenario and engine, one line per strategy. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void report_table_header(void)
{
    printf("%-8s %-9s %-15s %-16s %-9s %7s %10s %9s %9s %7s %7s %9s %10s  %s\n", "engine",
           "client", "scenario", "strategy", "durab.", "clients", "ops/s", "p50(us)", "p99(us)",
           "srv/op", "cli/op", "retries", "violations", "notes");
}

void report_table_row(row_t *r)
{
    for (char *p = r->note; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    if (r->na) {
        printf("%-8s %-9s %-15s %-16s %-9s %7d %10s %9s %9s %7s %7s %9s %10s  n/a: %s\n",
               eng_name(r->conf.kind), r->client ? r->client : "-", scen_name(r->scen),
               strat_name(r->strat), r->conf.durability, r->clients, "n/a", "-", "-", "-", "-",
               "-", "-", r->note);
    } else {
        /* srv/op, cli/op: CPU microseconds per operation of the server and the clients */
        printf("%-8s %-9s %-15s %-16s %-9s %7d %10.0f %9.0f %9.0f %7.1f %7.1f %9llu %10llu  %s%s\n",
               eng_name(r->conf.kind), r->client ? r->client : "-", scen_name(r->scen),
               strat_name(r->strat), r->conf.durability, r->clients, r->ops_per_sec, r->p50_us,
               r->p99_us, r->server_cpu_us, r->client_cpu_us, (unsigned long long)r->retries,
               (unsigned long long)r->violations, r->violations ? "BROKEN " : "", r->note);
    }
    fflush(stdout);
}

/* Writes s as a JSON string. */
static void report_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

bool report_json(const char *path, const row_t *rows, int n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    fprintf(f, "[\n");
    for (int i = 0; i < n; i++) {
        const row_t *r = &rows[i];
        fprintf(f, "  {\"engine\": \"%s\", \"scenario\": \"%s\", \"strategy\": \"%s\", "
                   "\"durability\": \"%s\", \"clients\": %d, \"client\": \"%s\", ",
                eng_name(r->conf.kind), scen_name(r->scen), strat_name(r->strat),
                r->conf.durability, r->clients, r->client ? r->client : "");
        if (r->na) {
            fprintf(f, "\"ops_per_sec\": null, \"p50_us\": null, \"p99_us\": null, "
                       "\"retries\": null, \"violations\": null, \"server_cpu_us\": null, "
                       "\"client_cpu_us\": null, \"na_reason\": ");
            report_json_str(f, r->note);
            fprintf(f, "}");
        } else {
            fprintf(f,
                    "\"ops_per_sec\": %.1f, \"p50_us\": %.0f, \"p99_us\": %.0f, \"retries\": %llu, "
                    "\"violations\": %llu, \"server_cpu_us\": %.2f, \"client_cpu_us\": %.2f}",
                    r->ops_per_sec, r->p50_us, r->p99_us, (unsigned long long)r->retries,
                    (unsigned long long)r->violations, r->server_cpu_us, r->client_cpu_us);
        }
        fprintf(f, "%s\n", i + 1 < n ? "," : "");
    }
    fprintf(f, "]\n");
    return fclose(f) == 0;
}

/* Line colours per strategy. */
static const char *const report_colors[STRAT_COUNT] = {
    "#d62728", "#ff7f0e", "#2ca02c", "#1f77b4", "#9467bd", "#8c564b", "#17becf"};

#define PANEL_W 250
#define PANEL_H 170
#define MARGIN_L 55
#define MARGIN_T 40
#define GAP 30

/* Rounds up to 1, 2 or 5 times a power of ten. */
static double report_nice(double v)
{
    if (v <= 0)
        return 1;
    double p = pow(10, floor(log10(v)));
    double m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

bool report_svg(const char *path, const row_t *rows, int n)
{
    /* Panels: distinct (engine, durability) columns and scenario rows. */
    eng_conf_t cols[16];
    int ncols = 0, clients[16], nclients = 0;
    bool scen_used[SCEN_COUNT] = {false};
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int c = 0; c < ncols; c++)
            seen |= cols[c].kind == rows[i].conf.kind &&
                    !strcmp(cols[c].durability, rows[i].conf.durability);
        if (!seen && ncols < 16)
            cols[ncols++] = rows[i].conf;
        scen_used[rows[i].scen] = true;
        seen = false;
        for (int c = 0; c < nclients; c++)
            seen |= clients[c] == rows[i].clients;
        if (!seen && nclients < 16)
            clients[nclients++] = rows[i].clients;
    }
    for (int a = 0; a < nclients; a++)
        for (int b = a + 1; b < nclients; b++)
            if (clients[b] < clients[a]) {
                int t = clients[a];
                clients[a] = clients[b];
                clients[b] = t;
            }
    int nrows = 0;
    for (int s = 0; s < SCEN_COUNT; s++)
        nrows += scen_used[s];
    int width = MARGIN_L + ncols * (PANEL_W + GAP + MARGIN_L) + 20;
    int height = MARGIN_T + 40 + nrows * (PANEL_H + GAP + 30) + 20;
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "font-family=\"sans-serif\" font-size=\"11\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"10\" y=\"18\" font-size=\"15\">atomdb-bench: throughput (ops/s) against "
            "client processes; dashed = invariant violations found</text>\n",
            width, height);
    for (int st = 0; st < STRAT_COUNT; st++)
        fprintf(f,
                "<line x1=\"%d\" y1=\"32\" x2=\"%d\" y2=\"32\" stroke=\"%s\" stroke-width=\"3\"/>"
                "<text x=\"%d\" y=\"36\">%s</text>\n",
                10 + st * 130, 30 + st * 130, report_colors[st], 34 + st * 130, strat_name(st));
    int prow = 0;
    for (int s = 0; s < SCEN_COUNT; s++) {
        if (!scen_used[s])
            continue;
        for (int c = 0; c < ncols; c++) {
            int x0 = MARGIN_L + c * (PANEL_W + GAP + MARGIN_L);
            int y0 = MARGIN_T + 40 + prow * (PANEL_H + GAP + 30);
            double ymax = 0;
            for (int i = 0; i < n; i++)
                if (rows[i].scen == (scen_t)s && rows[i].conf.kind == cols[c].kind &&
                    !strcmp(rows[i].conf.durability, cols[c].durability) && !rows[i].na &&
                    rows[i].ops_per_sec > ymax)
                    ymax = rows[i].ops_per_sec;
            ymax = report_nice(ymax);
            fprintf(f,
                    "<text x=\"%d\" y=\"%d\" font-size=\"12\" font-weight=\"bold\">%s — %s %s"
                    "</text>\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                    "stroke=\"#999\"/>\n",
                    x0, y0 - 6, scen_name(s), eng_name(cols[c].kind), cols[c].durability, x0, y0,
                    PANEL_W, PANEL_H);
            for (int t = 0; t <= 4; t++) {
                int y = y0 + PANEL_H - t * PANEL_H / 4;
                fprintf(f,
                        "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#eee\"/>"
                        "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.0f</text>\n",
                        x0, y, x0 + PANEL_W, y, x0 - 4, y + 4, ymax * t / 4);
            }
            for (int k = 0; k < nclients; k++) {
                int x = x0 + (nclients > 1 ? k * (PANEL_W - 20) / (nclients - 1) + 10 : PANEL_W / 2);
                fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", x,
                        y0 + PANEL_H + 14, clients[k]);
            }
            for (int st = 0; st < STRAT_COUNT; st++) {
                bool broken = false, any = false;
                char pts[2048] = "";
                size_t used = 0;
                for (int k = 0; k < nclients; k++) {
                    for (int i = 0; i < n; i++) {
                        const row_t *r = &rows[i];
                        if (r->scen != (scen_t)s || r->strat != (strat_t)st || r->na ||
                            r->clients != clients[k] || r->conf.kind != cols[c].kind ||
                            strcmp(r->conf.durability, cols[c].durability))
                            continue;
                        int x = x0 + (nclients > 1 ? k * (PANEL_W - 20) / (nclients - 1) + 10
                                                   : PANEL_W / 2);
                        double y = y0 + PANEL_H - r->ops_per_sec / ymax * PANEL_H;
                        used += (size_t)snprintf(pts + used, sizeof pts - used, "%d,%.1f ", x, y);
                        broken |= r->violations > 0;
                        any = true;
                        fprintf(f, "<circle cx=\"%d\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", x,
                                y, report_colors[st]);
                    }
                }
                if (any)
                    fprintf(f,
                            "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" "
                            "stroke-width=\"2\"%s/>\n",
                            pts, report_colors[st], broken ? " stroke-dasharray=\"5,4\"" : "");
            }
        }
        prow++;
    }
    fprintf(f, "</svg>\n");
    return fclose(f) == 0;
}
