/* engine.c: starts and stops the servers the bench measures — atomdb,
 * redis-server and PostgreSQL — each in its own temporary directory on a free
 * 127.0.0.1 port, and makes sure every one is stopped on exit or Ctrl-C. */
#include "bench.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Where Debian's PostgreSQL 15 binaries live (override: BENCH_PG_BIN). */
#define PG_BIN_DEFAULT "/usr/lib/postgresql/15/bin"
#define MAX_ENGINES 16

volatile int engine_interrupted;

/* Engines started and not yet stopped (for the exit and signal paths). */
static engine_t *engine_running[MAX_ENGINES];

static void engine_register(engine_t *e)
{
    for (int i = 0; i < MAX_ENGINES; i++)
        if (!engine_running[i]) {
            engine_running[i] = e;
            return;
        }
}

static void engine_unregister(engine_t *e)
{
    for (int i = 0; i < MAX_ENGINES; i++)
        if (engine_running[i] == e)
            engine_running[i] = NULL;
}

static void engine_on_signal(int sig)
{
    engine_interrupted = sig;
}

void engine_install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = engine_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    atexit(engine_stop_all);
}

/* Reads utime, stime, cutime, cstime (seconds) and ppid of a process. */
static bool engine_proc_times(pid_t pid, double t[4], int *ppid)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long long ut, st;
    long long cut, cst;
    if (!p || sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld",
                     ppid, &ut, &st, &cut, &cst) != 5)
        return false;
    double hz = (double)sysconf(_SC_CLK_TCK);
    t[0] = (double)ut / hz;
    t[1] = (double)st / hz;
    t[2] = (double)cut / hz;
    t[3] = (double)cst / hz;
    return true;
}

double engine_cpu_s(pid_t pid, bool children)
{
    double t[4];
    int ppid;
    if (!engine_proc_times(pid, t, &ppid))
        return -1;
    double total = t[0] + t[1];
    if (!children)
        return total;
    total += t[2] + t[3];
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d))) {
        int child = atoi(de->d_name);
        if (child > 0 && engine_proc_times(child, t, &ppid) && ppid == pid)
            total += t[0] + t[1];
    }
    if (d)
        closedir(d);
    return total;
}

int engine_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

bool engine_wait_port(int port, int timeout_ms)
{
    int64_t deadline = bench_now_ns() + (int64_t)timeout_ms * 1000000;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    while (bench_now_ns() < deadline && !engine_interrupted) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0)
            return false;
        int rc = connect(fd, (struct sockaddr *)&a, sizeof a);
        close(fd);
        if (rc == 0)
            return true;
        bench_sleep_us(500);
    }
    return false;
}

/* Forks and execs argv with stdout/stderr to logpath, in its own process
 * group, dying with the bench; runs as uid/gid when uid >= 0. Returns the pid
 * or -1. */
static pid_t engine_spawn(char *const argv[], const char *logpath, int uid, int gid)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    setpgid(0, 0);
    int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0) {
        dup2(nul, 0);
        close(nul);
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    if (uid >= 0 && (setgid((gid_t)gid) != 0 || setuid((uid_t)uid) != 0)) {
        perror("setuid");
        _exit(127);
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    execv(argv[0], argv);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* Waits for pid up to timeout_ms; returns its wait status or -1. */
static int engine_wait_pid(pid_t pid, int timeout_ms)
{
    int64_t deadline = bench_now_ns() + (int64_t)timeout_ms * 1000000;
    int status;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return status;
        if (r < 0 && errno != EINTR)
            return -1;
        if (bench_now_ns() >= deadline)
            return -1;
        bench_sleep_us(2000);
    }
}

/* The non-root account PostgreSQL runs as when the bench runs as root. */
static bool engine_pg_account(int *uid, int *gid)
{
    *uid = *gid = -1;
    if (geteuid() != 0)
        return true;
    const char *name = getenv("BENCH_PG_USER") ? getenv("BENCH_PG_USER") : "postgres";
    struct passwd *pw = getpwnam(name);
    if (!pw)
        return false;
    *uid = (int)pw->pw_uid;
    *gid = (int)pw->pw_gid;
    return true;
}

static bool engine_start_postgres(engine_t *e, char *err, size_t errlen)
{
    const char *bin = getenv("BENCH_PG_BIN") ? getenv("BENCH_PG_BIN") : PG_BIN_DEFAULT;
    int uid, gid;
    if (!engine_pg_account(&uid, &gid)) {
        snprintf(err, errlen, "running as root and no 'postgres' user to run PostgreSQL as "
                              "(set BENCH_PG_USER)");
        return false;
    }
    snprintf(e->pgdata, sizeof e->pgdata, "%s/pg", e->dir);
    if (uid >= 0) {
        chmod(e->dir, 0755);
        if (mkdir(e->pgdata, 0700) != 0 || chown(e->pgdata, (uid_t)uid, (gid_t)gid) != 0) {
            snprintf(err, errlen, "prepare %s: %s", e->pgdata, strerror(errno));
            return false;
        }
    }
    char initdb[300], postgres[300], log[300], port[16], sync[64];
    snprintf(initdb, sizeof initdb, "%s/initdb", bin);
    snprintf(postgres, sizeof postgres, "%s/postgres", bin);
    snprintf(log, sizeof log, "%s/server.log", e->dir);
    if (uid >= 0) {
        int fd = open(log, O_WRONLY | O_CREAT, 0644);
        if (fd >= 0) {
            if (fchown(fd, (uid_t)uid, (gid_t)gid) != 0)
                perror("fchown");
            close(fd);
        }
    }
    char *iargv[] = {initdb, "-D", e->pgdata, "-U", "postgres", "-A", "trust", "-E", "UTF8",
                     "--no-sync", "--no-instructions", NULL};
    pid_t ipid = engine_spawn(iargv, log, uid, gid);
    int st = ipid > 0 ? engine_wait_pid(ipid, 120000) : -1;
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (ipid > 0 && st == -1) {
            kill(ipid, SIGKILL);
            engine_wait_pid(ipid, 5000);
        }
        snprintf(err, errlen, "initdb failed (see %s)", log);
        return false;
    }
    snprintf(port, sizeof port, "%d", e->port);
    snprintf(sync, sizeof sync, "synchronous_commit=%s",
             !strcmp(e->conf.durability, "sync_on") ? "on" : "off");
    char *pargv[] = {postgres, "-D", e->pgdata, "-p", port, "-h", "127.0.0.1", "-k", e->pgdata,
                     "-c", sync, "-c", "max_connections=200", "-c", "shared_buffers=256MB",
                     "-c", "max_wal_size=4GB", "-c", "checkpoint_timeout=30min",
                     "-c", "log_min_messages=warning", NULL};
    e->pid = engine_spawn(pargv, log, uid, gid);
    return e->pid > 0;
}

bool bench_auth = false;
const char *bench_history_mb = NULL;

bool engine_start(engine_t *e, const eng_conf_t *conf, const char *atomdb_path, char *err,
                  size_t errlen)
{
    memset(e, 0, sizeof *e);
    e->conf = *conf;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(e->dir, sizeof e->dir, "%s/atomdb-bench-XXXXXX", tmp);
    if (!mkdtemp(e->dir)) {
        snprintf(err, errlen, "mkdtemp %s: %s", e->dir, strerror(errno));
        e->dir[0] = 0;
        return false;
    }
    e->port = engine_free_port();
    engine_register(e);
    char port[16], log[300], data[300];
    snprintf(port, sizeof port, "%d", e->port);
    snprintf(log, sizeof log, "%s/server.log", e->dir);
    snprintf(data, sizeof data, "%s/data", e->dir);
    bool ok = true;
    switch (conf->kind) {
    case ENG_ATOMDB: {
        char *argv[16] = {(char *)atomdb_path, "--bind", "127.0.0.1", "--port", port, "--dbpath",
                          data, "--journal", (char *)conf->durability, "--log-level", "warn"};
        int argc = 11;
        if (bench_history_mb) {
            argv[argc++] = "--change-stream-history-mb";
            argv[argc++] = (char *)bench_history_mb;
        }
        if (bench_auth)
            argv[argc++] = "--auth";
        argv[argc] = NULL;
        if (access(atomdb_path, X_OK) != 0) {
            snprintf(err, errlen, "atomdb binary %s not found (build it or pass --atomdb)",
                     atomdb_path);
            ok = false;
            break;
        }
        e->pid = engine_spawn(argv, log, -1, -1);
        break;
    }
    case ENG_REDIS: {
        const char *bin = getenv("BENCH_REDIS") ? getenv("BENCH_REDIS") : "/usr/bin/redis-server";
        char *argv[] = {(char *)bin, "--port", port, "--bind", "127.0.0.1", "--dir", e->dir,
                        "--appendonly", "yes", "--appendfsync", (char *)conf->durability,
                        "--save", "", "--protected-mode", "no", "--daemonize", "no", NULL};
        e->pid = engine_spawn(argv, log, -1, -1);
        break;
    }
    case ENG_POSTGRES:
        ok = engine_start_postgres(e, err, errlen);
        break;
    default:
        ok = false;
    }
    if (ok && e->pid <= 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        ok = false;
    }
    if (ok && !engine_wait_port(e->port, 30000)) {
        snprintf(err, errlen, "%s did not listen on 127.0.0.1:%d within 30 s (see %s)",
                 eng_name(conf->kind), e->port, log);
        ok = false;
    }
    if (ok && bench_auth && conf->kind == ENG_ATOMDB)
        ok = drv_mongo_create_user(e->port, err, errlen);
    if (!ok)
        engine_stop(e, true);
    return ok;
}

bool engine_restart(engine_t *e, const char *atomdb_path, int sig, char *err, size_t errlen)
{
    if (e->pid > 0) {
        kill(e->pid, sig);
        if (engine_wait_pid(e->pid, 60000) == -1) {
            kill(e->pid, SIGKILL);
            engine_wait_pid(e->pid, 5000);
        }
        e->pid = 0;
    }
    if (e->conf.kind != ENG_ATOMDB) {
        snprintf(err, errlen, "restart is only implemented for atomdb");
        return false;
    }
    char port[16], log[300], data[300];
    snprintf(port, sizeof port, "%d", e->port);
    snprintf(log, sizeof log, "%s/server.log", e->dir);
    snprintf(data, sizeof data, "%s/data", e->dir);
    char *argv[] = {(char *)atomdb_path, "--bind", "127.0.0.1", "--port", port, "--dbpath", data,
                    "--journal", (char *)e->conf.durability, "--log-level", "warn", NULL};
    e->pid = engine_spawn(argv, log, -1, -1);
    if (e->pid <= 0 || !engine_wait_port(e->port, 120000)) {
        snprintf(err, errlen, "atomdb did not restart (see %s)", log);
        return false;
    }
    return true;
}

static int engine_rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    remove(path);
    return 0;
}

void engine_stop(engine_t *e, bool keep)
{
    if (e->pid > 0) {
        /* PostgreSQL: SIGINT is its fast shutdown; the others stop on SIGTERM. */
        kill(e->pid, e->conf.kind == ENG_POSTGRES ? SIGINT : SIGTERM);
        if (engine_wait_pid(e->pid, 10000) == -1) {
            kill(e->pid, SIGKILL);
            engine_wait_pid(e->pid, 5000);
        }
        e->pid = 0;
    }
    if (e->dir[0] && !keep)
        nftw(e->dir, engine_rm_one, 16, FTW_DEPTH | FTW_PHYS);
    else if (e->dir[0])
        fprintf(stderr, "atomdb-bench: kept %s\n", e->dir);
    e->dir[0] = 0;
    engine_unregister(e);
}

void engine_stop_all(void)
{
    for (int i = 0; i < MAX_ENGINES; i++)
        if (engine_running[i])
            engine_stop(engine_running[i], false);
}
