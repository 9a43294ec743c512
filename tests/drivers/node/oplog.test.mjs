// The oplog view local.oplog.rs through the Node.js MongoDB driver 7.x against
// a real atomdb (issue 18, docs/change-streams.md): the newest entry read as
// tools read it, and a Meteor-style tail — a tailable awaitData cursor from
// the newest ts — receiving an insert made by another client.
// Run: node --test tests/drivers/node   (ATOMDB_BIN picks the binary)

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAtomdb } from './atomdb-server.mjs';
import { MongoClient, Timestamp } from 'mongodb';

const servers = [];
after(async () => {
  for (const s of servers) {
    const problems = await s.stop();
    assert.deepEqual(problems, [], 'atomdb stopped cleanly with no sanitizer report');
    s.cleanup();
  }
});

test('a tailable awaitData cursor on local.oplog.rs receives another client\'s insert', { timeout: 30000 }, async () => {
  const s = await startAtomdb({});
  servers.push(s);
  const client = new MongoClient(s.uri, { serverSelectionTimeoutMS: 30000 });
  const other = new MongoClient(s.uri, { serverSelectionTimeoutMS: 30000 });
  try {
    await client.db('nodeop').createCollection('t');
    const oplog = client.db('local').collection('oplog.rs');
    const last = await oplog.find({}).sort({ $natural: -1 }).limit(1).next();
    assert.ok(last.ts instanceof Timestamp, 'ts is a Timestamp');
    assert.equal(last.op, 'c');
    assert.deepEqual(last.o.create, 't');
    const cursor = oplog.find({ ts: { $gt: last.ts }, ns: 'nodeop.t' },
                              { tailable: true, awaitData: true, maxAwaitTimeMS: 5000 });
    const writer = new Promise((resolve) => setTimeout(async () => {
      await other.db('nodeop').collection('t').insertOne({ _id: 'tail' });
      resolve();
    }, 300));
    const t0 = Date.now();
    const entry = await cursor.next(); // the driver's getMores park until the insert
    await writer;
    assert.equal(entry.op, 'i');
    assert.equal(entry.ns, 'nodeop.t');
    assert.deepEqual(entry.o, { _id: 'tail' });
    assert.deepEqual(entry.o2, { _id: 'tail' });
    assert.ok(Date.now() - t0 < 4500, 'delivered when the insert committed');
    await cursor.close();
  } finally {
    await client.close();
    await other.close();
  }
});
