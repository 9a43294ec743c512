"""The mongo-shell statements of the seed articles, run in mongosh as written.

Seed 000's `$inc` counter and seat booking, seed 003's upsert + `$inc` play
counter and findAndModify, and seed 002's three statements — which carry the
article's bug `{'$set': {'$inc': ...}}` and must fail with a mongod-like
error (DollarPrefixedFieldName, 52) while writing nothing.
"""

import json

import pytest

from test_mongosh import MONGOSH, run_eval, sh_env  # noqa: F401  (fixture)

SCRIPT = r"""
const out = {};
db.courses.drop(); db.seats.drop(); db.helpdesk.drop(); db.product.drop(); db.vv.drop();
// seed 000: favCount with $inc, seats with a conditional $set
db.courses.insertOne({_id: 1, favCount: 0});
for (let i = 0; i < 5; i++) db.courses.update({_id: 1}, {$inc: {favCount: 1}});
out.favCount = db.courses.findOne({_id: 1}).favCount;
db.seats.insertOne({_id: 'hall1', seats: {'101': 'N', '102': 'N'}});
out.firstBooking = db.seats.updateOne({_id: 'hall1', 'seats.101': 'N'}, {$set: {'seats.101': 'Y:user01'}}).modifiedCount;
out.secondBooking = db.seats.updateOne({_id: 'hall1', 'seats.101': 'N'}, {$set: {'seats.101': 'Y:user02'}}).modifiedCount;
out.seat101 = db.seats.findOne({_id: 'hall1'}).seats['101'];
// seed 002, exactly as written in the article (with its bug)
const helpdeskId = 1, maxClientLimit = 3, productId = 7, m = 1, maxCount = 10;
db.helpdesk.insertOne({_id: helpdeskId, clientCount: 0});
db.product.insertOne({_id: productId, avaliableCount: 5, saledCount: 0});
out.seed002 = [];
for (const stmt of [
  () => db.getCollection('helpdesk').update( { '_id': helpdeskId, 'clientCount': {'$lt': maxClientLimit} }, { '$set': {'$inc': {'clientCount': 1}} } ),
  () => db.getCollection('product').update( { '_id': productId, 'avaliableCount': {'$gte': m} }, { '$set': {'$inc': {'avaliableCount':-m}} } ),
  () => db.getCollection('product').update( { '_id': productId, 'saledCount': {'$lte': maxCount-m} }, { '$set': {'$inc': {'saledCount':m}} } ),
]) {
  try { stmt(); out.seed002.push({ok: true}); }
  catch (e) { out.seed002.push({code: e.code, codeName: e.codeName, msg: String(e.message)}); }
}
out.helpdeskAfter = db.helpdesk.findOne({_id: helpdeskId});
out.productAfter = db.product.findOne({_id: productId});
// seed 003: upsert + $inc, then findAndModify returning the new count (the
// legacy shell's third argument `true` is {upsert: true} in mongosh)
db.vv.update({_id: 'video1'}, {$inc: {count: 1}}, {upsert: true});
db.vv.update({_id: 'video1'}, {$inc: {count: 1}}, {upsert: true});
out.vvCount = db.vv.findOne({_id: 'video1'}).count;
out.famCount = db.vv.findAndModify({query: {_id: 'video2'}, update: {$inc: {count: 1}}, new: true, upsert: true}).count;
out.famCount2 = db.vv.findAndModify({query: {_id: 'video2'}, update: {$inc: {count: 1}}, new: true, upsert: true}).count;
print("RESULT " + JSON.stringify(out));
"""


def test_the_seed_articles_shell_statements_run_in_mongosh_as_written(atomdb, sh_env):
    proc = run_eval(atomdb, "directConnection=true", sh_env, SCRIPT)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, "mongosh ran the seed script: %s %s" % (proc.stdout, proc.stderr)
    out = json.loads(lines[-1][len("RESULT "):])
    assert out["favCount"] == 5, "seed 000: five $inc updates give favCount 5, got %r" % out["favCount"]
    assert out["firstBooking"] == 1 and out["secondBooking"] == 0, \
        "seed 000: the first booking of seat 101 wins, the second matches nothing: %r" % out
    assert out["seat101"] == "Y:user01", "seed 000: seat 101 belongs to user01, got %r" % out["seat101"]
    assert len(out["seed002"]) == 3, "seed 002: three statements ran"
    for i, r in enumerate(out["seed002"]):
        # mongosh's write error carries the code; the codeName is checked
        # through pymongo in test_crud_pymongo.py
        assert r.get("code") == 52, \
            "seed 002 statement %d ({$set: {$inc: ...}}) fails with DollarPrefixedFieldName (52): %r" % (i, r)
        assert "$inc" in r["msg"], "seed 002 statement %d: the error names $inc: %r" % (i, r["msg"])
    assert out["helpdeskAfter"] == {"_id": 1, "clientCount": 0}, \
        "seed 002: nothing was written to helpdesk: %r" % out["helpdeskAfter"]
    assert out["productAfter"] == {"_id": 7, "avaliableCount": 5, "saledCount": 0}, \
        "seed 002: nothing was written to product: %r" % out["productAfter"]
    assert out["vvCount"] == 2, "seed 003: two upserts with $inc count 2, got %r" % out["vvCount"]
    assert (out["famCount"], out["famCount2"]) == (1, 2), \
        "seed 003: findAndModify with upsert and new returns 1 then 2, got %r" % out
