// $lookup, $unionWith, $graphLookup and aggregate explain through the
// Node.js driver 7.x against a real atomdb, with MongoDB's documentation
// examples (orders/inventory, sales, employees). Expectations are mongod 7.0's.
// Run: node --test tests/drivers/node/lookup.test.mjs   (ATOMDB_BIN picks the binary)

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient, MongoServerError } from 'mongodb';
import { startAtomdb } from './atomdb-server.mjs';

describe('joins through the Node driver', () => {
  let server;
  let client;
  let db;
  before(async () => {
    server = await startAtomdb();
    client = new MongoClient(`mongodb://127.0.0.1:${server.port}/?directConnection=true&serverSelectionTimeoutMS=5000`);
    db = client.db('node_joins');
    await db.collection('orders').insertMany([
      { _id: 1, item: 'almonds', price: 12, quantity: 2 },
      { _id: 2, item: 'pecans', price: 20, quantity: 1 },
      { _id: 3 },
    ]);
    await db.collection('inventory').insertMany([
      { _id: 1, sku: 'almonds', description: 'product 1', instock: 120 },
      { _id: 2, sku: 'bread', description: 'product 2', instock: 80 },
      { _id: 3, sku: 'cashews', description: 'product 3', instock: 60 },
      { _id: 4, sku: 'pecans', description: 'product 4', instock: 70 },
      { _id: 5, sku: null, description: 'Incomplete' },
      { _id: 6 },
    ]);
  });
  after(async () => {
    await client.close();
    assert.deepEqual(await server.stop(), []);
  });

  const join = { from: 'inventory', localField: 'item', foreignField: 'sku', as: 'inventory_docs' };

  test('$lookup joins orders to inventory as the documentation shows', async () => {
    const out = await db.collection('orders').aggregate([{ $lookup: join }, { $sort: { _id: 1 } }]).toArray();
    assert.deepEqual(out.map((d) => d.inventory_docs.map((x) => x._id)), [[1], [4], [5, 6]]);
  });

  test('$lookup with let and pipeline', async () => {
    const out = await db.collection('orders').aggregate([
      { $lookup: { from: 'inventory', let: { q: '$quantity' },
        pipeline: [{ $match: { $expr: { $gte: ['$instock', { $multiply: ['$$q', 50] }] } } },
          { $project: { _id: 1 } }], as: 'ok' } },
      { $sort: { _id: 1 } }]).toArray();
    // 2 * 50 = 100 <= 120 (almonds); 1 * 50 <= 120, 80, 60, 70; $$q missing: null compares low
    assert.deepEqual(out.map((d) => d.ok.map((x) => x._id)), [[1], [1, 2, 3, 4], [1, 2, 3, 4]]);
  });

  test('$unionWith and $graphLookup', async () => {
    await db.collection('employees').insertMany([
      { _id: 1, name: 'Dev' },
      { _id: 2, name: 'Eliot', reportsTo: 'Dev' },
      { _id: 3, name: 'Ron', reportsTo: 'Eliot' },
    ]);
    const u = await db.collection('orders').aggregate([{ $unionWith: 'employees' }, { $count: 'n' }]).toArray();
    assert.deepEqual(u, [{ n: 6 }]);
    const g = await db.collection('employees').aggregate([
      { $graphLookup: { from: 'employees', startWith: '$reportsTo', connectFromField: 'reportsTo',
        connectToField: 'name', as: 'chain', depthField: 'd' } },
      { $sort: { _id: 1 } }]).toArray();
    assert.deepEqual(g.map((d) => d.chain.map((x) => [x.name, Number(x.d)]).sort()),
      [[], [['Dev', 0]], [['Dev', 1], ['Eliot', 0]]]);
  });

  test('explain of an aggregate has mongod\'s stages', async () => {
    const ex = await db.collection('orders').aggregate([{ $lookup: join }]).explain('queryPlanner');
    assert.equal(ex.stages[0].$cursor.queryPlanner.namespace, 'node_joins.orders');
    assert.deepEqual(ex.stages[1], { $lookup: join });
    const full = await db.collection('orders').aggregate([{ $lookup: join }]).explain();
    assert.equal(full.stages[1].nReturned, 3);
  });

  test('$out inside a $lookup pipeline is refused with 51047', async () => {
    await assert.rejects(
      db.collection('orders').aggregate([{ $lookup: { from: 'inventory', pipeline: [{ $out: 'x' }], as: 'y' } }]).toArray(),
      (e) => e instanceof MongoServerError && e.code === 51047);
  });
});
