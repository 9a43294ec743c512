// What the Node.js driver relies on (issue 15): the cluster time it gossips,
// causal consistency in a session (operationTime / afterClusterTime), write
// concern errors reported after the write, batchSize 0 cursors, and DDL in
// transactions. Run: node --test tests/drivers/node   (ATOMDB_BIN picks the binary)

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAtomdb } from './atomdb-server.mjs';
import { MongoClient, Timestamp, MongoWriteConcernError } from 'mongodb';

let atomdb;
let client;
const commands = [];

before(async () => {
  atomdb = await startAtomdb();
  client = new MongoClient(`mongodb://127.0.0.1:${atomdb.port}/?replicaSet=rs0`,
    { serverSelectionTimeoutMS: 10000, monitorCommands: true });
  client.on('commandStarted', (ev) => commands.push(ev));
  await client.connect();
});
after(async () => {
  await client.close();
  const problems = await atomdb.stop();
  assert.deepEqual(problems, [], 'atomdb stopped cleanly with no sanitizer report');
});

describe('cluster time and causal consistency', () => {
  test('a causally consistent session learns operationTime and sends afterClusterTime', async () => {
    const session = client.startSession({ causalConsistency: true });
    try {
      const coll = client.db('nodecc').collection('c');
      await coll.insertOne({ x: 1 }, { session });
      assert.ok(session.operationTime instanceof Timestamp, 'the session learned the write\'s operationTime');
      assert.ok(session.clusterTime && session.clusterTime.clusterTime instanceof Timestamp,
        'and the cluster time');
      commands.length = 0;
      const doc = await coll.findOne({ x: 1 }, { session });
      assert.ok(doc, 'the read after the write sees it');
      const find = commands.find((c) => c.commandName === 'find');
      assert.ok(find.command.readConcern && find.command.readConcern.afterClusterTime,
        'the driver sent readConcern.afterClusterTime from the session');
      assert.ok(find.command.$clusterTime, 'the driver gossips $clusterTime back');
    } finally {
      await session.endSession();
    }
  });

  test('the next transaction\'s read concern carries afterClusterTime', async () => {
    const session = client.startSession({ causalConsistency: true });
    try {
      const coll = client.db('nodecc').collection('t');
      await coll.insertOne({ y: 1 }, { session });
      commands.length = 0;
      await session.withTransaction(async () => {
        assert.equal(await coll.countDocuments({ y: 1 }, { session }), 1, 'the transaction sees the write');
      });
      const first = commands.find((c) => c.command.startTransaction);
      assert.ok(first.command.readConcern && first.command.readConcern.afterClusterTime,
        'the first statement of the transaction carries afterClusterTime');
    } finally {
      await session.endSession();
    }
  });
});

describe('write concern, cursors and DDL', () => {
  test('w: 2 writes the document and reports a write concern error', async () => {
    const coll = client.db('nodewc').collection('c');
    const err = await coll.insertOne({ _id: 1 }, { writeConcern: { w: 2 } }).then(() => null, (e) => e);
    assert.ok(err instanceof MongoWriteConcernError, `a MongoWriteConcernError (${err && err.name})`);
    assert.equal(err.code, 100, 'UnsatisfiableWriteConcern');
    assert.deepEqual(await coll.findOne({ _id: 1 }), { _id: 1 }, 'the document was written');
  });

  test('batchSize 0 opens the cursor without documents, then iterates them all', async () => {
    const coll = client.db('nodewc').collection('b');
    await coll.insertMany(Array.from({ length: 7 }, (_, i) => ({ _id: i })));
    commands.length = 0;
    const docs = await coll.find({}, { batchSize: 0 }).toArray();
    assert.equal(docs.length, 7, 'every document is returned');
    assert.ok(commands.some((c) => c.commandName === 'getMore'), 'after a getMore');
  });

  test('createIndexes on an existing collection inside a transaction is refused and leaves nothing', async () => {
    const db = client.db('nodewc');
    await db.collection('ix').insertOne({ a: 1 });
    const session = client.startSession();
    try {
      session.startTransaction();
      const err = await db.collection('ix').createIndex({ a: 1 }, { session }).then(() => null, (e) => e);
      assert.ok(err && err.code === 263, `OperationNotSupportedInTransaction (got ${err && err.code})`);
      await session.abortTransaction();
    } finally {
      await session.endSession();
    }
    const names = (await db.collection('ix').listIndexes().toArray()).map((i) => i.name);
    assert.deepEqual(names, ['_id_'], 'no index survives');
  });
});
