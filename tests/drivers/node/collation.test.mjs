// The Node.js MongoDB driver 7.x against a real atomdb (issue 19): collation
// on find, countDocuments, distinct, aggregate, update/delete and
// findOneAndUpdate, a collection's default collation and a view's, hidden
// indexes (hideIndex/unhideIndex as collMod), DBRef $elemMatch and
// $dateFromString. Expectations are mongod 7.0's, from the documentation.
// Run: node --test tests/drivers/node/collation.test.mjs (ATOMDB_BIN picks the binary)

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rejection, startAtomdbWithClient, stopAtomdbWithClient } from './atomdb-server.mjs';
import { MongoServerError, DBRef, ObjectId } from 'mongodb';

let atomdb;
let client;
let db;
let seq = 0;

before(async () => ({ atomdb, client, db } = await startAtomdbWithClient('node_coll')));
after(() => stopAtomdbWithClient(atomdb, client));

const CAFE = [
  { _id: 1, category: 'café', status: 'A' },
  { _id: 2, category: 'cafe', status: 'a' },
  { _id: 3, category: 'cafE', status: 'a' },
];
const FR1 = { locale: 'fr', strength: 1 };
const CI = { locale: 'en', strength: 2 };

async function fresh(docs = CAFE) {
  const c = db.collection(`c${++seq}`);
  await c.drop().catch(() => {});
  if (docs.length) await c.insertMany(docs);
  return c;
}

test('find, count, distinct and aggregate take a collation', async () => {
  const c = await fresh();
  const ids = (docs) => docs.map((d) => d._id).sort();
  assert.deepEqual(ids(await c.find({ category: 'cafe' }, { collation: FR1 }).toArray()), [1, 2, 3]);
  assert.deepEqual(ids(await c.find({ category: 'cafe' }).toArray()), [2], 'bytewise without one');
  assert.equal(await c.countDocuments({ status: 'A' }, { collation: CI }), 3);
  assert.equal((await c.distinct('category', {}, { collation: FR1 })).length, 1);
  const groups = await c.aggregate([{ $group: { _id: '$status', n: { $sum: 1 } } }],
    { collation: CI }).toArray();
  assert.equal(groups.length, 1);
  assert.equal(groups[0].n, 3);
});

test('updates, deletes and findOneAndUpdate take a collation', async () => {
  const c = await fresh();
  const r = await c.updateMany({ category: 'cafe' }, { $set: { seen: true } }, { collation: FR1 });
  assert.equal(r.modifiedCount, 3);
  const doc = await c.findOneAndUpdate({ category: 'CAFE' }, { $set: { x: 1 } },
    { collation: FR1, sort: { _id: -1 }, returnDocument: 'after' });
  assert.equal(doc._id, 3);
  assert.equal((await c.deleteMany({ status: 'A' }, { collation: CI })).deletedCount, 3);
});

test('a collection default collation applies and a view keeps its own', async () => {
  const name = `d${++seq}`;
  await db.createCollection(name, { collation: FR1 });
  const c = db.collection(name);
  await c.insertMany(CAFE);
  assert.equal(await c.countDocuments({ category: 'cafe' }), 3);
  const [info] = await db.listCollections({ name }).toArray();
  assert.equal(info.options.collation.locale, 'fr');
  await db.createCollection(`${name}_v`, { viewOn: name, pipeline: [], collation: CI });
  const e = await rejection(db.collection(`${name}_v`).find({}, { collation: FR1 }).toArray());
  assert.ok(e instanceof MongoServerError);
  assert.equal(e.code, 167);
});

test('hideIndex and unhideIndex', async () => {
  const c = await fresh([{ _id: 1, borough: 'Bronx', ratings: [1] }]);
  await c.createIndex({ borough: 1, ratings: 1 }, { hidden: true });
  let [ix] = (await c.indexes()).filter((i) => i.name === 'borough_1_ratings_1');
  assert.equal(ix.hidden, true);
  const e = await rejection(c.find({ borough: 'Bronx' }).hint('borough_1_ratings_1').toArray());
  assert.equal(e.code, 2);
  const r = await db.command({ collMod: c.collectionName, index: { keyPattern: { borough: 1, ratings: 1 }, hidden: false } });
  assert.equal(r.hidden_old, true);
  assert.equal(r.hidden_new, false);
  [ix] = (await c.indexes()).filter((i) => i.name === 'borough_1_ratings_1');
  assert.equal(ix.hidden, undefined);
  assert.equal((await c.find({ borough: 'Bronx' }).hint('borough_1_ratings_1').toArray()).length, 1);
});

test('$elemMatch over DBRefs and $dateFromString', async () => {
  const a = new ObjectId();
  const c = await fresh([{ _id: 1, roles: [new DBRef('role', a)] }, { _id: 2, roles: [new DBRef('role', new ObjectId())] }]);
  const got = await c.find({ roles: { $elemMatch: { $id: a } } }).toArray();
  assert.deepEqual(got.map((d) => d._id), [1]);
  const [d] = await c.aggregate([{ $match: { _id: 1 } }, { $project: { _id: 0, d: {
    $dateFromString: { dateString: '2017-02-08T12:10:40.787', timezone: 'America/New_York' } } } }]).toArray();
  assert.equal(d.d.toISOString(), '2017-02-08T17:10:40.787Z');
});
