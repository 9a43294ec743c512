// The Node.js MongoDB driver 7.x against a real atomdb: handshake, admin
// commands, sessions and compression, in replica-set discovery mode
// (mongodb://host:port) and with directConnection=true.
// Run: node --test tests/drivers/node/*.test.mjs   (ATOMDB_BIN picks the binary)

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAtomdb, sleep, freePort, repo, atomdbBin } from './atomdb-server.mjs';
import { createRequire } from 'node:module';
import { MongoClient } from 'mongodb';

const require = createRequire(import.meta.url);






function optionalModule(name, why) {
  try {
    require(name);
    return null;
  } catch (e) {
    return `npm package ${name} is not installed (${e.code || e.message}): ${why}`;
  }
}

// zstd: @mongodb-js/zstd 7.x ships no binary in the registry; its install script
// downloads a prebuilt binary from outside the npm registry, which this project
// does not allow, so that test is skipped. snappy ships its binary in a registry
// package and is installed by package-lock.json: missing, its test fails.
const COMPRESSORS = {
  zlib: { skip: null, missing: null },
  snappy: { skip: null, missing: optionalModule('snappy', 'run scripts/install-deps.sh (npm ci)') },
  zstd: {
    skip: optionalModule('@mongodb-js/zstd',
      'its install script downloads a prebuilt binary from outside the npm registry'),
    missing: null,
  },
};

const MODES = {
  discovery: { options: '', topology: 'ReplicaSetWithPrimary' },
  direct: { options: '?directConnection=true', topology: 'Single' },
};

function pooledCompressors(client) {
  const found = [];
  for (const server of client.topology.s.servers.values()) {
    for (const conn of server.pool.connections) found.push(conn.description.compressor ?? null);
  }
  return found;
}

let atomdb;

before(async () => { atomdb = await startAtomdb(); });
after(async () => {
  const problems = await atomdb.stop();
  assert.deepEqual(problems, [], 'atomdb stopped cleanly with no sanitizer report');
});

for (const [modeName, mode] of Object.entries(MODES)) {
  describe(`Node driver, ${modeName} mode`, () => {
    let client;
    const uri = () => `mongodb://127.0.0.1:${atomdb.port}/${mode.options}`;

    before(async () => {
      client = new MongoClient(uri(), { serverSelectionTimeoutMS: 10000 });
      await client.connect();
    });
    after(async () => { await client?.close(); });

    test('connects and sees the expected topology', async () => {
      const desc = client.topology.description;
      assert.equal(desc.type, mode.topology, `topology type is ${mode.topology}`);
      if (modeName === 'discovery') {
        assert.equal(desc.setName, 'rs0', 'discovered replica set rs0');
        const server = desc.servers.get(`127.0.0.1:${atomdb.port}`);
        assert.equal(server?.type, 'RSPrimary', 'the one member is the RSPrimary');
      }
    });

    test('ping answers ok: 1', async () => {
      const r = await client.db('admin').command({ ping: 1 });
      assert.equal(r.ok, 1, 'ping answers ok: 1');
    });

    test('buildInfo reports a MongoDB 7.0.x version', async () => {
      const r = await client.db('admin').command({ buildInfo: 1 });
      assert.match(r.version, /^7\.0\.\d+$/, 'buildInfo.version is 7.0.x');
      assert.equal(r.versionArray.length, 4, 'buildInfo.versionArray has four numbers');
      assert.deepEqual(r.versionArray.slice(0, 3).map(Number), r.version.split('.').map(Number),
        'versionArray agrees with version');
    });

    test('hello describes the single-node replica set', async () => {
      const h = await client.db('admin').command({ hello: 1 });
      const me = `127.0.0.1:${atomdb.port}`;
      assert.equal(h.setName, 'rs0', 'hello.setName is rs0');
      assert.deepEqual(h.hosts, [me], 'hello.hosts is the advertised address');
      assert.equal(h.isWritablePrimary, true, 'hello.isWritablePrimary is true');
      assert.equal(h.maxWireVersion, 21, 'hello.maxWireVersion is 21');
      assert.equal(h.logicalSessionTimeoutMinutes, 30, 'hello.logicalSessionTimeoutMinutes is 30');
    });

    test('listDatabases shows a created database, create and drop work', async () => {
      const dbName = `node_${modeName}`;
      const db = client.db(dbName);
      await db.dropDatabase();
      await db.createCollection('things');
      const colls = (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name);
      assert.deepEqual(colls, ['things'], 'createCollection makes the collection visible');
      const dbs = await client.db('admin').admin().listDatabases();
      assert.ok(dbs.databases.some((d) => d.name === dbName), 'listDatabases includes the new database');
      assert.equal(await db.collection('things').drop(), true, 'drop answers true');
      const after = (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name);
      assert.deepEqual(after, [], 'drop removes the collection');
      await db.dropDatabase();
    });

    test('serverStatus reports host, version, uptime, connections, opcounters, mem', async () => {
      const s = await client.db('admin').command({ serverStatus: 1 });
      assert.equal(typeof s.host, 'string', 'serverStatus.host is a string');
      assert.match(s.version, /^7\.0\.\d+$/, 'serverStatus.version is 7.0.x');
      assert.ok(Number(s.uptime) >= 0, 'serverStatus.uptime >= 0');
      assert.ok(Number(s.connections.current) >= 1, 'serverStatus.connections.current >= 1');
      assert.ok(s.opcounters && 'command' in s.opcounters, 'serverStatus.opcounters.command present');
      assert.ok(s.mem && typeof s.mem === 'object', 'serverStatus.mem present');
    });

    test('a session starts, carries a command and ends', async () => {
      const session = client.startSession();
      try {
        const r = await client.db('admin').command({ ping: 1 }, { session });
        assert.equal(r.ok, 1, 'ping inside a session answers ok: 1');
        assert.ok(session.id?.id, 'the session has an lsid');
        await client.db(`node_sess_${modeName}`).listCollections({}, { session }).toArray();
      } finally {
        await session.endSession();
      }
      assert.equal(session.hasEnded, true, 'the session ended');
    });

    test('an unknown command fails with CommandNotFound', async () => {
      await assert.rejects(client.db('admin').command({ nope: 1 }), (e) => {
        assert.equal(e.code, 59, 'code 59');
        assert.equal(e.codeName, 'CommandNotFound', 'codeName CommandNotFound');
        assert.equal(e.message, "no such command: 'nope'", "errmsg no such command: 'nope'");
        return true;
      });
    });

    for (const [compressor, { skip, missing }] of Object.entries(COMPRESSORS)) {
      test(`compressor ${compressor} is negotiated and used`, { skip: skip ?? false }, async () => {
        assert.equal(missing, null, `${compressor}: ${missing}`);
        const sep = mode.options ? '&' : '?';
        const c = new MongoClient(`${uri()}${sep}compressors=${compressor}`, { serverSelectionTimeoutMS: 10000 });
        try {
          await c.connect();
          for (let i = 0; i < 3; i++) {
            const r = await c.db('admin').command({ ping: 1 });
            assert.equal(r.ok, 1, `ping with ${compressor} answers ok: 1`);
          }
          const big = await c.db('admin').command({ ping: 1, comment: 'x'.repeat(100000) });
          assert.equal(big.ok, 1, `a 100 KB compressible command with ${compressor} answers ok: 1`);
          const used = pooledCompressors(c);
          assert.ok(used.length > 0, 'test setup: the driver holds a pooled connection');
          assert.ok(used.every((x) => x === compressor), `every pooled connection negotiated ${compressor} (got ${used})`);
        } finally {
          await c.close();
        }
      });
    }
  });
}

test('the server is still running after both modes', () => {
  assert.equal(atomdb.alive(), true, 'atomdb is still running');
});
