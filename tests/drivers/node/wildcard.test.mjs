// Wildcard indexes (issue 20) through the Node.js MongoDB driver 7.x: the
// manual's product_attributes.$** and wildcardProjection examples declared
// with createIndex (as a model layer syncs its indexes), queries planned on
// them (explain), listIndexes' spec, and mongod's refusals.
// Run: node --test tests/drivers/node/wildcard.test.mjs   (ATOMDB_BIN picks the binary)

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAtomdbWithClient, stopAtomdbWithClient } from './atomdb-server.mjs';
import { MongoServerError } from 'mongodb';

let atomdb;
let client;
let db;

const PRODUCTS = [
  { _id: 1, product_name: 'Spy Coat',
    product_attributes: { material: ['Tweed', 'Wool', 'Leather'], size: { length: 72, units: 'inches' } } },
  { _id: 2, product_name: 'Spy Pen',
    product_attributes: { colors: ['Blue', 'Black'],
      secret_feature: { name: 'laser', power: '1000', units: 'watts' } } },
  { _id: 3, product_name: 'Spy Book' },
];

before(async () => ({ atomdb, client, db } = await startAtomdbWithClient('wildcard')));
after(() => stopAtomdbWithClient(atomdb, client));

async function winning(coll, filter) {
  const e = await coll.find(filter).explain();
  return e.queryPlanner.winningPlan;
}

test('a subtree wildcard index answers queries on its paths', async () => {
  const products = db.collection('products');
  await products.insertMany(PRODUCTS);
  assert.equal(await products.createIndex({ 'product_attributes.$**': 1 }),
    'product_attributes.$**_1');
  const ids = async (f) => (await products.find(f).toArray()).map((d) => d._id).sort();
  assert.deepEqual(await ids({ 'product_attributes.size.length': { $gt: 60 } }), [1]);
  assert.deepEqual(await ids({ 'product_attributes.material': 'Wool' }), [1]);
  const plan = await winning(products, { 'product_attributes.size.length': { $gt: 60 } });
  assert.equal(plan.inputStage.stage, 'IXSCAN');
  assert.deepEqual(plan.inputStage.keyPattern,
    { $_path: 1, 'product_attributes.size.length': 1 });
  assert.equal((await winning(products, { product_name: 'Spy Pen' })).stage, 'COLLSCAN');
});

test('wildcardProjection is kept in the spec and limits the paths', async () => {
  const items = db.collection('items');
  await items.insertMany([
    { _id: 1, product_name: 'Blaster Gun', product_attributes: { elements: { fire: 10 }, resistance: 5 } },
    { _id: 2, product_name: 'Ice Shield', product_attributes: { elements: { ice: 25 }, resistance: 9 } },
  ]);
  await items.createIndex({ '$**': 1 }, { wildcardProjection: { 'product_attributes.elements': 0 } });
  const spec = (await items.listIndexes().toArray()).find((i) => i.name === '$**_1');
  assert.deepEqual(spec.wildcardProjection, { 'product_attributes.elements': 0 });
  assert.equal((await winning(items, { product_name: 'Ice Shield' })).inputStage.stage, 'IXSCAN');
  assert.equal((await winning(items, { 'product_attributes.elements.ice': 25 })).stage, 'COLLSCAN');
  const found = await items.find({ 'product_attributes.elements.ice': 25 }).toArray();
  assert.deepEqual(found.map((d) => d._id), [2]);
});

test('refusals as mongod', async () => {
  const coll = db.collection('refused');
  for (const [key, opts, code] of [
    [{ '$**': 1 }, { unique: true }, 67],
    [{ '$**': 1 }, { sparse: true }, 67],
    [{ '$**': 1 }, { wildcardProjection: { a: 1, b: 0 } }, 31254],
    [{ 'a.$**': 1 }, { wildcardProjection: { a: 1 } }, 9],
  ]) {
    await assert.rejects(coll.createIndex(key, opts),
      (e) => e instanceof MongoServerError && e.code === code, JSON.stringify([key, opts]));
  }
});
