/* backoff: per-address waits after failed logins (backoff.h), one table
 * logic for saslStart and the metrics port. */
#include "auth/backoff.h"

#include <stdio.h>
#include <string.h>

/* The slot of `ip` (or, when `claim`, the least recently failed one, reset
 * for it), or NULL. */
static backoff_slot_t *backoff_slot(const backoff_t *b, const char *ip, bool claim)
{
    backoff_slot_t *oldest = &b->slots[0];
    for (size_t i = 0; i < b->nslots; i++) {
        if (strcmp(b->slots[i].ip, ip) == 0)
            return &b->slots[i];
        if (b->slots[i].last_ms < oldest->last_ms)
            oldest = &b->slots[i];
    }
    if (!claim)
        return NULL;
    memset(oldest, 0, sizeof *oldest);
    snprintf(oldest->ip, sizeof oldest->ip, "%s", ip);
    return oldest;
}

void backoff_note(backoff_t *b, const char *ip, bool ok, int64_t now_ms)
{
    backoff_slot_t *f = backoff_slot(b, ip, !ok);
    if (!f)
        return;
    if (ok || now_ms - f->last_ms > BACKOFF_FORGET_MS)
        f->count = 0;
    if (!ok)
        f->count++;
    f->last_ms = now_ms;
}

int64_t backoff_delay_ms(const backoff_t *b, const char *ip, int64_t now_ms)
{
    const backoff_slot_t *f = backoff_slot(b, ip, false);
    if (!f || f->count < BACKOFF_FREE || now_ms - f->last_ms > BACKOFF_FORGET_MS)
        return 0;
    int shift = f->count - BACKOFF_FREE;
    int64_t ms = shift > 6 ? BACKOFF_MAX_MS : (int64_t)BACKOFF_BASE_MS << shift;
    return ms > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : ms;
}

int64_t backoff_left_ms(const backoff_t *b, const char *ip, int64_t now_ms)
{
    int64_t delay = backoff_delay_ms(b, ip, now_ms);
    if (delay == 0)
        return 0;
    int64_t left = backoff_slot(b, ip, false)->last_ms + delay - now_ms;
    return left > 0 ? left : 0;
}
