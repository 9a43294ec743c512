// mms-start.mjs: the mongodb-memory-server measurement behind
// `atomdb-bench measure-server --only mms` (issue 21). Runs
// MongoMemoryServer.create() -> connect -> first insertOne, and the same for
// MongoMemoryReplSet.create({replSet: {count: 1}}), RUNS times each with the
// given binary as MONGOMS_SYSTEM_BINARY, and prints one JSON line per run:
// {"kind":"server"|"replset","create_ms":…,"insert_ms":…}. Stop and clean-up
// are not timed. Usage: node mms-start.mjs ATOMDB_BINARY RUNS
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const [bin, runsArg] = process.argv.slice(2);
const runs = Number(runsArg || 10);
process.env.MONGOMS_SYSTEM_BINARY = resolve(bin);
process.env.MONGOMS_VERSION = '7.0.0';
process.env.MONGOMS_RUNTIME_DOWNLOAD = 'false';

// The packages are the Node test suite's (tests/drivers/node, npm ci).
const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, '..', '..', 'tests', 'drivers', 'node', 'package.json'));
const { MongoMemoryServer, MongoMemoryReplSet } = require('mongodb-memory-server-core');
const { MongoClient } = require('mongodb');

async function once(kind) {
  const t0 = performance.now();
  const m = kind === 'server'
    ? await MongoMemoryServer.create()
    : await MongoMemoryReplSet.create({ replSet: { count: 1 } });
  const t1 = performance.now();
  const client = new MongoClient(m.getUri());
  await client.db('bench').collection('first').insertOne({ x: 1 });
  const t2 = performance.now();
  await client.close();
  await m.stop();
  console.log(JSON.stringify({ kind, create_ms: t1 - t0, insert_ms: t2 - t0 }));
}

for (const kind of ['server', 'replset'])
  for (let i = 0; i < runs; i++) await once(kind);
