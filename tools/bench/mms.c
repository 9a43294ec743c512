/* mms.c: `atomdb-bench measure-server --only mms` — mongodb-memory-server's
 * MongoMemoryServer.create() → first insert and the same for a one-member
 * MongoMemoryReplSet, with atomdb as MONGOMS_SYSTEM_BINARY (issue 21), median
 * of 10 each. The timing runs in Node (mms-start.mjs); this file runs it and
 * reports. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MMS_RUNS 10
#define MMS_TARGET_MS 50.0

static double mms_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void measure_mms(const char *atomdb)
{
    printf("\n## mongodb-memory-server with MONGOMS_SYSTEM_BINARY=atomdb: create() -> first "
           "insert (median of %d, target <= %.0f ms)\n",
           MMS_RUNS, MMS_TARGET_MS);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "node '%s/mms-start.mjs' '%s' %d 2>&1", BENCH_SOURCE_DIR, atomdb,
             MMS_RUNS);
    FILE *p = popen(cmd, "r");
    if (!p) {
        printf("  cannot run node: n/a\n");
        return;
    }
    double create[2][MMS_RUNS], insert[2][MMS_RUNS];
    int n[2] = {0, 0};
    char line[1024];
    while (fgets(line, sizeof line, p)) {
        char kind[16];
        double c, i;
        if (sscanf(line, "{\"kind\":\"%15[a-z]\",\"create_ms\":%lf,\"insert_ms\":%lf", kind, &c,
                   &i) == 3) {
            int k = strcmp(kind, "server") == 0 ? 0 : 1;
            if (n[k] < MMS_RUNS) {
                create[k][n[k]] = c;
                insert[k][n[k]] = i;
                n[k]++;
            }
            printf("  %-8s run %2d: create() %6.1f ms, first insert done at %6.1f ms\n",
                   k ? "replset" : "server", n[k], c, i);
        } else {
            printf("  node: %s", line);
        }
    }
    int rc = pclose(p);
    static const char *const names[] = {"MongoMemoryServer.create()",
                                        "MongoMemoryReplSet.create({replSet: {count: 1}})"};
    for (int k = 0; k < 2; k++) {
        if (n[k] < MMS_RUNS) {
            printf("  %s: only %d of %d runs finished (node exit %d): n/a\n", names[k], n[k],
                   MMS_RUNS, rc);
            continue;
        }
        double ins = mms_median(insert[k], MMS_RUNS), cr = mms_median(create[k], MMS_RUNS);
        printf("  %s -> first insert: median %.1f ms (create() alone %.1f ms) -> %s\n", names[k],
               ins, cr, ins <= MMS_TARGET_MS ? "met" : "NOT MET");
    }
}
