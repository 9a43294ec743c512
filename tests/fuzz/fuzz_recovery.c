/* fuzz_recovery: arbitrary bytes as a log segment and as a snapshot file.
 * Input: one flags byte, then the file's bytes. Flag bit 0 recomputes every
 * checksum first (so the fuzzer gets past them into record and entry
 * decoding), bit 1 recovers with --repair. Recovery must load the files or
 * refuse with a message naming the file and an offset or cause; it must
 * never crash or loop (libFuzzer's -timeout). */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "journal/journal-private.h"
#include "store/catalog.h"
#include "util/crc32c.h"

static const char *fuzz_dir;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_dir = fuzz_tmpdir_make("recovery");
    return 0;
}

static int fuzz_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    if (ftw->level > 0)
        remove(path);
    return 0;
}

static void fuzz_write(const char *name, const uint8_t *data, size_t size)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        abort();
}

/* Recomputes the checksums of a segment's records where their lengths fit. */
static void fuzz_fix_wal(uint8_t *p, size_t size)
{
    size_t off = WAL_HEADER_SIZE;
    while (size >= WAL_RECORD_HEADER && off <= size - WAL_RECORD_HEADER) {
        uint32_t len = (uint32_t)buf_get_le(p + off, 4);
        if (len > size - off - WAL_RECORD_HEADER)
            break;
        buf_put_le(p + off + 4, 4, crc32c(p + off + 8, 8 + (size_t)len));
        off += WAL_RECORD_HEADER + len;
    }
}

/* Recomputes the checksums of a snapshot's entries where their lengths fit. */
static void fuzz_fix_snapshot(uint8_t *p, size_t size)
{
    size_t off = 16;
    while (size >= 9 && off <= size - 9) {
        uint32_t len = (uint32_t)buf_get_le(p + off + 1, 4);
        if (len > size - off - 9)
            break;
        buf_put_le(p + off + 5, 4, crc32c(p + off + 9, len));
        off += 9 + len;
    }
}

static void fuzz_recover(bool repair)
{
    catalog_t *cat = catalog_new();
    uint64_t lsn = 0;
    dberr_t err = {0};
    if (!journal_recover_dir(fuzz_dir, repair, cat, &lsn, &err) &&
        (!strstr(err.msg, fuzz_dir) || err.code == 0)) {
        fprintf(stderr, "refusal without the file's name: %s\n", err.msg);
        abort(); /* a refusal must name the file */
    }
    catalog_destroy(cat);
    nftw(fuzz_dir, fuzz_rm, 8, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t flags = data[0];
    size--;
    uint8_t *p = malloc(size ? size : 1);
    memcpy(p, data + 1, size);
    bool fix = flags & 1, repair = flags & 2;

    if (fix)
        fuzz_fix_wal(p, size);
    fuzz_write("wal-0000000000000001.log", p, size);
    fuzz_recover(repair);

    memcpy(p, data + 1, size);
    if (fix)
        fuzz_fix_snapshot(p, size);
    fuzz_write("snapshot-0000000000000005.adb", p, size);
    fuzz_recover(repair);
    free(p);
    return 0;
}
