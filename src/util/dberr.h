/* dberr: the error every fallible function fills, carrying MongoDB's numeric
 * code, its codeName and a message (the way libbson fills bson_error_t).
 * Command handlers turn one into {ok: 0, errmsg, code, codeName} in one place. */
#ifndef ATOMDB_DBERR_H
#define ATOMDB_DBERR_H

#include <stdbool.h>

/* MongoDB error codes used by atomdb (src/mongo/base/error_codes.yml). */
enum {
    DBERR_OK = 0,
    DBERR_INTERNAL_ERROR = 1,
    DBERR_BAD_VALUE = 2,
    DBERR_NO_SUCH_KEY = 4,
    DBERR_FAILED_TO_PARSE = 9,
    DBERR_UNAUTHORIZED = 13,
    DBERR_TYPE_MISMATCH = 14,
    DBERR_OVERFLOW = 15,
    DBERR_PROTOCOL_ERROR = 17,
    DBERR_ILLEGAL_OPERATION = 20,
    DBERR_INVALID_BSON = 22,
    DBERR_NAMESPACE_NOT_FOUND = 26,
    DBERR_INDEX_NOT_FOUND = 27,
    DBERR_PATH_NOT_VIABLE = 28,
    DBERR_CONFLICTING_UPDATE_OPERATORS = 40,
    DBERR_CURSOR_NOT_FOUND = 43,
    DBERR_NAMESPACE_EXISTS = 48,
    DBERR_MAX_TIME_MS_EXPIRED = 50,
    DBERR_DOLLAR_PREFIXED_FIELD_NAME = 52,
    DBERR_INVALID_ID_FIELD = 53,
    DBERR_EMPTY_FIELD_NAME = 56,
    DBERR_DOTTED_FIELD_NAME = 57,
    DBERR_COMMAND_NOT_FOUND = 59,
    DBERR_IMMUTABLE_FIELD = 66,
    DBERR_CANNOT_CREATE_INDEX = 67,
    DBERR_INDEX_ALREADY_EXISTS = 68,
    DBERR_INVALID_OPTIONS = 72,
    DBERR_INVALID_NAMESPACE = 73,
    DBERR_INDEX_OPTIONS_CONFLICT = 85,
    DBERR_INDEX_KEY_SPECS_CONFLICT = 86,
    DBERR_SHUTDOWN_IN_PROGRESS = 91,
    DBERR_OPERATION_FAILED = 96,
    DBERR_WRITE_CONFLICT = 112,
    DBERR_COMMAND_NOT_SUPPORTED = 115,
    DBERR_COMMAND_FAILED = 125,
    DBERR_INVALID_PIPELINE_OPERATOR = 168,
    DBERR_NO_SUCH_SESSION = 206,
    DBERR_TRANSACTION_TOO_OLD = 225,
    DBERR_NOT_IMPLEMENTED = 238,
    DBERR_CONVERSION_FAILURE = 241,
    DBERR_NO_SUCH_TRANSACTION = 251,
    DBERR_CONFLICTING_OPERATION_IN_PROGRESS = 117,
    DBERR_TRANSACTION_COMMITTED = 256,
    DBERR_TRANSACTION_EXCEEDED_LIFETIME = 290, /* TransactionExceededLifetimeLimitSeconds */
    DBERR_OPERATION_NOT_SUPPORTED_IN_TRANSACTION = 263,
    DBERR_INVALID_INDEX_SPECIFICATION_OPTION = 197,
    DBERR_LOCATION_16554 = 16554, /* arithmetic on a non-number in $add etc. */
    DBERR_DUPLICATE_KEY = 11000,
    DBERR_INTERRUPTED = 11601,
    DBERR_BSON_OBJECT_TOO_LARGE = 10334,
    DBERR_EXCEEDED_MEMORY_LIMIT = 146,
    DBERR_QUERY_EXCEEDED_MEMORY_NO_DISK = 292,
    DBERR_UNKNOWN_ERROR = 8,
    /* atomdb's own codes, outside mongod's range (its named and location
     * codes stop at eight digits) */
    DBERR_STALE_FENCING_TOKEN = 900000001, /* lease locks: a fence/renew/release
                                            * with a token that is no longer current */
};

/* An error: code 0 means "no error". */
/* errorLabels drivers act on. */
enum {
    DBERR_LABEL_TRANSIENT_TXN = 1,  /* TransientTransactionError: retry the whole transaction */
    DBERR_LABEL_UNKNOWN_COMMIT = 2, /* UnknownTransactionCommitResult: retry the commit */
    DBERR_LABEL_RETRYABLE_WRITE = 4, /* RetryableWriteError */
    DBERR_LABEL_NON_RESUMABLE_CS = 8 /* NonResumableChangeStreamError: a stream must not resume */
};

typedef struct dberr {
    int code;              /* MongoDB numeric code */
    unsigned labels;       /* DBERR_LABEL_* bits */
    char msg[512];         /* human-readable errmsg */
    unsigned extra_len;    /* bytes of `extra` in use, 0 when none */
    unsigned char extra[4096]; /* a BSON document of extra reply fields
                            * (keyPattern/keyValue for 11000), or empty */
} dberr_t;

/* Sets `err` (may be NULL) to `code` with a printf-style message and returns
 * false, so a failing function can `return dberr_set(err, ...)`. */
bool dberr_set(dberr_t *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Attaches the fields of `doc` to `err` as extra reply fields (dropped
 * when they do not fit). */
void dberr_set_extra(dberr_t *err, const void *bson_data, unsigned len);

/* Clears `err` to "no error". */
void dberr_clear(dberr_t *err);

/* The codeName mongod uses for `code` ("BadValue"); "Location<code>" for codes
 * outside the named table, as mongod does. Returned pointer is static, or
 * points into a thread-local buffer valid until the next call. */
const char *dberr_codename(int code);

#endif
