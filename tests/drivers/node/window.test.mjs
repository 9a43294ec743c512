// The Node.js MongoDB driver 7.x against a real atomdb: $setWindowFields,
// $densify and $fill with MongoDB's documentation examples (issue 19), and
// mongod's error codes for a bad window. Expectations are mongod 7.0's.
// Run: node --test tests/drivers/node/window.test.mjs   (ATOMDB_BIN picks the binary)

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAtomdbWithClient, stopAtomdbWithClient } from './atomdb-server.mjs';
import { MongoServerError } from 'mongodb';

let atomdb;
let client;
let db;

const cakeSales = [
  { _id: 0, type: 'chocolate', orderDate: new Date('2020-05-18T14:10:30Z'), state: 'CA', price: 13, quantity: 120 },
  { _id: 1, type: 'chocolate', orderDate: new Date('2021-03-20T11:30:05Z'), state: 'WA', price: 14, quantity: 140 },
  { _id: 2, type: 'vanilla', orderDate: new Date('2021-01-11T06:31:15Z'), state: 'CA', price: 12, quantity: 145 },
  { _id: 3, type: 'vanilla', orderDate: new Date('2020-02-08T13:13:23Z'), state: 'WA', price: 13, quantity: 104 },
  { _id: 4, type: 'strawberry', orderDate: new Date('2019-05-18T16:09:01Z'), state: 'CA', price: 41, quantity: 162 },
  { _id: 5, type: 'strawberry', orderDate: new Date('2019-01-08T06:12:03Z'), state: 'WA', price: 43, quantity: 134 },
];

before(async () => {
  ({ atomdb, client, db } = await startAtomdbWithClient('node_window'));
  await db.collection('cakeSales').insertMany(cakeSales);
});

after(() => stopAtomdbWithClient(atomdb, client));

test('$setWindowFields: cumulative quantity per state (documentation example)', async () => {
  const out = await db.collection('cakeSales').aggregate([{ $setWindowFields: {
    partitionBy: '$state', sortBy: { orderDate: 1 },
    output: { cumulativeQuantityForState: { $sum: '$quantity', window: { documents: ['unbounded', 'current'] } } },
  } }]).toArray();
  assert.deepEqual(out.map((d) => [d._id, d.cumulativeQuantityForState]),
    [[4, 162], [0, 282], [2, 427], [5, 134], [3, 238], [1, 378]]);
});

test('$setWindowFields: $rank and $shift per state (documentation examples)', async () => {
  const out = await db.collection('cakeSales').aggregate([{ $setWindowFields: {
    partitionBy: '$state', sortBy: { quantity: -1 },
    output: {
      rankQuantityForState: { $rank: {} },
      shiftQuantityForState: { $shift: { output: '$quantity', by: 1, default: 'Not available' } },
    },
  } }]).toArray();
  assert.deepEqual(out.map((d) => [d._id, d.rankQuantityForState, d.shiftQuantityForState]), [
    [4, 1, 145], [2, 2, 120], [0, 3, 'Not available'],
    [1, 1, 134], [5, 2, 104], [3, 3, 'Not available']]);
});

test('$setWindowFields: $rank with two sortBy fields fails with 5371602', async () => {
  await assert.rejects(
    db.collection('cakeSales').aggregate([{ $setWindowFields: {
      sortBy: { state: 1, quantity: 1 }, output: { r: { $rank: {} } } } }]).toArray(),
    (e) => e instanceof MongoServerError && e.code === 5371602);
});

test('$densify: hourly readings within explicit bounds (documentation example)', async () => {
  const c = db.collection('weather');
  await c.insertMany([0, 4, 8, 12].map((h, i) => ({
    metadata: { sensorId: 5578, type: 'temperature' },
    timestamp: new Date(Date.UTC(2021, 4, 18, h)), temp: [12, 11, 11, 12][i] })));
  const out = await c.aggregate([{ $densify: { field: 'timestamp', range: {
    step: 1, unit: 'hour', bounds: [new Date('2021-05-18T00:00:00Z'), new Date('2021-05-18T08:00:00Z')] } } }])
    .toArray();
  assert.deepEqual(out.map((d) => [d.timestamp.getUTCHours(), d.temp ?? null]), [
    [0, 12], [1, null], [2, null], [3, null], [4, 11], [5, null], [6, null], [7, null], [8, 11], [12, 12]]);
});

test('$fill: linear and locf (documentation examples)', async () => {
  const stock = db.collection('stock');
  await stock.insertMany([
    { time: new Date('2021-03-08T09:00:00Z'), price: 500 },
    { time: new Date('2021-03-08T10:00:00Z') },
    { time: new Date('2021-03-08T11:00:00Z'), price: 515 },
    { time: new Date('2021-03-08T12:00:00Z') },
    { time: new Date('2021-03-08T13:00:00Z') },
    { time: new Date('2021-03-08T14:00:00Z'), price: 485 },
  ]);
  const linear = await stock.aggregate([{ $fill: { sortBy: { time: 1 }, output: { price: { method: 'linear' } } } }])
    .toArray();
  assert.deepEqual(linear.map((d) => d.price), [500, 507.5, 515, 505, 495, 485]);
  const locf = await stock.aggregate([{ $fill: { sortBy: { time: 1 }, output: { price: { method: 'locf' } } } }])
    .toArray();
  assert.deepEqual(locf.map((d) => d.price), [500, 500, 515, 515, 515, 485]);
});
