/* dberr: MongoDB-style error values and the code → codeName table. */
#include "util/dberr.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
    int code;
    const char *name;
} dberr_names[] = {
    {0, "OK"},
    {1, "InternalError"},
    {2, "BadValue"},
    {4, "NoSuchKey"},
    {8, "UnknownError"},
    {9, "FailedToParse"},
    {11, "UserNotFound"},
    {12, "IncompatibleCollationVersion"},
    {13, "Unauthorized"},
    {18, "AuthenticationFailed"},
    {31, "RoleNotFound"},
    {51, "RoleDataInconsistent"},
    {334, "MechanismUnavailable"},
    {14, "TypeMismatch"},
    {15, "Overflow"},
    {17, "ProtocolError"},
    {20, "IllegalOperation"},
    {22, "InvalidBSON"},
    {26, "NamespaceNotFound"},
    {27, "IndexNotFound"},
    {16, "InvalidLength"},
    {54, "NotSingleValueField"},
    {23, "AlreadyInitialized"},
    {74, "NodeNotFound"},
    {79, "UnknownReplWriteConcern"},
    {93, "InvalidReplicaSetConfig"},
    {103, "NewReplicaSetConfigurationIncompatible"},
    {100, "UnsatisfiableWriteConcern"},
    {171, "CannotIndexParallelArrays"},
    {186, "ClientMetadataCannotBeMutated"},
    {28, "PathNotViable"},
    {40, "ConflictingUpdateOperators"},
    {43, "CursorNotFound"},
    {48, "NamespaceExists"},
    {50, "MaxTimeMSExpired"},
    {11601, "Interrupted"},
    {10334, "BSONObjectTooLarge"},
    {279, "ClientDisconnect"},
    {175, "QueryPlanKilled"},
    {136, "CappedPositionLost"},
    {24, "LockTimeout"},
    {146, "ExceededMemoryLimit"},
    {232, "MaxSubPipelineDepthExceeded"},
    {291, "NoQueryExecutionPlans"},
    {292, "QueryExceededMemoryLimitNoDiskUseAllowed"},
    {52, "DollarPrefixedFieldName"},
    {53, "InvalidIdField"},
    {56, "EmptyFieldName"},
    {57, "DottedFieldName"},
    {59, "CommandNotFound"},
    {66, "ImmutableField"},
    {67, "CannotCreateIndex"},
    {68, "IndexAlreadyExists"},
    {72, "InvalidOptions"},
    {73, "InvalidNamespace"},
    {85, "IndexOptionsConflict"},
    {86, "IndexKeySpecsConflict"},
    {91, "ShutdownInProgress"},
    {96, "OperationFailed"},
    {112, "WriteConflict"},
    {115, "CommandNotSupported"},
    {119, "AmbiguousIndexKeyPattern"},
    {125, "CommandFailed"},
    {136, "CappedPositionLost"},
    {168, "InvalidPipelineOperator"},
    {197, "InvalidIndexSpecificationOption"},
    {206, "NoSuchSession"},
    {225, "TransactionTooOld"},
    {238, "NotImplemented"},
    {241, "ConversionFailure"},
    {251, "NoSuchTransaction"},
    {121, "DocumentValidationFailure"},
    {166, "CommandNotSupportedOnView"},
    {167, "OptionNotSupportedOnView"},
    {117, "ConflictingOperationInProgress"},
    {256, "TransactionCommitted"},
    {290, "TransactionExceededLifetimeLimitSeconds"},
    {263, "OperationNotSupportedInTransaction"},
    {42, "LogWriteFailed"},
    {98, "DBPathInUse"},
    {64, "WriteConcernTimeout"},
    {11000, "DuplicateKey"},
    {47, "NoMatchingDocument"},
    {237, "CursorKilled"},
    {260, "InvalidResumeToken"},
    {280, "ChangeStreamFatalError"},
    {286, "ChangeStreamHistoryLost"},
    {900000001, "StaleFencingToken"},
};

bool dberr_set(dberr_t *err, int code, const char *fmt, ...)
{
    if (!err)
        return false;
    err->code = code;
    err->extra_len = 0;
    err->labels = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return false;
}

void dberr_clear(dberr_t *err)
{
    if (!err)
        return;
    err->code = 0;
    err->msg[0] = '\0';
    err->extra_len = 0;
    err->labels = 0;
}

void dberr_set_extra(dberr_t *err, const void *bson_data, unsigned len)
{
    if (!err)
        return;
    if (len > sizeof err->extra) {
        err->extra_len = 0;
        return;
    }
    memcpy(err->extra, bson_data, len);
    err->extra_len = len;
}

const char *dberr_codename(int code)
{
    static __thread char buf[32];
    for (size_t i = 0; i < sizeof dberr_names / sizeof dberr_names[0]; i++)
        if (dberr_names[i].code == code)
            return dberr_names[i].name;
    snprintf(buf, sizeof buf, "Location%d", code);
    return buf;
}
