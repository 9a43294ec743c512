// Change streams through the Node.js MongoDB driver 7.x against a real atomdb
// (issue 18, docs/change-streams.md): collection, database and cluster
// watch(), the driver's own resume after the server restarts under it (a
// clean stop and kill -9, same port and data directory), $match filters and
// updateLookup.
// Run: node --test tests/drivers/node   (ATOMDB_BIN picks the binary)

import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAtomdb } from './atomdb-server.mjs';
import { MongoClient } from 'mongodb';

const servers = [];
after(async () => {
  for (const s of servers) {
    if (s.alive()) {
      const problems = await s.stop();
      assert.deepEqual(problems, [], 'atomdb stopped cleanly with no sanitizer report');
    }
  }
  for (const s of servers) s.cleanup(); // restarts share their directory
});

async function start(opts = {}) {
  const s = await startAtomdb({ keep: true, ...opts });
  servers.push(s);
  return s;
}

const clientFor = (s) => new MongoClient(s.uri, { serverSelectionTimeoutMS: 30000 });

describe('watch()', () => {
  test('collection, database and cluster streams see inserts, updates, replaces and deletes', async () => {
    const s = await start();
    const client = clientFor(s);
    try {
      const coll = client.db('nodecs').collection('items');
      const cs = coll.watch([], { maxAwaitTimeMS: 200 });
      const ds = client.db('nodecs').watch([], { maxAwaitTimeMS: 200 });
      const all = client.watch([], { maxAwaitTimeMS: 200 });
      // the streams open (their aggregate runs) on the first next()
      const firstC = cs.tryNext(), firstD = ds.tryNext(), firstA = all.tryNext();
      assert.equal(await firstC, null);
      assert.equal(await firstD, null);
      assert.equal(await firstA, null);
      await coll.insertOne({ _id: 1, n: 1 });
      await coll.updateOne({ _id: 1 }, { $inc: { n: 1 } });
      await coll.replaceOne({ _id: 1 }, { n: 10 });
      await coll.deleteOne({ _id: 1 });
      await client.db('othernode').collection('x').insertOne({ _id: 'o' });
      const types = [];
      for (let i = 0; i < 4; i++) types.push((await cs.next()).operationType);
      assert.deepEqual(types, ['insert', 'update', 'replace', 'delete']);
      const d = [];
      for (let i = 0; i < 4; i++) d.push((await ds.next()).ns.coll);
      assert.deepEqual(d, ['items', 'items', 'items', 'items']);
      const a = [];
      for (let i = 0; i < 5; i++) a.push((await all.next()).ns.db);
      assert.deepEqual(a, ['nodecs', 'nodecs', 'nodecs', 'nodecs', 'othernode']);
      await cs.close(); await ds.close(); await all.close();
    } finally {
      await client.close();
    }
  });

  test('$match filters and updateLookup', async () => {
    const s = await start();
    const client = clientFor(s);
    try {
      const coll = client.db('nodecs').collection('seats');
      await coll.insertMany([{ _id: 'A1', taken: false }, { _id: 'A2', taken: false }]);
      const cs = coll.watch([{ $match: { operationType: 'update', 'documentKey._id': 'A2' } }],
        { fullDocument: 'updateLookup', maxAwaitTimeMS: 200 });
      assert.equal(await cs.tryNext(), null);
      await coll.updateOne({ _id: 'A1' }, { $set: { taken: true } });
      await coll.updateOne({ _id: 'A2' }, { $set: { taken: true, by: 'ann' } });
      const ev = await cs.next();
      assert.equal(ev.documentKey._id, 'A2');
      assert.deepEqual(ev.fullDocument, { _id: 'A2', taken: true, by: 'ann' });
      assert.deepEqual(ev.updateDescription.updatedFields, { taken: true, by: 'ann' });
      await cs.close();
    } finally {
      await client.close();
    }
  });

  for (const kill of [false, true]) {
    test(`the driver resumes after the server ${kill ? 'is killed (-9)' : 'stops'} and comes back`, async () => {
      let s = await start();
      const { port, dir } = s;
      const client = clientFor(s);
      try {
        const coll = client.db('nodecs').collection('resume');
        const cs = coll.watch([], { maxAwaitTimeMS: 200 });
        assert.equal(await cs.tryNext(), null);
        for (let i = 1; i <= 3; i++) await coll.insertOne({ _id: i });
        const seen = [];
        for (let i = 0; i < 3; i++) seen.push((await cs.next()).documentKey._id);
        const problems = await s.stop({ kill });
        if (!kill) assert.deepEqual(problems, []);
        s = await start({ dir, port });
        const writer = clientFor(s);
        for (let i = 4; i <= 6; i++) await writer.db('nodecs').collection('resume').insertOne({ _id: i });
        // the stream's next getMore meets the dead connection (a network
        // error) and the driver resumes with its cached token
        for (let i = 0; i < 3; i++) seen.push((await cs.next()).documentKey._id);
        assert.deepEqual(seen, [1, 2, 3, 4, 5, 6], 'every insert once, in order, across the restart');
        await cs.close();
        await writer.close();
      } finally {
        await client.close();
      }
    });
  }
});
