/* plshim: an LD_PRELOAD library that records every change atomdb makes under
 * one directory — open/creat (with O_TRUNC), write, pwrite, ftruncate,
 * fsync/fdatasync (of files and of the directory), rename, unlink — with the
 * bytes written and a CLOCK_MONOTONIC time, appended to a log file. The
 * calls themselves go through unchanged. powerloss.py replays the log to
 * rebuild the files as a power cut at any point would have left them (what
 * was synced, plus a prefix of what was not) and checks recovery.
 *
 * Environment: PLSHIM_DIR (the --dbpath, absolute, no trailing slash) and
 * PLSHIM_LOG (the log file, outside PLSHIM_DIR). Record layout, little-endian:
 *   u32 magic 0x504c5348, u32 op, u64 t_ns, i32 fd, u32 pid, u32 pathlen,
 *   u64 offset, u64 len, then pathlen bytes of path, then len bytes of data
 * (for write/pwrite) — one write(2) per record on an O_APPEND descriptor,
 * so records from the snapshot child and the log thread never interleave. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum {
    PL_OPEN = 1,  /* path, fd, offset = flags */
    PL_WRITE,     /* fd, offset, data */
    PL_TRUNCATE,  /* fd, offset = new length */
    PL_SYNC,      /* fd (a file or the directory) */
    PL_RENAME,    /* path = "old\0new" */
    PL_UNLINK,    /* path */
    PL_CLOSE,     /* fd */
};

#define PL_MAX_FD 65536

static char pl_dir[4096];
static size_t pl_dirlen;
static int pl_log = -1;
static unsigned char pl_tracked[PL_MAX_FD]; /* fds of files under pl_dir */
static pthread_mutex_t pl_mu = PTHREAD_MUTEX_INITIALIZER;

static int (*real_open)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static int (*real_ftruncate)(int, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_rename)(const char *, const char *);
static int (*real_unlink)(const char *);
static int (*real_close)(int);

/* The snapshot writer is a forked child: the lock must not be inherited
 * held by a thread that does not exist there. */
static void pl_prefork(void)
{
    pthread_mutex_lock(&pl_mu);
}

static void pl_postfork(void)
{
    pthread_mutex_unlock(&pl_mu);
}

__attribute__((constructor)) static void pl_init(void)
{
    pthread_atfork(pl_prefork, pl_postfork, pl_postfork);
    real_open = dlsym(RTLD_NEXT, "open");
    real_openat = dlsym(RTLD_NEXT, "openat");
    real_write = dlsym(RTLD_NEXT, "write");
    real_pwrite = dlsym(RTLD_NEXT, "pwrite");
    real_writev = dlsym(RTLD_NEXT, "writev");
    real_ftruncate = dlsym(RTLD_NEXT, "ftruncate");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_rename = dlsym(RTLD_NEXT, "rename");
    real_unlink = dlsym(RTLD_NEXT, "unlink");
    real_close = dlsym(RTLD_NEXT, "close");
    const char *dir = getenv("PLSHIM_DIR"), *log = getenv("PLSHIM_LOG");
    if (!dir || !log)
        return;
    snprintf(pl_dir, sizeof pl_dir, "%s", dir);
    pl_dirlen = strlen(pl_dir);
    pl_log = real_open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

/* True when `path` is pl_dir itself or below it (absolute paths only: atomdb
 * builds every data path from --dbpath). */
static int pl_under(const char *path)
{
    return pl_log >= 0 && path && strncmp(path, pl_dir, pl_dirlen) == 0 &&
           (path[pl_dirlen] == '\0' || path[pl_dirlen] == '/');
}

static void pl_record(uint32_t op, int fd, const char *path, size_t pathlen, uint64_t off,
                      const void *data, uint64_t len)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    size_t datalen = op == PL_WRITE ? (size_t)len : 0;
    size_t total = 44 + pathlen + datalen;
    unsigned char *rec = malloc(total);
    if (!rec)
        abort();
    uint32_t magic = 0x504c5348, pl = (uint32_t)pathlen, pid = (uint32_t)getpid();
    uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    int32_t f = fd;
    memcpy(rec, &magic, 4);
    memcpy(rec + 4, &op, 4);
    memcpy(rec + 8, &t, 8);
    memcpy(rec + 16, &f, 4);
    memcpy(rec + 20, &pid, 4); /* the snapshot child's fds reuse the parent's numbers */
    memcpy(rec + 24, &pl, 4);
    memcpy(rec + 28, &off, 8);
    memcpy(rec + 36, &len, 8);
    if (pathlen)
        memcpy(rec + 44, path, pathlen);
    if (datalen)
        memcpy(rec + 44 + pathlen, data, datalen);
    size_t done = 0;
    while (done < total) {
        ssize_t n = real_write(pl_log, rec + done, total - done);
        if (n <= 0 && errno != EINTR)
            abort(); /* a lost record would make every check after it wrong */
        if (n > 0)
            done += (size_t)n;
    }
    free(rec);
}

static int pl_is_tracked(int fd)
{
    return fd >= 0 && fd < PL_MAX_FD && pl_tracked[fd];
}

static void pl_opened(int fd, const char *path, int flags)
{
    if (fd < 0 || fd >= PL_MAX_FD || !pl_under(path))
        return;
    pthread_mutex_lock(&pl_mu);
    pl_tracked[fd] = 1;
    pl_record(PL_OPEN, fd, path, strlen(path), (uint64_t)flags, NULL, 0);
    pthread_mutex_unlock(&pl_mu);
}

int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    int fd = real_open(path, flags, mode);
    pl_opened(fd, path, flags);
    return fd;
}

int open64(const char *path, int flags, ...) __attribute__((alias("open")));

int openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    int fd = real_openat(dirfd, path, flags, mode);
    if (path[0] == '/')
        pl_opened(fd, path, flags);
    return fd;
}

ssize_t write(int fd, const void *buf, size_t n)
{
    if (!pl_is_tracked(fd))
        return real_write(fd, buf, n);
    pthread_mutex_lock(&pl_mu);
    off_t off = lseek(fd, 0, SEEK_CUR);
    ssize_t w = real_write(fd, buf, n);
    if (w > 0)
        pl_record(PL_WRITE, fd, NULL, 0, (uint64_t)off, buf, (uint64_t)w);
    pthread_mutex_unlock(&pl_mu);
    return w;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    if (!pl_is_tracked(fd))
        return real_pwrite(fd, buf, n, off);
    pthread_mutex_lock(&pl_mu);
    ssize_t w = real_pwrite(fd, buf, n, off);
    if (w > 0)
        pl_record(PL_WRITE, fd, NULL, 0, (uint64_t)off, buf, (uint64_t)w);
    pthread_mutex_unlock(&pl_mu);
    return w;
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) __attribute__((alias("pwrite")));

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    if (!pl_is_tracked(fd))
        return real_writev(fd, iov, cnt);
    /* rare on data files: one write per buffer keeps the log simple */
    ssize_t total = 0;
    for (int i = 0; i < cnt; i++) {
        ssize_t w = write(fd, iov[i].iov_base, iov[i].iov_len);
        if (w < 0)
            return total ? total : w;
        total += w;
        if ((size_t)w < iov[i].iov_len)
            break;
    }
    return total;
}

int ftruncate(int fd, off_t len)
{
    int r = real_ftruncate(fd, len);
    if (r == 0 && pl_is_tracked(fd)) {
        pthread_mutex_lock(&pl_mu);
        pl_record(PL_TRUNCATE, fd, NULL, 0, (uint64_t)len, NULL, 0);
        pthread_mutex_unlock(&pl_mu);
    }
    return r;
}

int ftruncate64(int fd, off_t len) __attribute__((alias("ftruncate")));

static int pl_sync(int fd, int (*real)(int))
{
    int r = real(fd);
    /* recorded after the call returned: only then is the data durable */
    if (r == 0 && pl_is_tracked(fd)) {
        pthread_mutex_lock(&pl_mu);
        pl_record(PL_SYNC, fd, NULL, 0, 0, NULL, 0);
        pthread_mutex_unlock(&pl_mu);
    }
    return r;
}

int fsync(int fd)
{
    return pl_sync(fd, real_fsync);
}

int fdatasync(int fd)
{
    return pl_sync(fd, real_fdatasync);
}

int rename(const char *from, const char *to)
{
    int r = real_rename(from, to);
    if (r == 0 && (pl_under(from) || pl_under(to))) {
        char both[8200];
        int n = snprintf(both, sizeof both, "%s%c%s", from, '\0', to);
        pthread_mutex_lock(&pl_mu);
        pl_record(PL_RENAME, -1, both, (size_t)n, 0, NULL, 0);
        pthread_mutex_unlock(&pl_mu);
    }
    return r;
}

int unlink(const char *path)
{
    int r = real_unlink(path);
    if (r == 0 && pl_under(path)) {
        pthread_mutex_lock(&pl_mu);
        pl_record(PL_UNLINK, -1, path, strlen(path), 0, NULL, 0);
        pthread_mutex_unlock(&pl_mu);
    }
    return r;
}

int close(int fd)
{
    if (pl_is_tracked(fd)) {
        pthread_mutex_lock(&pl_mu);
        pl_tracked[fd] = 0;
        pl_record(PL_CLOSE, fd, NULL, 0, 0, NULL, 0);
        int r = real_close(fd);
        pthread_mutex_unlock(&pl_mu);
        return r;
    }
    return real_close(fd);
}
