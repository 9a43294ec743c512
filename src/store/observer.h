/* observer: the one hook through which every change the store makes is
 * reported — document inserts, updates and deletes, and catalog changes —
 * so the journal can log exactly what happened, whoever caused it (a
 * command, the TTL monitor). Loop thread only. */
#ifndef ATOMDB_OBSERVER_H
#define ATOMDB_OBSERVER_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

/* Callbacks; any may be NULL. Documents are borrowed for the call; `uuid`
 * is the collection's (16 bytes). */
typedef struct store_observer {
    void (*insert)(const char *db, const char *coll, const uint8_t *uuid, const bson_t *doc,
                   void *ctx);
    void (*update)(const char *db, const char *coll, const uint8_t *uuid, const bson_t *old_doc,
                   const bson_t *new_doc, void *ctx);
    void (*remove)(const char *db, const char *coll, const uint8_t *uuid, const bson_t *old_doc,
                   void *ctx);
    /* catalog changes, as a document: {create: coll, options: {...}},
     * {drop: coll}, {dropDatabase: 1}, {createIndex: coll, spec: {...}},
     * {dropIndex: coll, name: "..."} */
    void (*ddl)(const char *db, const bson_t *op, void *ctx);
    void *ctx;
} store_observer_t;

/* Installs `obs` (copied), or removes the observer when NULL. */
void store_observer_set(const store_observer_t *obs);

/* The installed observer, or NULL (for the store's own use). */
const store_observer_t *store_observer_get(void);

/* While set, updates reported are whole-document replacements (a
 * replacement-style update or findAndModify), not operator or pipeline
 * updates: change streams say "replace" rather than "update". The writer
 * sets it around the change and clears it after. */
void store_observer_set_replacing(bool on);
bool store_observer_replacing(void);

#endif
