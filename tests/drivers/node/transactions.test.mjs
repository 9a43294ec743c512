// Transactions through the Node.js MongoDB driver 7.x against a real atomdb
// (issue 5, docs/concurrency.md): session.withTransaction for concurrent bank
// transfers and "select for update" stock sales, isolation of uncommitted
// writes, snapshot reads, abort, and the labels the driver retries on.
// Run: node --test tests/drivers/node   (ATOMDB_BIN picks the binary)

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAtomdb, sleep, freePort, repo, atomdbBin } from './atomdb-server.mjs';
import { MongoClient } from 'mongodb';







let atomdb;
const uri = () => `mongodb://127.0.0.1:${atomdb.port}/?directConnection=true`;
const newClient = () => new MongoClient(uri(), { serverSelectionTimeoutMS: 10000 });

before(async () => { atomdb = await startAtomdb(); });
after(async () => {
  const problems = await atomdb.stop();
  assert.deepEqual(problems, [], 'atomdb stopped cleanly with no sanitizer report');
});

// A small deterministic generator, so a failing run can be repeated.
function rng(seed) {
  let s = seed >>> 0;
  return () => { s = (s * 1664525 + 1013904223) >>> 0; return s / 2 ** 32; };
}

describe('transactions through session.withTransaction', () => {
  let client;
  before(async () => { client = newClient(); await client.connect(); });
  after(async () => { await client.close(); });

  test('concurrent transfers keep the total and never overdraw a guarded balance', async () => {
    const accounts = client.db('nodetxn').collection('accounts');
    await accounts.insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i, balance: 1000 })));
    const WORKERS = 8;
    const TRANSFERS = 50;
    const stats = { attempts: 0, moved: 0, refused: 0 };
    const worker = async (seed) => {
      const own = newClient();
      await own.connect();
      const acc = own.db('nodetxn').collection('accounts');
      const rand = rng(seed);
      try {
        for (let i = 0; i < TRANSFERS; i++) {
          const src = Math.floor(rand() * 10);
          const dst = (src + 1 + Math.floor(rand() * 9)) % 10;
          const amount = 1 + Math.floor(rand() * 400);
          const session = own.startSession();
          try {
            const moved = await session.withTransaction(async () => {
              stats.attempts++;
              const debit = await acc.updateOne({ _id: src, balance: { $gte: amount } },
                { $inc: { balance: -amount } }, { session });
              if (debit.modifiedCount === 0) return false;
              await acc.updateOne({ _id: dst }, { $inc: { balance: amount } }, { session });
              return true;
            });
            if (moved) stats.moved++; else stats.refused++;
          } finally {
            await session.endSession();
          }
        }
      } finally {
        await own.close();
      }
    };
    let sampling = true;
    const totals = new Set();
    const negatives = [];
    const sampler = (async () => {
      while (sampling) {
        const docs = await accounts.find({}).toArray();
        totals.add(docs.reduce((t, d) => t + d.balance, 0));
        negatives.push(...docs.filter((d) => d.balance < 0));
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    try {
      await Promise.all(Array.from({ length: WORKERS }, (_, i) => worker(i + 1)));
    } finally {
      sampling = false;
      await sampler;
    }
    const final = await accounts.find({}).toArray();
    assert.equal(final.reduce((t, d) => t + d.balance, 0), 10000, 'the total is unchanged after all transfers');
    assert.deepEqual([...totals], [10000], 'every read during the run saw the same total');
    assert.deepEqual(negatives, [], 'no balance was ever seen negative during the run');
    assert.ok(final.every((d) => d.balance >= 0), 'no balance is negative at the end');
    assert.equal(stats.moved + stats.refused, WORKERS * TRANSFERS, 'every transfer finished');
    assert.ok(stats.moved > 0 && stats.refused > 0, `money moved (${stats.moved}) and the guard refused some (${stats.refused})`);
  });

  test('select for update: find-and-decrement in a transaction never oversells', async () => {
    const db = client.db('nodetxn');
    const STOCK = 40;
    await db.collection('stock').insertOne({ _id: 'widget', stock: STOCK });
    class SoldOut extends Error {}
    const buyer = async (me) => {
      const own = newClient();
      await own.connect();
      const odb = own.db('nodetxn');
      let bought = 0;
      try {
        for (;;) {
          const session = own.startSession();
          try {
            await session.withTransaction(async () => {
              const item = await odb.collection('stock').findOneAndUpdate({ _id: 'widget' },
                { $inc: { stock: -1 } }, { session, returnDocument: 'after' });
              if (item.stock < 0) throw new SoldOut();
              await odb.collection('orders').insertOne({ buyer: me, stockAfter: item.stock }, { session });
            });
            bought++;
          } catch (e) {
            if (e instanceof SoldOut) return bought;
            throw e;
          } finally {
            await session.endSession();
          }
        }
      } finally {
        await own.close();
      }
    };
    const bought = await Promise.all(Array.from({ length: 16 }, (_, i) => buyer(i + 1)));
    const item = await db.collection('stock').findOne({ _id: 'widget' });
    const after = (await db.collection('orders').find({}).toArray()).map((o) => o.stockAfter).sort((a, b) => a - b);
    assert.equal(item.stock, 0, 'the stock ends at exactly 0, never below');
    assert.equal(bought.reduce((a, b) => a + b, 0), STOCK, 'the buyers bought exactly the stock');
    assert.deepEqual(after, Array.from({ length: STOCK }, (_, i) => i), 'each unit was sold exactly once');
  });

  test('uncommitted writes are invisible outside, the transaction sees its own writes and one snapshot', async () => {
    const coll = client.db('nodetxn').collection('iso');
    await coll.insertMany([{ _id: 1, v: 0 }, { _id: 2, v: 0 }]);
    const session = client.startSession();
    try {
      session.startTransaction();
      const first = await coll.find({}, { session, sort: { _id: 1 } }).toArray();
      await coll.updateOne({ _id: 2 }, { $set: { v: 99 } });
      const again = await coll.find({}, { session, sort: { _id: 1 } }).toArray();
      assert.deepEqual(again, first, 'a later read in the transaction sees the same snapshot');
      await coll.updateOne({ _id: 1 }, { $set: { v: 1 } }, { session });
      await coll.insertOne({ _id: 3, v: 3 }, { session });
      assert.deepEqual(await coll.find({}, { session, sort: { _id: 1 } }).toArray(),
        [{ _id: 1, v: 1 }, { _id: 2, v: 0 }, { _id: 3, v: 3 }], 'the transaction sees its own writes');
      assert.deepEqual(await coll.find({}, { sort: { _id: 1 } }).toArray(),
        [{ _id: 1, v: 0 }, { _id: 2, v: 99 }], 'outside, the uncommitted writes are invisible');
      await session.commitTransaction();
    } finally {
      await session.endSession();
    }
    assert.deepEqual(await coll.find({}, { sort: { _id: 1 } }).toArray(),
      [{ _id: 1, v: 1 }, { _id: 2, v: 99 }, { _id: 3, v: 3 }], 'after commit everything is visible');
  });

  test('an aborted transaction leaves nothing behind', async () => {
    const coll = client.db('nodetxn').collection('aborted');
    await coll.insertOne({ _id: 1, v: 0 });
    const session = client.startSession();
    try {
      session.startTransaction();
      await coll.updateOne({ _id: 1 }, { $inc: { v: 1 } }, { session });
      await coll.insertOne({ _id: 2 }, { session });
      await session.abortTransaction();
    } finally {
      await session.endSession();
    }
    assert.deepEqual(await coll.find({}).toArray(), [{ _id: 1, v: 0 }], 'the aborted writes are discarded');
    await coll.updateOne({ _id: 1 }, { $inc: { v: 1 } });
    assert.deepEqual(await coll.findOne({ _id: 1 }), { _id: 1, v: 1 }, 'the aborted transaction released its lock');
  });

  test('a lock conflict is a WriteConflict labelled TransientTransactionError, and withTransaction retries it', async () => {
    const coll = client.db('nodetxn').collection('conflict');
    await coll.insertOne({ _id: 1, v: 0 });
    const holder = client.startSession();
    const other = client.startSession();
    try {
      holder.startTransaction();
      await coll.updateOne({ _id: 1 }, { $inc: { v: 1 } }, { session: holder });
      other.startTransaction();
      await coll.insertOne({ _id: 'other' }, { session: other });
      const err = await coll.updateOne({ _id: 1 }, { $inc: { v: 10 } }, { session: other }).then(
        () => null, (e) => e);
      assert.ok(err, 'the second writer of a locked document gets an error');
      assert.equal(err.code, 112, `the error is WriteConflict (got ${err.code} ${err.message})`);
      assert.ok(err.hasErrorLabel('TransientTransactionError'), 'the error carries TransientTransactionError');
      await other.abortTransaction();
      // withTransaction retries until the holder commits
      let attempts = 0;
      setTimeout(() => { holder.commitTransaction().catch(() => {}); }, 100);
      await other.withTransaction(async () => {
        attempts++;
        await coll.updateOne({ _id: 1 }, { $inc: { v: 10 } }, { session: other });
      });
      assert.ok(attempts > 1, `withTransaction retried after TransientTransactionError (${attempts} attempts)`);
    } finally {
      await holder.endSession();
      await other.endSession();
    }
    assert.deepEqual(await coll.findOne({ _id: 1 }), { _id: 1, v: 11 }, 'both increments were applied once');
  });

  test('read-then-write increments in withTransaction lose nothing: conflicts are retried (snapshot isolation)', async () => {
    const coll = client.db('nodetxn').collection('rmw');
    await coll.insertOne({ _id: 1, n: 0 });
    const WORKERS = 6;
    const EACH = 20;
    let attempts = 0;
    const worker = async () => {
      const own = newClient();
      await own.connect();
      const c = own.db('nodetxn').collection('rmw');
      try {
        for (let i = 0; i < EACH; i++) {
          const session = own.startSession();
          try {
            await session.withTransaction(async () => {
              attempts++;
              const { n } = await c.findOne({ _id: 1 }, { session });
              await c.updateOne({ _id: 1 }, { $set: { n: n + 1 } }, { session });
            });
          } finally {
            await session.endSession();
          }
        }
      } finally {
        await own.close();
      }
    };
    await Promise.all(Array.from({ length: WORKERS }, worker));
    assert.deepEqual(await coll.findOne({ _id: 1 }), { _id: 1, n: WORKERS * EACH },
      'every increment computed from a read in the transaction is applied exactly once');
    assert.ok(attempts > WORKERS * EACH, `some attempts met a WriteConflict and were retried (${attempts})`);
  });

  test('a transaction that read a document changed by a later commit gets WriteConflict at its write', async () => {
    const coll = client.db('nodetxn').collection('lost');
    await coll.insertOne({ _id: 1, n: 0 });
    const s1 = client.startSession();
    const s2 = client.startSession();
    try {
      s1.startTransaction();
      s2.startTransaction();
      const a = (await coll.findOne({ _id: 1 }, { session: s1 })).n;
      const b = (await coll.findOne({ _id: 1 }, { session: s2 })).n;
      await coll.updateOne({ _id: 1 }, { $set: { n: a + 1 } }, { session: s1 });
      await s1.commitTransaction();
      const err = await coll.updateOne({ _id: 1 }, { $set: { n: b + 1 } }, { session: s2 }).then(() => null, (e) => e);
      assert.ok(err && err.code === 112, `the second writer gets WriteConflict (got ${err && err.code})`);
      assert.ok(err.hasErrorLabel('TransientTransactionError'), 'labelled TransientTransactionError');
      await s2.abortTransaction();
    } finally {
      await s1.endSession();
      await s2.endSession();
    }
    assert.deepEqual(await coll.findOne({ _id: 1 }), { _id: 1, n: 1 }, 'one increment, not a lost one');
  });
});
