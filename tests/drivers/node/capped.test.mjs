// Capped collections and tailable cursors through the Node.js MongoDB driver
// 7.x against a real atomdb (issue 20): createCollection with capped/size/max,
// the oldest documents removed in insertion order, a tailable awaitData
// cursor receiving a document inserted by another client, CappedPositionLost.
// Run: node --test tests/drivers/node   (ATOMDB_BIN picks the binary)

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAtomdb } from './atomdb-server.mjs';
import { MongoClient } from 'mongodb';

let server, client;
before(async () => {
  server = await startAtomdb();
  client = new MongoClient(server.uri, { serverSelectionTimeoutMS: 30000 });
});
after(async () => {
  await client?.close();
  const problems = await server.stop();
  server.cleanup();
  assert.deepEqual(problems, [], 'atomdb stopped cleanly with no sanitizer report');
});

const ids = async (coll, opts = {}) => (await coll.find({}, opts).toArray()).map((d) => d._id);

describe('capped collections', () => {
  test('max keeps the newest documents in insertion order', async () => {
    const db = client.db('nodecapped');
    const log = await db.createCollection('log', { capped: true, size: 100000, max: 3 });
    assert.equal(await log.isCapped(), true);
    for (const i of [5, 1, 4, 2, 3]) await log.insertOne({ _id: i });
    assert.deepEqual(await ids(log), [4, 2, 3]);
    assert.deepEqual(await ids(log, { sort: { $natural: -1 } }), [3, 2, 4]);
    const opts = await log.options();
    assert.deepEqual(opts, { capped: true, size: 100096, max: 3 });
  });

  test('size is required with capped', async () => {
    const db = client.db('nodecapped');
    await assert.rejects(db.createCollection('nosize', { capped: true }), (e) => {
      assert.equal(e.code, 72);
      assert.match(e.message, /the 'size' field is required when 'capped' is true/);
      return true;
    });
  });

  test('a tailable awaitData cursor gets an insert from another client', async () => {
    const db = client.db('nodecapped');
    const feed = await db.createCollection('feed', { capped: true, size: 4096 });
    await feed.insertOne({ _id: 0 });
    const cursor = feed.find({}, { tailable: true, awaitData: true, maxAwaitTimeMS: 5000 });
    assert.equal((await cursor.next())._id, 0);
    const other = new MongoClient(server.uri, { serverSelectionTimeoutMS: 30000 });
    const t0 = Date.now();
    const writer = (async () => {
      await new Promise((r) => setTimeout(r, 300));
      await other.db('nodecapped').collection('feed').insertOne({ _id: 1, by: 'other' });
    })();
    const doc = await cursor.next();
    const waited = Date.now() - t0;
    await writer;
    await other.close();
    assert.deepEqual(doc, { _id: 1, by: 'other' });
    assert.ok(waited >= 200 && waited < 4000, `woken by the insert after ${waited} ms`);
    await cursor.close();
  });

  test('a position removed by capping: CappedPositionLost', async () => {
    const db = client.db('nodecapped');
    const ring = await db.createCollection('ring', { capped: true, size: 4096, max: 2 });
    await ring.insertMany([{ _id: 1 }, { _id: 2 }]);
    const cursor = ring.find({}, { tailable: true, batchSize: 1 });
    assert.equal((await cursor.next())._id, 1);
    await ring.insertMany([{ _id: 3 }, { _id: 4 }]);
    await assert.rejects(cursor.next(), (e) => {
      assert.equal(e.code, 136);
      assert.equal(e.codeName, 'CappedPositionLost');
      return true;
    });
  });
});
