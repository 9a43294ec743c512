"""The unified runner's change stream operations (unified_runner.py calls
these through its OPERATION_HOOKS): createChangeStream on a client,
database or collection, and iterateUntilDocumentOrError, iterateOnce and
close on the change stream entity it saves.

Streams open through pymongo 3.11's watch() when it can send every
argument; arguments it lacks (showExpandedEvents, fullDocumentBeforeChange,
comment) open a plain aggregate + getMore stream instead (RawStream), so
the server's behaviour is still checked. Neither resumes: the spec tests
that need a resume need fail points and are skipped."""

from bson.son import SON

# createChangeStream arguments pymongo's watch() takes, by their spec name.
_WATCH_ARGS = {"pipeline": "pipeline", "fullDocument": "full_document",
               "resumeAfter": "resume_after", "startAfter": "start_after",
               "startAtOperationTime": "start_at_operation_time", "batchSize": "batch_size",
               "maxAwaitTimeMS": "max_await_time_ms"}
# ... and those only a raw aggregate can send ($changeStream options or
# aggregate options).
_RAW_STAGE_ARGS = {"showExpandedEvents", "fullDocumentBeforeChange"}
_RAW_COMMAND_ARGS = {"comment"}

NOT_MINE = object()


class RawStream:
    """A change stream as a plain aggregate cursor: getMore until an event."""

    def __init__(self, target, args):
        import pymongo

        if isinstance(target, pymongo.MongoClient):
            self.db, coll, spec = target.admin, 1, {"allChangesForCluster": True}
        elif isinstance(target, pymongo.database.Database):
            self.db, coll, spec = target, 1, {}
        else:
            self.db, coll, spec = target.database, target.name, {}
        for k in ("fullDocument", "resumeAfter", "startAfter", "startAtOperationTime") + \
                tuple(_RAW_STAGE_ARGS):
            if k in args:
                spec[k] = args[k]
        cmd = SON([("aggregate", coll),
                   ("pipeline", [{"$changeStream": spec}] + list(args.get("pipeline", []))),
                   ("cursor", {"batchSize": args["batchSize"]} if "batchSize" in args else {})])
        for k in _RAW_COMMAND_ARGS:
            if k in args:
                cmd[k] = args[k]
        reply = self.db.command(cmd)
        self.cursor_id = reply["cursor"]["id"]
        self.coll = reply["cursor"]["ns"].split(".", 1)[1]
        self.buffer = list(reply["cursor"]["firstBatch"])

    def try_next(self):
        if not self.buffer and self.cursor_id:
            reply = self.db.command(SON([("getMore", self.cursor_id),
                                         ("collection", self.coll), ("maxTimeMS", 1000)]))
            self.cursor_id = reply["cursor"]["id"]
            self.buffer = list(reply["cursor"]["nextBatch"])
        return self.buffer.pop(0) if self.buffer else None

    def next(self):
        while True:
            doc = self.try_next()
            if doc is not None:
                return doc
            if not self.cursor_id:
                raise StopIteration

    def close(self):
        if self.cursor_id:
            self.db.command("killCursors", self.coll, cursors=[self.cursor_id])
            self.cursor_id = 0


def reason(op, entities):
    """Why the runner cannot run `op` (a string), None when it can, or
    NOT_MINE for an operation that is not a change stream's."""
    name, args = op["name"], op.get("arguments", {})
    if name == "createChangeStream":
        unknown = set(args) - set(_WATCH_ARGS) - _RAW_STAGE_ARGS - _RAW_COMMAND_ARGS
        if unknown:
            return "createChangeStream arguments %s not implemented" % sorted(unknown)
        return None
    if name == "rename" and entities.get(op["object"], {}).get("collection"):
        unknown = set(args) - {"to", "dropTarget"}
        return "rename arguments %s not implemented" % sorted(unknown) if unknown else None
    if name in ("iterateUntilDocumentOrError", "iterateOnce", "close") and \
            entities.get(op["object"], {}).get("changeStream"):
        return None
    return NOT_MINE


def run(target, name, args):
    """Runs a change stream operation; NOT_MINE when `name` is not one."""
    from pymongo.change_stream import ChangeStream
    from pymongo.collection import Collection

    if name == "createChangeStream":
        if set(args) & (_RAW_STAGE_ARGS | _RAW_COMMAND_ARGS):
            return RawStream(target, args)
        kw = {_WATCH_ARGS[k]: v for k, v in args.items()}
        return target.watch(**kw)
    if name == "rename" and isinstance(target, Collection):
        target.rename(args["to"], dropTarget=args.get("dropTarget", False))
        return None
    if isinstance(target, (ChangeStream, RawStream)):
        if name == "iterateUntilDocumentOrError":
            return target.next()
        if name == "iterateOnce":
            return target.try_next()
        if name == "close":
            target.close()
            return None
    return NOT_MINE


def test_reason(spec, test):
    """Why a whole test cannot run (the runner's SKIP_HOOKS): a test only for
    a standalone server expects the errors of one (40573: change streams
    need a replica set), and atomdb is a single-node replica set."""
    for reqs in (spec.get("runOnRequirements"), test.get("runOnRequirements")):
        if reqs and all(r.get("topologies") == ["single"] for r in reqs):
            return "needs a standalone server (atomdb is a single-node replica set)"
    return None
