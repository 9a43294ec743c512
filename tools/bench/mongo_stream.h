/* mongo_stream: a blocking, buffered TCP stream for libmongoc (see
 * mongo_stream.c for why the bench offers it). */
#ifndef ATOMDB_BENCH_MONGO_STREAM_H
#define ATOMDB_BENCH_MONGO_STREAM_H

#include <mongoc/mongoc.h>

/* A mongoc_stream_initiator_t: connects to `host` with a blocking socket. */
mongoc_stream_t *mongo_stream_initiator(const mongoc_uri_t *uri, const mongoc_host_list_t *host,
                                        void *user_data, bson_error_t *error);

#endif
