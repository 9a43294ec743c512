// Lease locks with fencing tokens (issue 6, docs/locks.md) through the
// Node.js MongoDB driver 7.x against a real atomdb: reply shapes and errors,
// fenced writes, mutual exclusion across 16 processes (and lost updates
// without the lock), a SIGSTOPped holder fenced off, FIFO hand-over with one
// wake-up per release, session end and disconnect release, and tokens that
// keep increasing across a restart.
// Run: node --test tests/drivers/node   (ATOMDB_BIN picks the binary)

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startAtomdb, sleep, freePort, repo, atomdbBin, withoutClusterTime } from './atomdb-server.mjs';

const here = dirname(fileURLToPath(import.meta.url));
import { MongoClient, MongoServerError } from 'mongodb';

const STALE = 900000001; // StaleFencingToken





async function waitFor(pred, what, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await pred()) return;
    await sleep(10);
  }
  throw new Error(`timed out waiting for ${what}`);
}

// Runs `src` (an ES module) in a child node process with `args`; the child
// resolves 'mongodb' from this directory.
function nodeChild(src, args) {
  const child = spawn(process.execPath, ['--input-type=module', '-e', src, ...args],
    { cwd: here, stdio: ['ignore', 'pipe', 'pipe'] });
  child.out = '';
  child.err = '';
  child.stdout.on('data', (d) => { child.out += d; });
  child.stderr.on('data', (d) => { child.err += d; });
  child.done = new Promise((res) => child.on('exit', (code, signal) => res({ code, signal })));
  return child;
}

// Client options for every client here. serverMonitoringMode 'poll': the
// driver's streaming monitor sends hello with exhaustAllowed and treats a
// reply without moreToCome as a monitor error (the server then counts as
// Unknown until the next check); atomdb does not stream hello replies yet
// (README: exhaust replies), which under a loaded machine turned into
// server-selection timeouts mid-test.
const CLIENT_OPTS = "{ serverSelectionTimeoutMS: 30000, serverMonitoringMode: 'poll' }";
const clientOpts = { serverSelectionTimeoutMS: 30000, serverMonitoringMode: 'poll' };

const rejectsWith = async (p, code, what) => {
  await assert.rejects(p, (e) => e instanceof MongoServerError && e.code === code, what);
};

let atomdb;
let client;
let db;

before(async () => {
  atomdb = await startAtomdb({ keep: true });
  client = new MongoClient(atomdb.uri, clientOpts);
  await client.connect();
  db = client.db('test');
});

after(async () => {
  await client.close();
  const problems = await atomdb.stop();
  atomdb.cleanup();
  assert.deepEqual(problems, [], 'atomdb stopped cleanly with no sanitizer report');
});

const acquire = (d, name, owner, leaseMs = 30000, waitMs = 0, extra = {}) =>
  d.command({ acquireLock: name, owner, leaseMs, waitMs, ...extra });
const info = (d, name) => d.command({ lockInfo: name });

describe('lease lock commands', () => {
  test('acquireLock answers a token and expiry; another owner is refused', async () => {
    const r = await acquire(db, 'shape', 'p1', 5000);
    assert.equal(r.acquired, true, 'a free lock is acquired at once');
    assert.ok(Number(r.token) >= 1, 'the token is positive');
    assert.ok(r.expiresAt instanceof Date, 'expiresAt is a date');
    const busy = await acquire(db, 'shape', 'p2');
    assert.deepEqual(withoutClusterTime(busy), { acquired: false, ok: 1 }, 'waitMs 0 answers acquired: false');
    const i = await info(db, 'shape');
    assert.equal(i.held, true, 'lockInfo: held');
    assert.equal(i.owner, 'p1', 'lockInfo: owner');
    assert.equal(Number(i.token), Number(r.token), 'lockInfo: token');
    assert.equal(i.waiting, 0, 'lockInfo: nobody waiting');
    const { locks } = await db.command({ listLocks: 1 });
    assert.ok(locks.some((l) => l.lock === 'shape'), 'listLocks lists it');
    await rejectsWith(db.command({ releaseLock: 'shape', token: Number(r.token) - 1 }), STALE,
      'a stale release is an error');
    assert.equal((await info(db, 'shape')).held, true, 'and released nothing');
    const renewed = await db.command({ renewLock: 'shape', token: r.token, leaseMs: 60000 });
    assert.ok(renewed.expiresAt > r.expiresAt, 'renewLock extends the lease');
    assert.equal((await db.command({ releaseLock: 'shape', token: r.token })).released, true);
  });

  test('bad arguments get mongod-style errors', async () => {
    await rejectsWith(db.command({ acquireLock: 1, owner: 'o', leaseMs: 1 }), 14, 'name type');
    await rejectsWith(db.command({ acquireLock: 'x', leaseMs: 1 }), 9, 'owner missing');
    await rejectsWith(db.command({ acquireLock: 'x', owner: 'o', leaseMs: -5 }), 2, 'leaseMs range');
    await rejectsWith(db.command({ insert: 'c', documents: [{}], fence: 'x' }), 14, 'fence type');
    await rejectsWith(db.command({ insert: 'c', documents: [{}], fence: { lock: 'x' } }), 9,
      'fence.token missing');
  });

  test('fenced writes under a stale token are refused with nothing written', async () => {
    const t = Number((await acquire(db, 'f', 'me')).token);
    await db.command({ insert: 'fw', documents: [{ _id: 1, v: 0 }], fence: { lock: 'f', token: t } });
    for (const bad of [t - 1, t + 1]) {
      for (const cmd of [
        { insert: 'fw', documents: [{ _id: 2 }] },
        { update: 'fw', updates: [{ q: { _id: 1 }, u: { $set: { v: 9 } } }] },
        { delete: 'fw', deletes: [{ q: {}, limit: 0 }] },
        { findAndModify: 'fw', query: { _id: 1 }, update: { $set: { v: 9 } } },
      ]) {
        await rejectsWith(db.command({ ...cmd, fence: { lock: 'f', token: bad } }), STALE,
          `${Object.keys(cmd)[0]} with token ${bad} (current ${t}) is refused`);
      }
    }
    assert.deepEqual(await db.collection('fw').find().toArray(), [{ _id: 1, v: 0 }],
      'nothing was written by the refused commands');
  });
});

describe('waiting', () => {
  test('waiters acquire in arrival order, one per release', async () => {
    const holder = await acquire(db, 'fifo', 'holder');
    const n = 5;
    const clients = [];
    const got = [];
    const pending = [];
    for (let i = 0; i < n; i++) {
      const c = new MongoClient(atomdb.uri, clientOpts);
      await c.connect();
      clients.push(c);
      pending.push(acquire(c.db('test'), 'fifo', `w${i}`, 30000, 60000).then((r) => { got.push({ i, r }); }));
      await waitFor(async () => (await info(db, 'fifo')).waiting === i + 1, `waiter ${i} queued`);
    }
    assert.equal(got.length, 0, 'no waiter acquires while the holder holds');
    let release = holder.token;
    for (let k = 0; k < n; k++) {
      await db.command({ releaseLock: 'fifo', token: release });
      await waitFor(() => got.length === k + 1, `wake-up ${k}`);
      await sleep(300);
      assert.equal(got.length, k + 1, `release ${k} woke exactly one waiter`);
      assert.equal(got[k].i, k, `waiter ${k} acquired in arrival order`);
      assert.equal(got[k].r.acquired, true);
      assert.ok(Number(got[k].r.token) > Number(release), 'each hand-over issues a larger token');
      release = got[k].r.token;
    }
    await db.command({ releaseLock: 'fifo', token: release });
    await Promise.all(pending);
    await Promise.all(clients.map((c) => c.close()));
  });

  test('an expired lease wakes the next waiter; a wait that runs out answers acquired: false', async () => {
    const t1 = Number((await acquire(db, 'exp', 'slow', 300)).token);
    const r = await acquire(db, 'exp', 'next', 30000, 10000);
    assert.equal(r.acquired, true, 'woken by the expiry');
    assert.equal(Number(r.token), t1 + 1, 'with the next token');
    const start = Date.now();
    const late = await acquire(db, 'exp', 'late', 30000, 300);
    assert.deepEqual(withoutClusterTime(late), { acquired: false, ok: 1 }, 'timed out');
    assert.ok(Date.now() - start >= 250, 'after about waitMs');
  });
});

const WORKER = `
import { MongoClient } from 'mongodb';
const [uri, owner, n, useLock] = process.argv.slice(-4);
const client = new MongoClient(uri, ${CLIENT_OPTS});
const db = client.db('test');
for (let i = 0; i < Number(n); i++) {
  let token;
  if (useLock === '1') {
    const r = await db.command({ acquireLock: 'counter', owner, leaseMs: 30000, waitMs: 600000, releaseOnDisconnect: true });
    if (!r.acquired) throw new Error('not acquired');
    token = r.token;
  }
  const { v } = await db.collection('counter').findOne({ _id: 1 });   // read ...
  await new Promise((r) => setTimeout(r, 1));                         // ... think ...
  const cmd = { update: 'counter', updates: [{ q: { _id: 1 }, u: { $set: { v: v + 1 } } }] };
  if (useLock === '1') cmd.fence = { lock: 'counter', token };
  await db.command(cmd);                                              // ... write back
  if (useLock === '1') await db.command({ releaseLock: 'counter', token });
}
await client.close();
console.log('done');
`;

async function runCounter(useLock, procs = 16, each = 200) {
  await db.collection('counter').deleteMany({});
  await db.collection('counter').insertOne({ _id: 1, v: 0 });
  const kids = [];
  for (let i = 0; i < procs; i++) kids.push(nodeChild(WORKER, [atomdb.uri, `p${i}`, String(each), useLock ? '1' : '0']));
  try {
    for (const k of kids) {
      const { code } = await k.done;
      assert.equal(code, 0, `worker failed: ${k.err.slice(-2000)}`);
    }
  } finally {
    for (const k of kids) k.kill('SIGKILL'); // after a failure or a timeout
  }
  return (await db.collection('counter').findOne({ _id: 1 })).v;
}

describe('many processes', () => {
  test('the lock gives mutual exclusion to 16 processes x 200 read-modify-writes', { timeout: 900000 }, async () => {
    assert.equal(await runCounter(true), 3200, 'no update lost');
  });

  test('the same workload without the lock loses updates (the test can fail)', { timeout: 900000 }, async () => {
    const v = await runCounter(false);
    assert.ok(v < 3200, `updates were lost without the lock (got ${v})`);
  });

  test('a holder paused past its lease (SIGSTOP) is fenced off after SIGCONT', async () => {
    const PAUSED = `
      import { MongoClient } from 'mongodb';
      const client = new MongoClient(process.argv.at(-1), ${CLIENT_OPTS});
      const db = client.db('test');
      const r = await db.command({ acquireLock: 'job', owner: 'paused', leaseMs: 2000 });
      console.log('token ' + r.token);
      // the work, well within the lease; SIGSTOP lands here (a GC pause) and
      // outlasts the lease
      await new Promise((res) => setTimeout(res, 1000));
      try {
        await db.command({ insert: 'out', documents: [{ by: 'paused' }], fence: { lock: 'job', token: r.token } });
        console.log('written');
      } catch (e) { console.log('refused ' + e.code + ' ' + e.codeName); }
      await client.close();
    `;
    const child = nodeChild(PAUSED, [atomdb.uri]);
    try {
      await waitFor(() => child.out.includes('token '), 'the child acquired', 60000);
      child.kill('SIGSTOP');
      const old = Number(child.out.match(/token (\d+)/)[1]);
      const r = await acquire(db, 'job', 'new', 30000, 10000);
      assert.ok(r.acquired && Number(r.token) > old, 'a new holder took over after the lease ran out');
      await db.command({ insert: 'out', documents: [{ by: 'new' }], fence: { lock: 'job', token: r.token } });
      child.kill('SIGCONT');
      await child.done;
    } finally {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
    assert.match(child.out, new RegExp(`refused ${STALE} StaleFencingToken`), `the resumed holder was refused: ${child.out} ${child.err}`);
    assert.deepEqual((await db.collection('out').find().toArray()).map((d) => d.by), ['new'],
      'only the new holder wrote');
  });

  test('closing a client ends its sessions and releases their locks; a killed process releases releaseOnDisconnect locks', async () => {
    const a = new MongoClient(atomdb.uri, clientOpts);
    await a.connect();
    const session = a.startSession();
    await a.db('test').command({ acquireLock: 'sess', owner: 'a', leaseMs: 60000 }, { session });
    assert.equal((await info(db, 'sess')).held, true, 'held under the session');
    await db.command({ endSessions: [session.id] });
    assert.equal((await info(db, 'sess')).held, false, 'endSessions released it');
    await session.endSession();
    await acquire(a.db('test'), 'sess2', 'a', 60000);
    await a.close(); // sends endSessions for the client's implicit sessions
    await waitFor(async () => (await info(db, 'sess2')).held === false, 'release at client close', 30000);

    const HOLD = `
      import { MongoClient } from 'mongodb';
      const client = new MongoClient(process.argv.at(-1), ${CLIENT_OPTS});
      const r = await client.db('test').command({ acquireLock: 'rod', owner: 'kid', leaseMs: 60000, releaseOnDisconnect: true });
      console.log(r.acquired ? 'acquired' : 'not');
      setInterval(() => {}, 1000);
    `;
    const kid = nodeChild(HOLD, [atomdb.uri]);
    await waitFor(() => kid.out.includes('acquired'), 'the child acquired', 60000);
    assert.equal((await info(db, 'rod')).releaseOnDisconnect, true);
    kid.kill('SIGKILL'); // no endSessions: only the disconnect releases
    await kid.done;
    await waitFor(async () => (await info(db, 'rod')).held === false, 'release at disconnect', 30000);
  });
});

describe('restarts', () => {
  for (const kill of [false, true]) {
    test(`tokens keep increasing across a restart (${kill ? 'kill -9' : 'clean stop'})`, async () => {
      const s1 = await startAtomdb({ keep: true });
      let s2;
      try {
        let c = new MongoClient(s1.uri, clientOpts);
        let last = 0;
        for (let i = 0; i < 3; i++) {
          const r = await acquire(c.db('test'), 'durable', 'a', 100000);
          await c.db('test').command({ releaseLock: 'durable', token: r.token });
          last = Number(r.token);
        }
        await c.close();
        assert.deepEqual(await s1.stop({ kill }), [], 'the first server stopped as asked');
        s2 = await startAtomdb({ dir: s1.dir, keep: true });
        c = new MongoClient(s2.uri, clientOpts);
        const i = await info(c.db('test'), 'durable');
        assert.equal(i.held, false, 'a restart ends every lease');
        assert.equal(Number(i.token), last, 'the last token survived');
        const r = await acquire(c.db('test'), 'durable', 'b');
        assert.ok(Number(r.token) > last, `the next token is larger (${r.token} > ${last})`);
        await c.close();
        assert.deepEqual(await s2.stop(), [], 'the restarted server stopped cleanly');
      } finally {
        s1.cleanup();
      }
    });
  }
});
