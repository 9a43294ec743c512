// The Node.js MongoDB driver 7.x against a real atomdb: the query and update
// languages, CRUD commands, findAndModify, count/distinct/aggregate,
// bulkWrite, indexes (unique, sparse, partial, TTL, explain), namespace
// validation and w:0 writes (issue 3). Expectations are mongod 7.0's.
// Run: node --test tests/drivers/node   (ATOMDB_BIN picks the binary)

import { test, describe, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import {
  rejection, startAtomdbWithClient, stopAtomdbWithClient, sleep, freePort, repo, atomdbBin,
} from './atomdb-server.mjs';
import {
  MongoClient, ObjectId, Long, Int32, Double, Decimal128, MinKey, MaxKey, Timestamp, BSONRegExp, Binary,
  MongoServerError, MongoBulkWriteError,
} from 'mongodb';



// --- server start/stop: the same helper as handshake.test.mjs -----------------





// --- helpers ------------------------------------------------------------------

let atomdb;
let client;
let db;
let seq = 0;

before(async () => ({ atomdb, client, db } = await startAtomdbWithClient('db')));
after(() => stopAtomdbWithClient(atomdb, client));

// A fresh, empty collection for one test.
async function fresh() {
  const c = db.collection(`node_crud_${++seq}`);
  await c.drop().catch(() => {});
  return c;
}

async function ids(c, filter, options = {}) {
  const docs = await c.find(filter, { projection: { _id: 1 }, ...options }).toArray();
  return docs.map((d) => d._id).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

function stages(plan) {
  const found = [];
  const walk = (p) => {
    if (Array.isArray(p)) p.forEach(walk);
    else if (p && typeof p === 'object') {
      if (typeof p.stage === 'string') found.push(p.stage);
      Object.values(p).forEach(walk);
    }
  };
  walk(plan);
  return found;
}

async function winningStages(c, filter, sort) {
  let cur = c.find(filter);
  if (sort) cur = cur.sort(sort);
  const ex = await cur.explain('queryPlanner');
  return stages(ex.queryPlanner.winningPlan);
}

// --- insert --------------------------------------------------------------------

describe('insert', () => {
  test('a generated ObjectId _id is placed first', async () => {
    const c = await fresh();
    const r = await c.insertOne({ a: 1, b: 2 });
    assert.ok(r.insertedId instanceof ObjectId, 'insertOne reports a generated ObjectId');
    const doc = await c.findOne({});
    assert.deepEqual(Object.keys(doc), ['_id', 'a', 'b'], 'the stored _id is the first field');
    assert.ok(doc._id.equals(r.insertedId), 'the stored _id is the reported one');
  });

  test('a duplicate _id fails with 11000, keyPattern, keyValue and mongod\'s message', async () => {
    const c = db.collection('c');
    await c.drop().catch(() => {});
    await c.insertOne({ _id: 1 });
    const e = await rejection(c.insertOne({ _id: 1, x: 2 }), 'duplicate insert');
    assert.ok(e instanceof MongoServerError, 'a server error');
    assert.equal(e.code, 11000, 'code 11000');
    assert.equal(e.errmsg, 'E11000 duplicate key error collection: db.c index: _id_ dup key: { _id: 1 }',
      "mongod's exact message");
    assert.deepEqual(e.keyPattern, { _id: 1 }, 'keyPattern {_id: 1}');
    assert.deepEqual(e.keyValue, { _id: 1 }, 'keyValue {_id: 1}');
    assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1 }, 'the original is untouched');
    await c.drop();
  });

  test('ordered insertMany stops at the first error; unordered continues', async () => {
    const c = await fresh();
    let e = await rejection(c.insertMany([{ _id: 1 }, { _id: 1 }, { _id: 2 }]), 'ordered insertMany');
    assert.ok(e instanceof MongoBulkWriteError, 'a bulk write error');
    assert.equal(e.insertedCount, 1, 'ordered: one inserted');
    assert.deepEqual(e.writeErrors.map((w) => [w.index, w.code]), [[1, 11000]], 'ordered: error at index 1');
    assert.deepEqual(await ids(c, {}), [1], 'ordered: nothing after the error');
    e = await rejection(c.insertMany([{ _id: 1 }, { _id: 3 }, { _id: 3 }, { _id: 4 }], { ordered: false }),
      'unordered insertMany');
    assert.equal(e.insertedCount, 2, 'unordered: both new ids inserted');
    assert.deepEqual(e.writeErrors.map((w) => [w.index, w.code]), [[0, 11000], [2, 11000]],
      'unordered: errors at 0 and 2');
    assert.deepEqual(await ids(c, {}), [1, 3, 4], 'unordered: every distinct document stored');
  });
});

// --- query operators ------------------------------------------------------------

describe('query operators', () => {
  let c;
  before(async () => {
    c = await fresh();
    await c.insertMany([
      { _id: 1, name: 'Ann', age: 30, tags: ['a', 'b'], addr: { city: 'Oslo', zip: 1 } },
      { _id: 2, name: 'bob', age: 25, tags: ['b', 'c'], addr: { city: 'Rome' } },
      { _id: 3, name: 'Cid', age: 35, tags: [], scores: [{ s: 5, k: 'x' }, { s: 9, k: 'y' }] },
      { _id: 4, name: 'dan', age: null, tags: ['a', 'b', 'c'], scores: [{ s: 1, k: 'y' }] },
      { _id: 5, name: 'Eve\nline2', addr: [{ city: 'Oslo' }, { city: 'Bern' }] },
    ]);
  });

  const cases = [
    [{ age: { $eq: 25 } }, [2], '$eq'],
    [{ age: { $ne: 30 } }, [2, 3, 4, 5], '$ne includes null and missing'],
    [{ age: { $gt: 25 } }, [1, 3], '$gt'],
    [{ age: { $gte: 25 } }, [1, 2, 3], '$gte'],
    [{ age: { $lt: 30 } }, [2], '$lt'],
    [{ age: { $lte: 30 } }, [1, 2], '$lte'],
    [{ age: { $in: [25, 35] } }, [2, 3], '$in'],
    [{ age: { $nin: [25, 35] } }, [1, 4, 5], '$nin includes missing'],
    [{ age: null }, [4, 5], 'null matches null and missing'],
    [{ $and: [{ age: { $gt: 20 } }, { age: { $lt: 32 } }] }, [1, 2], '$and'],
    [{ $or: [{ age: 25 }, { name: 'Cid' }] }, [2, 3], '$or'],
    [{ $nor: [{ age: 25 }, { age: null }] }, [1, 3], '$nor'],
    [{ age: { $not: { $gt: 26 } } }, [2, 4, 5], '$not with an operator'],
    [{ name: { $not: /^[a-z]/ } }, [1, 3, 5], '$not with a regex'],
    [{ scores: { $exists: true } }, [3, 4], '$exists true'],
    [{ age: { $exists: false } }, [5], '$exists false'],
    [{ age: { $type: 'null' } }, [4], '$type alias'],
    [{ age: { $type: 16 } }, [1, 2, 3], '$type number code'],
    [{ addr: { $type: 'array' } }, [5], '$type array'],
    [{ tags: 'a' }, [1, 4], 'equality matches an element'],
    [{ tags: { $all: ['a', 'b'] } }, [1, 4], '$all'],
    [{ tags: { $size: 3 } }, [4], '$size'],
    [{ scores: { $elemMatch: { s: { $gt: 4 }, k: 'y' } } }, [3], '$elemMatch'],
    [{ 'scores.s': { $gt: 6, $lt: 8 } }, [3], 'dotted array path, conditions on different elements'],
    [{ scores: { $elemMatch: { s: { $gt: 6, $lt: 8 } } } }, [], '$elemMatch needs one element'],
    [{ 'addr.city': 'Oslo' }, [1, 5], 'dotted path into document and array of documents'],
    [{ 'tags.1': 'c' }, [2], 'numeric path component'],
    [{ age: { $mod: [10, 5] } }, [2, 3], '$mod'],
    [{ name: { $regex: '^a', $options: 'i' } }, [1], '$regex i'],
    [{ name: { $regex: '^line2', $options: 'm' } }, [5], '$regex m'],
    [{ name: { $regex: 'Eve.line', $options: 's' } }, [5], '$regex s'],
    [{ name: { $regex: 'Eve.line' } }, [], '$regex without s'],
    [{ name: { $regex: ' b o b # c', $options: 'x' } }, [2], '$regex x'],
    [{ name: new BSONRegExp('^c', 'i') }, [3], 'BSON regex value'],
    [{ name: { $in: [/^A/, 'bob'] } }, [1, 2], '$in with a regex'],
    [{ $expr: { $gt: ['$age', 28] } }, [1, 3], '$expr comparison of a field'],
    [{ $expr: { $eq: [{ $add: ['$age', 5] }, 30] } }, [2], '$expr $add'],
    [{ $expr: { $cond: { if: { $eq: ['$name', 'Ann'] }, then: true, else: false } } }, [1], '$expr $cond'],
  ];
  for (const [filter, want, what] of cases) {
    test(`${what}: ${JSON.stringify(filter)}`, async () => {
      assert.deepEqual(await ids(c, filter), want, what);
    });
  }

  test('$expr with $$NOW compares dates to the current time', async () => {
    const d = await fresh();
    await d.insertMany([{ _id: 1, when: new Date(Date.now() - 60000) }, { _id: 2, when: new Date(Date.now() + 3600e3) }]);
    assert.deepEqual(await ids(d, { $expr: { $lt: ['$when', '$$NOW'] } }), [1], 'only the past date is before $$NOW');
  });

  test('numbers compare by value across int32/int64/double/decimal128', async () => {
    const d = await fresh();
    await d.insertMany([
      { _id: 1, n: new Int32(5) }, { _id: 2, n: Long.fromNumber(5) }, { _id: 3, n: new Double(5) },
      { _id: 4, n: Decimal128.fromString('5.0') }, { _id: 5, n: new Double(5.5) }, { _id: 6, n: '5' },
    ]);
    assert.deepEqual(await ids(d, { n: 5 }), [1, 2, 3, 4], 'equality to 5 matches every numeric 5');
    assert.deepEqual(await ids(d, { n: Decimal128.fromString('5') }), [1, 2, 3, 4], 'decimal 5 matches all');
    assert.deepEqual(await ids(d, { n: Long.fromNumber(5) }), [1, 2, 3, 4], 'int64 5 matches all');
    assert.deepEqual(await ids(d, { n: { $gt: Decimal128.fromString('5.25') } }), [5], '$gt by a decimal');
    assert.deepEqual(await ids(d, { n: { $type: 'string' } }), [6], 'the string is not a number');
  });

  test('query errors: bad regex 51091, $in non-array 2, unknown operator 2', async () => {
    let e = await rejection(c.find({ name: { $regex: '(' } }).toArray(), 'invalid regex');
    assert.equal(e.code, 51091, 'invalid regex: 51091');
    e = await rejection(c.find({ age: { $in: 5 } }).toArray(), '$in non-array');
    assert.equal(e.code, 2, '$in needs an array: BadValue (2)');
    e = await rejection(c.find({ age: { $foo: 5 } }).toArray(), 'unknown operator');
    assert.equal(e.code, 2, 'unknown operator: BadValue (2)');
  });
});

// --- projection, sort, cursors ----------------------------------------------------

describe('find', () => {
  test('projection: inclusion, exclusion, $slice, $elemMatch, positional $', async () => {
    const c = await fresh();
    await c.insertOne({ _id: 1, a: 1, b: { c: 2, d: 3 }, arr: [1, 2, 3, 4, 5],
      objs: [{ k: 1, v: 'a' }, { k: 2, v: 'b' }, { k: 2, v: 'c' }] });
    assert.deepEqual(await c.findOne({}, { projection: { a: 1 } }), { _id: 1, a: 1 }, 'inclusion');
    assert.deepEqual(await c.findOne({}, { projection: { 'b.c': 1, _id: 0 } }), { b: { c: 2 } }, 'dotted inclusion');
    assert.deepEqual(await c.findOne({}, { projection: { arr: 0, objs: 0, 'b.d': 0 } }), { _id: 1, a: 1, b: { c: 2 } },
      'exclusion');
    assert.deepEqual((await c.findOne({}, { projection: { arr: { $slice: [1, 2] } } })).arr, [2, 3], '$slice [skip, n]');
    assert.deepEqual((await c.findOne({}, { projection: { arr: { $slice: -1 } } })).arr, [5], '$slice -1');
    assert.deepEqual(await c.findOne({}, { projection: { objs: { $elemMatch: { k: 2 } } } }),
      { _id: 1, objs: [{ k: 2, v: 'b' }] }, '$elemMatch projection');
    assert.deepEqual(await c.findOne({ 'objs.v': 'c' }, { projection: { 'objs.$': 1 } }),
      { _id: 1, objs: [{ k: 2, v: 'c' }] }, 'positional $ projection');
  });

  test('sort follows MongoDB\'s cross-type order over several keys, with skip and limit', async () => {
    const c = await fresh();
    const values = [new MinKey(), null, 1, 'a', { x: 1 }, new Binary(Buffer.from([1])),
      new ObjectId('000000000000000000000001'), false, new Date(0), new Timestamp({ t: 1, i: 1 }),
      new BSONRegExp('a'), new MaxKey()];
    await c.insertMany(values.map((v, i) => ({ _id: i, v })).reverse());
    const asc = (await c.find({}).sort({ v: 1 }).toArray()).map((d) => d._id);
    assert.deepEqual(asc, values.map((_, i) => i), 'ascending cross-type order');
    const desc = (await c.find({}).sort({ v: -1 }).toArray()).map((d) => d._id);
    assert.deepEqual(desc, values.map((_, i) => i).reverse(), 'descending cross-type order');
    const m = await fresh();
    await m.insertMany([{ _id: 1, a: 2, b: 'x' }, { _id: 2, a: Long.fromNumber(1), b: 'z' },
      { _id: 3, a: 1.5, b: 'y' }, { _id: 4, a: Decimal128.fromString('2'), b: 'y' }, { _id: 5, a: 1, b: 'a' }]);
    const two = (await m.find({}).sort({ a: 1, b: -1 }).toArray()).map((d) => d._id);
    assert.deepEqual(two, [2, 5, 3, 4, 1], 'sort by a asc (numeric by value) then b desc');
    const page = (await m.find({}).sort({ a: -1, b: 1 }).skip(1).limit(2).toArray()).map((d) => d._id);
    assert.deepEqual(page, [4, 3], 'skip and limit after sort');
  });

  test('batchSize, getMore, singleBatch and killCursors', async () => {
    const c = await fresh();
    await c.insertMany(Array.from({ length: 7 }, (_, i) => ({ _id: i })));
    const r = await db.command({ find: c.collectionName, sort: { _id: 1 }, batchSize: 3 });
    assert.deepEqual(r.cursor.firstBatch.map((d) => d._id), [0, 1, 2], 'firstBatch is batchSize long');
    assert.notEqual(Number(r.cursor.id), 0, 'the cursor stays open');
    const g = await db.command({ getMore: r.cursor.id, collection: c.collectionName, batchSize: 10 });
    assert.deepEqual(g.cursor.nextBatch.map((d) => d._id), [3, 4, 5, 6], 'getMore returns the rest');
    assert.equal(Number(g.cursor.id), 0, 'the exhausted cursor is closed');
    const s = await db.command({ find: c.collectionName, batchSize: 2, singleBatch: true });
    assert.equal(s.cursor.firstBatch.length, 2, 'singleBatch returns one batch');
    assert.equal(Number(s.cursor.id), 0, 'singleBatch leaves no cursor');
    const k = await db.command({ find: c.collectionName, batchSize: 2 });
    const kr = await db.command({ killCursors: c.collectionName, cursors: [k.cursor.id] });
    assert.deepEqual(kr.cursorsKilled.map(Number), [Number(k.cursor.id)], 'killCursors reports it killed');
    const e = await rejection(db.command({ getMore: k.cursor.id, collection: c.collectionName }), 'getMore after kill');
    assert.equal(e.code, 43, 'getMore on a killed cursor: CursorNotFound (43)');
    const all = await c.find({}).batchSize(2).toArray();
    assert.equal(all.length, 7, 'the driver iterates across getMores');
  });
});

// --- update ---------------------------------------------------------------------

describe('update', () => {
  test('every update operator', async () => {
    const c = await fresh();
    await c.insertOne({ _id: 1, s: 'x', u: 1, i: 5, m: 3, lo: 5, hi: 5, old: 'r', arr: [5, 1], set: [1],
      pop: [1, 2, 3], pl: [1, 5, 9, 2], pa: [1, 2, 3, 1], pos: [1, 2] });
    const r = await c.updateOne({ _id: 1 }, {
      $set: { s: 'y', 'n.e': 1 }, $unset: { u: '' }, $inc: { i: 2 }, $mul: { m: 4 }, $min: { lo: 2 },
      $max: { hi: 9 }, $rename: { old: 'new' }, $currentDate: { cd: true, ts: { $type: 'timestamp' } },
      $push: { arr: { $each: [4, 2, 3], $sort: 1, $slice: 3 }, pos: { $each: [9], $position: 1 } },
      $addToSet: { set: { $each: [1, 2] } }, $pop: { pop: 1 }, $pull: { pl: { $gte: 5 } }, $pullAll: { pa: [1, 3] },
    });
    assert.equal(r.matchedCount, 1, 'matched 1');
    assert.equal(r.modifiedCount, 1, 'modified 1');
    const d = await c.findOne({ _id: 1 });
    assert.equal(d.s, 'y', '$set');
    assert.deepEqual(d.n, { e: 1 }, '$set creates an embedded path');
    assert.ok(!('u' in d), '$unset');
    assert.equal(d.i, 7, '$inc');
    assert.equal(d.m, 12, '$mul');
    assert.equal(d.lo, 2, '$min');
    assert.equal(d.hi, 9, '$max');
    assert.ok(!('old' in d) && d.new === 'r', '$rename');
    assert.ok(d.cd instanceof Date, '$currentDate date');
    assert.ok(d.ts instanceof Timestamp, '$currentDate timestamp');
    assert.deepEqual(d.arr, [1, 2, 3], '$push $each $sort $slice');
    assert.deepEqual(d.pos, [1, 9, 2], '$push $position');
    assert.deepEqual(d.set, [1, 2], '$addToSet $each');
    assert.deepEqual(d.pop, [1, 2], '$pop 1');
    assert.deepEqual(d.pl, [1, 2], '$pull with a condition');
    assert.deepEqual(d.pa, [2], '$pullAll');
  });

  test('positional $, $[] and $[<id>] with arrayFilters', async () => {
    const c = await fresh();
    await c.insertOne({ _id: 1, a: [1, 2, 3], g: [{ x: 1, y: 0 }, { x: 6, y: 0 }, { x: 8, y: 0 }] });
    await c.updateOne({ _id: 1, a: 2 }, { $set: { 'a.$': 20 } });
    await c.updateOne({ _id: 1 }, { $inc: { 'a.$[]': 1 } });
    const r = await c.updateOne({ _id: 1 }, { $set: { 'g.$[big].y': 1 } }, { arrayFilters: [{ 'big.x': { $gt: 5 } }] });
    assert.equal(r.modifiedCount, 1, 'arrayFilters update modified 1');
    const d = await c.findOne({ _id: 1 });
    assert.deepEqual(d.a, [2, 21, 4], 'positional $ then $[]');
    assert.deepEqual(d.g.map((e) => e.y), [0, 1, 1], '$[big] touched only matching elements');
  });

  test('replacement, pipeline update, multi and result counts', async () => {
    const c = await fresh();
    await c.insertMany([{ _id: 1, a: 2, b: 3, junk: 1 }, { _id: 2, k: 1 }, { _id: 3, k: 1 }]);
    await c.updateOne({ _id: 1 }, [{ $set: { sum: { $add: ['$a', '$b'] } } }, { $addFields: { t: 1 } },
      { $unset: 'junk' }]);
    assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, a: 2, b: 3, sum: 5, t: 1 }, 'pipeline $set/$addFields/$unset');
    await c.updateOne({ _id: 1 }, [{ $replaceWith: { _id: '$_id', only: '$sum' } }]);
    assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, only: 5 }, 'pipeline $replaceWith');
    const rep = await c.replaceOne({ _id: 1 }, { z: 1 });
    assert.equal(rep.modifiedCount, 1, 'replaceOne modified 1');
    assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, z: 1 }, 'replacement keeps _id');
    let m = await c.updateMany({ k: 1 }, { $set: { v: 1 } });
    assert.deepEqual([m.matchedCount, m.modifiedCount], [2, 2], 'updateMany matched and modified 2');
    m = await c.updateMany({ k: 1 }, { $set: { v: 1 } });
    assert.deepEqual([m.matchedCount, m.modifiedCount], [2, 0], 'same value: matched 2, modified 0');
    const raw = await db.command({ update: c.collectionName, updates: [{ q: { k: 1 }, u: { $set: { v: 2 } } }] });
    assert.deepEqual([raw.n, raw.nModified], [1, 1], 'raw update without multi: n 1, nModified 1');
  });

  test('upsert seeds from equality predicates, _id from the filter, $setOnInsert once', async () => {
    const c = await fresh();
    const raw = await db.command({ update: c.collectionName, updates: [{
      q: { 'a.b': 1, $and: [{ c: 2 }], d: { $eq: 3 }, e: { $gt: 5 } },
      u: { $inc: { n: 1 }, $setOnInsert: { created: true } }, upsert: true }] });
    assert.equal(raw.n, 1, 'upsert n 1');
    assert.equal(raw.nModified, 0, 'upsert nModified 0');
    assert.equal(raw.upserted.length, 1, 'one upserted entry');
    assert.equal(raw.upserted[0].index, 0, 'upserted index 0');
    const doc = await c.findOne({ _id: raw.upserted[0]._id });
    assert.equal(Object.keys(doc)[0], '_id', '_id first');
    delete doc._id;
    assert.deepEqual(doc, { a: { b: 1 }, c: 2, d: 3, n: 1, created: true }, 'seeded from dotted/$and/$eq equalities');
    let r = await c.updateOne({ _id: 'k' }, { $inc: { n: 1 }, $setOnInsert: { first: 1 } }, { upsert: true });
    assert.equal(r.upsertedId, 'k', 'upsertedId from the filter');
    r = await c.updateOne({ _id: 'k' }, { $inc: { n: 1 }, $setOnInsert: { first: 2 } }, { upsert: true });
    assert.equal(r.upsertedCount, 0, 'second upsert updates');
    assert.deepEqual(await c.findOne({ _id: 'k' }), { _id: 'k', n: 2, first: 1 }, '$setOnInsert only on insert');
  });

  test('errors: conflict 40, $inc non-number 14, _id change 66, seed 002 $set of $inc 52', async () => {
    const c = await fresh();
    await c.insertOne({ _id: 1, a: 'x', favCount: 0 });
    let e = await rejection(c.updateOne({ _id: 1 }, { $set: { favCount: 1 }, $inc: { favCount: 1 } }), 'conflict');
    assert.equal(e.code, 40, 'ConflictingUpdateOperators (40)');
    assert.equal(e.errmsg, "Updating the path 'favCount' would create a conflict at 'favCount'", "mongod's message");
    e = await rejection(c.updateOne({ _id: 1 }, { $inc: { a: 1 } }), '$inc on a string');
    assert.equal(e.code, 14, 'TypeMismatch (14)');
    e = await rejection(c.updateOne({ _id: 1 }, { $set: { _id: 2 } }), 'changing _id');
    assert.equal(e.code, 66, 'ImmutableField (66)');
    assert.equal(e.errmsg, "Performing an update on the path '_id' would modify the immutable field '_id'",
      "mongod's message");
    e = await rejection(c.replaceOne({ _id: 1 }, { _id: 3 }), 'replacement changing _id');
    assert.equal(e.code, 66, 'replacement changing _id: ImmutableField (66)');
    e = await rejection(c.updateOne({ _id: 1 }, { $set: { $inc: { favCount: 1 } } }), 'seed 002');
    assert.equal(e.code, 52, 'seed 002 {$set: {$inc: ...}}: DollarPrefixedFieldName (52)');
    assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, a: 'x', favCount: 0 }, 'nothing was written');
  });

  test('int32 overflow promotes to int64', async () => {
    const c = await fresh();
    await c.insertOne({ _id: 1, i: new Int32(2147483647), small: new Int32(1) });
    await c.updateOne({ _id: 1 }, { $inc: { i: new Int32(1), small: new Int32(1) } });
    assert.equal(await c.countDocuments({ i: { $type: 'long' } }), 1, '$inc past int32 max is an int64');
    assert.equal(await c.countDocuments({ small: { $type: 'int' } }), 1, 'in range stays int32');
    const d = await c.findOne({ _id: 1 }, { promoteLongs: false });
    assert.equal(d.i.toString(), '2147483648', 'the promoted value is exact');
  });

  test('delete with limit 1 and limit 0', async () => {
    const c = await fresh();
    await c.insertMany(Array.from({ length: 6 }, (_, i) => ({ _id: i, k: i % 2 })));
    const one = await db.command({ delete: c.collectionName, deletes: [{ q: { k: 0 }, limit: 1 }] });
    assert.equal(one.n, 1, 'limit 1 deletes one');
    const all = await db.command({ delete: c.collectionName, deletes: [{ q: { k: 0 }, limit: 0 }] });
    assert.equal(all.n, 2, 'limit 0 deletes all the rest');
    assert.equal((await c.deleteOne({ k: 1 })).deletedCount, 1, 'deleteOne');
    assert.equal((await c.deleteMany({})).deletedCount, 2, 'deleteMany');
  });
});

// --- findAndModify -----------------------------------------------------------------

describe('findAndModify', () => {
  test('options and lastErrorObject', async () => {
    const c = await fresh();
    await c.insertMany([{ _id: 1, g: 1, v: 1, arr: [1, 5] }, { _id: 2, g: 1, v: 2 }]);
    let r = await c.findOneAndUpdate({ g: 1 }, { $inc: { v: 10 } },
      { sort: { v: -1 }, returnDocument: 'after', projection: { v: 1, _id: 0 }, includeResultMetadata: true });
    assert.deepEqual(r.value, { v: 12 }, 'sort + new + fields');
    assert.deepEqual(r.lastErrorObject, { n: 1, updatedExisting: true }, 'lastErrorObject for an update');
    r = await c.findOneAndUpdate({ _id: 9 }, { $inc: { plays: 1 } },
      { upsert: true, returnDocument: 'after', includeResultMetadata: true });
    assert.deepEqual(r.value, { _id: 9, plays: 1 }, 'upsert returns the new document');
    assert.deepEqual(r.lastErrorObject, { n: 1, updatedExisting: false, upserted: 9 }, 'lastErrorObject for upsert');
    r = await c.findOneAndUpdate({ _id: 1 }, { $set: { 'arr.$[e]': 0 } },
      { arrayFilters: [{ e: { $gt: 2 } }], returnDocument: 'after' });
    assert.deepEqual(r.arr, [1, 0], 'arrayFilters');
    r = await c.findOneAndUpdate({ _id: 77 }, { $set: { v: 1 } }, { includeResultMetadata: true });
    assert.equal(r.value, null, 'no match: null');
    assert.deepEqual(r.lastErrorObject, { n: 0, updatedExisting: false }, 'lastErrorObject no match');
    r = await c.findOneAndReplace({ _id: 9 }, { x: 1 }, { returnDocument: 'before' });
    assert.deepEqual(r, { _id: 9, plays: 1 }, 'replace returns the old value by default');
    r = await c.findOneAndDelete({ g: 1 }, { sort: { v: -1 }, includeResultMetadata: true });
    assert.equal(r.value._id, 2, 'remove with sort');
    assert.deepEqual(r.lastErrorObject, { n: 1 }, 'lastErrorObject for remove');
    const e = await rejection(db.command({ findAndModify: c.collectionName, query: {} }), 'no update/remove');
    assert.equal(e.code, 9, 'neither update nor remove: FailedToParse (9)');
  });

  test('play counter: upsert + new returns 1..N without gaps', async () => {
    const c = await fresh();
    const got = await Promise.all(Array.from({ length: 40 }, () =>
      c.findOneAndUpdate({ _id: 'vid' }, { $inc: { n: 1 } }, { upsert: true, returnDocument: 'after' })));
    const ns = got.map((d) => d.n).sort((a, b) => a - b);
    assert.deepEqual(ns, Array.from({ length: 40 }, (_, i) => i + 1), 'each caller saw a distinct value 1..40');
  });
});

// --- count, distinct, aggregate, bulkWrite -------------------------------------------

describe('count, distinct, aggregate, bulkWrite', () => {
  let c;
  before(async () => {
    c = await fresh();
    await c.insertMany([
      { _id: 1, item: 'a', qty: 2, price: 10, tags: ['x', 'y'] },
      { _id: 2, item: 'b', qty: 1, price: 20, tags: ['y'] },
      { _id: 3, item: 'a', qty: 5, price: 10, tags: [] },
      { _id: 4, item: 'c', qty: 3, price: 7.5, tags: ['x', 'z'] },
      { _id: 5, item: 'b', qty: 4, price: 20 },
    ]);
  });

  test('count, countDocuments, estimatedDocumentCount, distinct', async () => {
    assert.equal((await db.command({ count: c.collectionName, query: { item: 'a' } })).n, 2, 'count command');
    assert.equal(await c.countDocuments({ qty: { $gte: 3 } }), 3, 'countDocuments');
    assert.equal(await c.countDocuments({}, { skip: 1, limit: 3 }), 3, 'countDocuments with skip/limit');
    assert.equal(await c.estimatedDocumentCount(), 5, 'estimatedDocumentCount');
    assert.deepEqual((await c.distinct('item')).sort(), ['a', 'b', 'c'], 'distinct');
    assert.deepEqual((await c.distinct('tags')).sort(), ['x', 'y', 'z'], 'distinct unwinds arrays');
    assert.deepEqual(await c.distinct('item', { price: 20 }), ['b'], 'distinct with a query');
  });

  test('$group with every accumulator', async () => {
    const out = await c.aggregate([
      { $sort: { _id: 1 } },
      { $group: { _id: '$item', total: { $sum: '$qty' }, avg: { $avg: '$qty' }, min: { $min: '$qty' },
        max: { $max: '$qty' }, first: { $first: '$_id' }, last: { $last: '$_id' }, all: { $push: '$qty' },
        prices: { $addToSet: '$price' }, cnt: { $count: {} } } },
      { $sort: { _id: 1 } },
    ]).toArray();
    assert.deepEqual(out, [
      { _id: 'a', total: 7, avg: 3.5, min: 2, max: 5, first: 1, last: 3, all: [2, 5], prices: [10], cnt: 2 },
      { _id: 'b', total: 5, avg: 2.5, min: 1, max: 4, first: 2, last: 5, all: [1, 4], prices: [20], cnt: 2 },
      { _id: 'c', total: 3, avg: 3, min: 3, max: 3, first: 4, last: 4, all: [3], prices: [7.5], cnt: 1 },
    ], '$group accumulators');
  });

  test('$match $sort $skip $limit $project $addFields $set $unset $unwind $count $replaceRoot $replaceWith', async () => {
    let out = await c.aggregate([{ $match: { qty: { $gte: 1 } } }, { $sort: { qty: -1 } }, { $skip: 1 },
      { $limit: 2 }, { $project: { item: 1, double: { $multiply: ['$qty', 2] } } }]).toArray();
    assert.deepEqual(out, [{ _id: 5, item: 'b', double: 8 }, { _id: 4, item: 'c', double: 6 }],
      '$match/$sort/$skip/$limit/$project');
    out = await c.aggregate([{ $match: { _id: 1 } }, { $addFields: { t: 1 } }, { $set: { u: '$item' } },
      { $unset: ['tags', 'price'] }]).toArray();
    assert.deepEqual(out, [{ _id: 1, item: 'a', qty: 2, t: 1, u: 'a' }], '$addFields/$set/$unset');
    out = await c.aggregate([{ $unwind: '$tags' }, { $project: { tags: 1 } }]).toArray();
    assert.deepEqual(out.map((d) => `${d._id}${d.tags}`), ['1x', '1y', '2y', '4x', '4z'], '$unwind');
    out = await c.aggregate([{ $match: { qty: { $gt: 2 } } }, { $count: 'big' }]).toArray();
    assert.deepEqual(out, [{ big: 3 }], '$count');
    out = await c.aggregate([{ $match: { _id: 2 } }, { $replaceRoot: { newRoot: { i: '$item' } } }]).toArray();
    assert.deepEqual(out, [{ i: 'b' }], '$replaceRoot');
    out = await c.aggregate([{ $match: { _id: 2 } }, { $replaceWith: { q: '$qty' } }]).toArray();
    assert.deepEqual(out, [{ q: 1 }], '$replaceWith');
  });

  test('bulkWrite through insert/update/delete commands', async () => {
    const b = await fresh();
    await b.insertMany([{ _id: 1, v: 0 }, { _id: 2, v: 0 }, { _id: 3, v: 0 }]);
    const r = await b.bulkWrite([
      { insertOne: { document: { _id: 4, v: 0 } } },
      { updateOne: { filter: { _id: 1 }, update: { $inc: { v: 1 } } } },
      { updateMany: { filter: { v: 0 }, update: { $set: { v: 5 } } } },
      { replaceOne: { filter: { _id: 10 }, replacement: { v: 10 }, upsert: true } },
      { deleteOne: { filter: { _id: 2 } } },
      { deleteMany: { filter: { v: 5 } } },
    ]);
    assert.equal(r.insertedCount, 1, 'inserted 1');
    assert.equal(r.matchedCount, 4, 'matched 4');
    assert.equal(r.modifiedCount, 4, 'modified 4');
    assert.equal(r.upsertedCount, 1, 'upserted 1');
    assert.deepEqual(r.upsertedIds, { 3: 10 }, 'upserted _id 10 at index 3');
    assert.equal(r.deletedCount, 3, 'deleted 3');
    assert.deepEqual(await ids(b, {}), [1, 10], 'remaining documents');
  });
});

// --- indexes ----------------------------------------------------------------------

describe('indexes', () => {
  test('createIndexes, listIndexes, dropIndexes', async () => {
    const c = await fresh();
    assert.equal(await c.createIndex({ a: 1, b: -1 }), 'a_1_b_-1', 'compound index name');
    assert.equal(await c.createIndex({ c: 1 }, { sparse: true, name: 'by_c' }), 'by_c', 'named sparse index');
    const list = await c.listIndexes().toArray();
    assert.deepEqual(list.map((i) => i.name).sort(), ['_id_', 'a_1_b_-1', 'by_c'], 'listIndexes names');
    assert.deepEqual(Object.entries(list.find((i) => i.name === 'a_1_b_-1').key), [['a', 1], ['b', -1]],
      'key order and direction');
    assert.equal(list.find((i) => i.name === 'by_c').sparse, true, 'sparse shown');
    await c.dropIndex('by_c');
    assert.deepEqual((await c.listIndexes().toArray()).map((i) => i.name).sort(), ['_id_', 'a_1_b_-1'], 'dropped');
    await c.dropIndexes();
    assert.deepEqual((await c.listIndexes().toArray()).map((i) => i.name), ['_id_'], 'dropIndexes * keeps _id_');
  });

  test('unique, sparse and partial indexes refuse violating writes and write nothing', async () => {
    const c = await fresh();
    await c.createIndex({ email: 1 }, { unique: true });
    await c.insertOne({ _id: 1, email: 'x@y' });
    let e = await rejection(c.insertOne({ _id: 2, email: 'x@y' }), 'duplicate email');
    assert.equal(e.code, 11000, '11000');
    assert.deepEqual(e.keyPattern, { email: 1 }, 'keyPattern');
    assert.deepEqual(e.keyValue, { email: 'x@y' }, 'keyValue');
    assert.equal(e.errmsg, `E11000 duplicate key error collection: db.${c.collectionName} index: email_1 dup key: { email: "x@y" }`,
      "mongod's message");
    assert.equal(await c.findOne({ _id: 2 }), null, 'the violating document is absent');
    await c.insertOne({ _id: 3, email: 'z@y' });
    e = await rejection(c.updateOne({ _id: 3 }, { $set: { email: 'x@y', touched: 1 } }), 'violating update');
    assert.equal(e.code, 11000, 'violating update 11000');
    assert.deepEqual(await c.findOne({ _id: 3 }), { _id: 3, email: 'z@y' }, 'the update wrote nothing');
    const s = await fresh();
    await s.createIndex({ s: 1 }, { unique: true, sparse: true });
    await s.insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3, s: 1 }]);
    await rejection(s.insertOne({ _id: 4, s: 1 }), 'sparse unique duplicate');
    await s.createIndex({ p: 1 }, { unique: true, partialFilterExpression: { active: true } });
    await s.insertMany([{ _id: 10, p: 'k', active: false }, { _id: 11, p: 'k', active: false }, { _id: 12, p: 'k', active: true }]);
    e = await rejection(s.insertOne({ _id: 13, p: 'k', active: true }), 'partial unique duplicate');
    assert.equal(e.code, 11000, 'partial unique 11000');
    assert.deepEqual(await ids(s, {}), [1, 2, 3, 10, 11, 12], 'only the violating documents were refused');
  });

  test('explain shows IDHACK, IXSCAN and COLLSCAN', async () => {
    const c = await fresh();
    await c.insertMany(Array.from({ length: 40 }, (_, i) => ({ _id: i, a: i % 8, b: i })));
    await c.createIndex({ a: 1, b: 1 });
    assert.ok((await winningStages(c, { _id: 3 })).includes('IDHACK'), 'by _id: IDHACK');
    const eq = await winningStages(c, { a: 2 });
    assert.ok(eq.includes('IXSCAN') && !eq.includes('COLLSCAN'), 'equality on the prefix: IXSCAN');
    assert.ok((await winningStages(c, { a: { $lt: 2 } })).includes('IXSCAN'), 'range on the prefix: IXSCAN');
    const so = await winningStages(c, {}, { a: 1, b: 1 });
    assert.ok(so.includes('IXSCAN') && !so.includes('SORT'), 'sort on the index: IXSCAN, no SORT stage');
    assert.deepEqual(await winningStages(c, { b: 2 }), ['COLLSCAN'], 'non-prefix field: COLLSCAN');
  });

  test('TTL index with expireAfterSeconds 0 removes a past-dated document within seconds', async () => {
    const c = await fresh();
    await c.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
    await c.insertMany([{ _id: 1, at: new Date(Date.now() - 300000) }, { _id: 2, at: new Date(Date.now() + 864e5) }]);
    const deadline = Date.now() + 10000;
    while (Date.now() < deadline && (await c.countDocuments({ _id: 1 })) > 0) await sleep(200);
    assert.deepEqual(await ids(c, {}), [2], 'the expired document is gone within 10 s, the future one stays');
  });
});

// --- names and w:0 -------------------------------------------------------------------

describe('names and w:0', () => {
  test('invalid database and collection names fail with InvalidNamespace (73)', async () => {
    for (const bad of ['a$b', '', '.x']) {
      const e = await rejection(db.command({ insert: bad, documents: [{ _id: 1 }] }), `collection ${JSON.stringify(bad)}`);
      assert.equal(e.code, 73, `collection name ${JSON.stringify(bad)}: InvalidNamespace (73)`);
    }
    for (const bad of ['bad"name', 'd'.repeat(64)]) {
      const e = await rejection(client.db(bad).collection('c').insertOne({ _id: 1 }), `db ${bad}`);
      assert.equal(e.code, 73, `database name ${bad}: InvalidNamespace (73)`);
    }
  });

  test('w:0 writes are applied and get no reply', async () => {
    const c = await fresh();
    const one = new MongoClient(`mongodb://127.0.0.1:${atomdb.port}/?directConnection=true&maxPoolSize=1`,
      { serverSelectionTimeoutMS: 10000 });
    try {
      await one.connect();
      const col = one.db('db').collection(c.collectionName);
      const r = await col.insertOne({ _id: 1, n: 0 }, { writeConcern: { w: 0 } });
      assert.equal(r.acknowledged, false, 'w:0 insert is unacknowledged');
      await col.updateOne({ _id: 1 }, { $inc: { n: 5 } }, { writeConcern: { w: 0 } });
      await col.insertOne({ _id: 1, n: 99 }, { writeConcern: { w: 0 } });
      await col.deleteMany({ nothing: 1 }, { writeConcern: { w: 0 } });
      // One pooled connection: a stray reply to a w:0 write would desynchronise this read.
      let doc = null;
      const deadline = Date.now() + 5000;
      while (Date.now() < deadline) {
        doc = await col.findOne({ _id: 1 });
        if (doc?.n === 5) break;
        await sleep(50);
      }
      assert.deepEqual(doc, { _id: 1, n: 5 }, 'w:0 insert and update applied, duplicate silently ignored');
      assert.equal((await one.db('admin').command({ ping: 1 })).ok, 1, 'the connection is still in sync');
    } finally {
      await one.close();
    }
  });
});

test('the server is still running after every CRUD test', () => {
  assert.equal(atomdb.alive(), true, 'atomdb is still running');
});
