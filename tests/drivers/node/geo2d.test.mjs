// Legacy 2d indexes (issue 20) through the Node.js MongoDB driver 7.x: an
// index declared with createIndex and its bits/min/max options (as a model
// layer syncs its indexes), $near / $geoWithin on legacy pairs planned on it
// (explain), $geoNear with spherical: false, and mongod's refusals.
// Run: node --test tests/drivers/node/geo2d.test.mjs   (ATOMDB_BIN picks the binary)

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAtomdbWithClient, stopAtomdbWithClient } from './atomdb-server.mjs';
import { MongoServerError } from 'mongodb';

let atomdb;
let client;
let db;

before(async () => ({ atomdb, client, db } = await startAtomdbWithClient('geo2d')));
after(() => stopAtomdbWithClient(atomdb, client));

test('a 2d index with its options serves $near and $geoWithin', async () => {
  const places = db.collection('places');
  await places.insertMany([
    { _id: 1, loc: [-73.97, 40.77] },
    { _id: 2, loc: [-73.9928, 40.7193] },
    { _id: 3, loc: { lng: -73.9375, lat: 40.8303 } },
  ]);
  assert.equal(await places.createIndex({ loc: '2d' }, { bits: 28, min: -100, max: 100 }),
    'loc_2d');
  const spec = (await places.indexes()).find((i) => i.name === 'loc_2d');
  assert.deepEqual([spec.bits, spec.min, spec.max], [28, -100, 100], 'listed as given');
  const near = await places.find({ loc: { $near: [-73.9667, 40.78] } }).toArray();
  assert.deepEqual(near.map((d) => d._id), [1, 3, 2], 'nearest first, flat distances');
  const e = await places.find({ loc: { $near: [0, 0] } }).explain();
  assert.equal(e.queryPlanner.winningPlan.stage, 'GEO_NEAR_2D');
  const box = await places.find({ loc: { $geoWithin: { $box: [[-74, 40.7], [-73.95, 40.8]] } } })
    .toArray();
  assert.deepEqual(box.map((d) => d._id).sort(), [1, 2]);
  const res = await places.aggregate([{ $geoNear: { near: [-73.97, 40.77],
    distanceField: 'd', spherical: false, maxDistance: 0.06 } }]).toArray();
  assert.deepEqual(res.map((d) => d._id), [1, 2]);
  assert.equal(res[0].d, 0);
});

test('out-of-plane points and misplaced 2d fields are refused as mongod', async () => {
  const c = db.collection('bad');
  await c.createIndex({ loc: '2d' });
  await assert.rejects(c.insertOne({ loc: [190, 0] }), (err) => {
    assert.ok(err instanceof MongoServerError);
    assert.equal(err.code, 13027);
    assert.match(err.message, /point not in interval of \[ -180, 180 \]/);
    return true;
  });
  assert.equal(await c.countDocuments({}), 0, 'nothing was written');
  await assert.rejects(c.createIndex({ a: 1, loc2: '2d' }), (err) => err.code === 16801);
  await assert.rejects(c.createIndex({ p: '2d' }, { bits: 40 }), (err) => err.code === 72);
});
