// mongodb-memory-server-core (pinned in package-lock.json, installed with
// scripts off) running build/atomdb through MONGOMS_SYSTEM_BINARY, as a test
// suite would (docs/testing-with-atomdb.md): MongoMemoryServer.create() and
// MongoMemoryReplSet.create({replSet: {count: 1}}), insert/find, a
// withTransaction, stop and clean-up with no process or directory left.
// Nothing is downloaded: the system binary is used and its version checked.
// Run: node --test tests/drivers/node/memory-server.test.mjs (ATOMDB_BIN)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { atomdbBin, sleep } from './atomdb-server.mjs';
import { MongoClient } from 'mongodb';

// Before the library is loaded: it reads these when it starts a server.
process.env.MONGOMS_SYSTEM_BINARY = atomdbBin;
process.env.MONGOMS_VERSION = '7.0.0';
process.env.MONGOMS_RUNTIME_DOWNLOAD = 'false';
const { MongoMemoryServer, MongoMemoryReplSet } = await import('mongodb-memory-server-core');

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code !== 'ESRCH';
  }
}

async function gone(pid) {
  for (let i = 0; i < 200 && alive(pid); i++) await sleep(10);
  return !alive(pid);
}

// The warnings mongodb-memory-server prints (version conflict, a failed
// start) go to console.warn: a run that prints any fails.
function captureWarnings() {
  const seen = [];
  const orig = console.warn;
  console.warn = (...args) => { seen.push(args.map(String).join(' ')); };
  return { seen, restore: () => { console.warn = orig; } };
}

async function insertFindAndTransact(uri, label) {
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: 5000 });
  try {
    const coll = client.db('mms').collection('accounts');
    await coll.insertMany([{ _id: 'a', balance: 100 }, { _id: 'b', balance: 0 }]);
    assert.deepEqual(await coll.findOne({ _id: 'a' }), { _id: 'a', balance: 100 },
      `${label}: the inserted document is found`);
    const session = client.startSession();
    try {
      await session.withTransaction(async () => {
        await coll.updateOne({ _id: 'a' }, { $inc: { balance: -30 } }, { session });
        await coll.updateOne({ _id: 'b' }, { $inc: { balance: 30 } }, { session });
      });
    } finally {
      await session.endSession();
    }
    const docs = await coll.find({}, { sort: { _id: 1 } }).toArray();
    assert.deepEqual(docs, [{ _id: 'a', balance: 70 }, { _id: 'b', balance: 30 }],
      `${label}: withTransaction moved 30 from a to b`);
  } finally {
    await client.close();
  }
}

test('MongoMemoryServer.create() runs atomdb: insert, find, withTransaction, stop and clean-up', async () => {
  const warnings = captureWarnings();
  let mms;
  try {
    mms = await MongoMemoryServer.create();
  } finally {
    warnings.restore();
  }
  const info = mms.instanceInfo;
  const pid = info.instance.mongodProcess.pid;
  const killer = info.instance.killerProcess.pid;
  const dbPath = info.dbPath;
  assert.ok(alive(pid), 'the atomdb process is running');
  assert.ok(existsSync(dbPath), 'its temporary dbpath exists');
  assert.deepEqual(warnings.seen, [], 'mongodb-memory-server printed no warning');
  assert.equal(info.storageEngine, 'wiredTiger', 'the 7.0 version makes it pass wiredTiger');
  await insertFindAndTransact(mms.getUri(), 'MongoMemoryServer');

  const client = new MongoClient(mms.getUri(), { directConnection: true });
  const opts = await client.db('admin').command({ getCmdLineOpts: 1 });
  await client.close();
  assert.equal(opts.parsed.net.port, info.port, 'atomdb took the --port it was given');
  assert.equal(opts.parsed.storage.dbPath, dbPath, 'and the --dbpath');
  assert.equal(opts.parsed.storage.engine, 'wiredTiger', 'and the --storageEngine');

  assert.equal(await mms.stop(), true, 'stop() reports that it stopped the server');
  assert.ok(await gone(pid), 'the atomdb process has exited');
  assert.ok(await gone(killer), 'the killer process has exited');
  assert.ok(!existsSync(dbPath), 'the temporary dbpath was removed');
});

test('MongoMemoryReplSet.create({replSet: {count: 1}}) runs atomdb as a one-member set', async () => {
  const warnings = captureWarnings();
  let rs;
  try {
    rs = await MongoMemoryReplSet.create({ replSet: { count: 1 } });
  } finally {
    warnings.restore();
  }
  assert.deepEqual(warnings.seen, [], 'mongodb-memory-server printed no warning');
  assert.equal(rs.servers.length, 1, 'one member');
  const info = rs.servers[0].instanceInfo;
  const pid = info.instance.mongodProcess.pid;
  const dbPath = info.dbPath;
  const uri = rs.getUri();
  assert.match(uri, /replicaSet=testset/, 'the URI names the set');
  await insertFindAndTransact(uri, 'MongoMemoryReplSet');

  const client = new MongoClient(uri);
  const status = await client.db('admin').command({ replSetGetStatus: 1 });
  const conf = await client.db('admin').command({ replSetGetConfig: 1 });
  await client.close();
  assert.equal(status.set, 'testset', 'replSetGetStatus names the set given by --replSet');
  assert.equal(status.members[0].stateStr, 'PRIMARY', 'its one member is the primary');
  assert.equal(conf.config.members[0].host, `127.0.0.1:${info.port}`,
    'the config is the one mongodb-memory-server initiated');
  assert.notEqual(conf.config.settings.electionTimeoutMillis, 10000,
    'with the electionTimeoutMillis it gave, not the default');

  await rs.stop();
  assert.ok(await gone(pid), 'the atomdb process has exited');
  assert.ok(!existsSync(dbPath), 'the temporary dbpath was removed');
});
