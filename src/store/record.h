/* record: a stored document — immutable BSON bytes with a reference count.
 * An update builds a new record and swaps it in; cursors and result lists
 * holding the old one keep it alive until they let go. */
#ifndef ATOMDB_RECORD_H
#define ATOMDB_RECORD_H

#include <bson/bson.h>
#include <stdint.h>
#include <string.h>

/* One document: 12 bytes of header before the BSON, which carries its own
 * length. With malloc's 8-byte chunk header that is 20 bytes, rounded up
 * to malloc's 16-byte steps. Versions a transaction snapshot still needs
 * are kept by mvcc's change window, not by the record. */
typedef struct record {
    uint32_t refs;         /* owners: the collection, cursors, result lists, mvcc */
    uint32_t seq_lo;       /* store sequence number of the change that made it, */
    uint32_t seq_hi;       /* in two halves so the header packs to 12 bytes */
    uint8_t data[];        /* the document */
} record_t;

/* The BSON size of `r` (the document's own length prefix). */
static inline uint32_t record_len(const record_t *r)
{
    uint32_t len;
    memcpy(&len, r->data, sizeof len);
    return BSON_UINT32_FROM_LE(len);
}

/* The store sequence number of the change that made `r` (store/mvcc.h). */
static inline uint64_t record_seq(const record_t *r)
{
    return (uint64_t)r->seq_hi << 32 | r->seq_lo;
}

static inline void record_set_seq(record_t *r, uint64_t seq)
{
    r->seq_lo = (uint32_t)seq;
    r->seq_hi = (uint32_t)(seq >> 32);
}

/* A new record holding a copy of `doc`, with one reference. */
record_t *record_new(const bson_t *doc);
/* Adds a reference; returns `r`. */
record_t *record_ref(record_t *r);
/* Drops a reference (accepts NULL); frees at zero. */
void record_unref(record_t *r);

/* A read-only bson_t view of `r`, valid while a reference is held. */
static inline void record_view(const record_t *r, bson_t *out)
{
    bson_init_static(out, r->data, record_len(r));
}

/* A growable array of record references. */
typedef struct recvec {
    record_t **items; /* each holds one reference */
    size_t len;
    size_t cap;
} recvec_t;

void recvec_init(recvec_t *v);
/* Drops every reference and frees the array. */
void recvec_destroy(recvec_t *v);

/* Appends `r` taking a new reference. */
void recvec_push_ref(recvec_t *v, record_t *r);

/* Drops the first `skip` records after index `first` and keeps at most
 * `limit` (0: all) of the rest, unreferencing what it drops. */
void recvec_skip_limit(recvec_t *v, size_t first, int64_t skip, int64_t limit);

#endif
