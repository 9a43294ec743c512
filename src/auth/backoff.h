/* backoff: the wait imposed on one client address after failed logins,
 * shared by the SASL commands and the metrics port's HTTP Basic auth. After
 * BACKOFF_FREE failures in a row from an address, each further attempt waits
 * 100 ms doubling per failure, at most 5 s; a success, or a minute without
 * failures, clears its count. No clock of its own: callers pass the time. */
#ifndef ATOMDB_BACKOFF_H
#define ATOMDB_BACKOFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BACKOFF_FREE 5          /* failures that cost nothing */
#define BACKOFF_BASE_MS 100     /* the wait after the first costly one */
#define BACKOFF_MAX_MS 5000     /* the longest wait */
#define BACKOFF_FORGET_MS 60000 /* a count is dropped after this long */

/* The failures of one address. */
typedef struct backoff_slot {
    char ip[64];
    int count;       /* failures in a row */
    int64_t last_ms; /* the last one */
} backoff_slot_t;

/* A table of addresses (the caller's storage; the least recently failed
 * slot is reused when it is full). */
typedef struct backoff {
    backoff_slot_t *slots;
    size_t nslots;
} backoff_t;

/* Records a login from `ip` at `now_ms` that succeeded (`ok`: the count
 * is cleared) or failed. */
void backoff_note(backoff_t *b, const char *ip, bool ok, int64_t now_ms);

/* The wait the count of `ip` calls for at `now_ms` (0: none). */
int64_t backoff_delay_ms(const backoff_t *b, const char *ip, int64_t now_ms);

/* What is left at `now_ms` of that wait, counted from the last failure. */
int64_t backoff_left_ms(const backoff_t *b, const char *ip, int64_t now_ms);

#endif
