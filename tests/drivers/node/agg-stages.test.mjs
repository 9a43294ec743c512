// $facet, $bucket, $bucketAuto, $sortByCount, $sample and $redact through
// the Node.js driver 7.x, on MongoDB's documentation examples (the $facet
// page's artwork, the $redact accounts), with mongod's error codes.
// Run: node --test tests/drivers/node/agg-stages.test.mjs   (ATOMDB_BIN picks the binary)

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient, Decimal128, MongoServerError } from 'mongodb';
import { startAtomdb } from './atomdb-server.mjs';

const D = (s) => Decimal128.fromString(s);

const ARTWORK = [
  { _id: 1, title: 'The Pillars of Society', year: 1926, price: D('199.99'),
    tags: ['painting', 'satire', 'Expressionism', 'caricature'] },
  { _id: 2, title: 'Melancholy III', year: 1902, price: D('280.00'), tags: ['woodcut', 'Expressionism'] },
  { _id: 3, title: 'Dancer', year: 1925, price: D('76.04'), tags: ['oil', 'Surrealism', 'painting'] },
  { _id: 4, title: 'The Great Wave off Kanagawa', price: D('167.30'), tags: ['woodblock', 'ukiyo-e'] },
  { _id: 5, title: 'The Persistence of Memory', year: 1931, price: D('483.00'),
    tags: ['Surrealism', 'painting', 'oil'] },
  { _id: 6, title: 'Composition VII', year: 1913, price: D('385.00'), tags: ['oil', 'painting', 'abstract'] },
  { _id: 7, title: 'The Scream', year: 1893, tags: ['Expressionism', 'painting', 'oil'] },
  { _id: 8, title: 'Blue Flower', year: 1918, price: D('118.42'), tags: ['abstract', 'painting'] },
];

// Decimal128 values compared by their text.
const plain = (v) => JSON.parse(JSON.stringify(v, (k, x) =>
  (x && x._bsontype === 'Decimal128') ? `D(${x.toString()})` : x));

describe('aggregation stages through the Node driver', () => {
  let server, client, db;
  before(async () => {
    server = await startAtomdb();
    client = new MongoClient(`mongodb://127.0.0.1:${server.port}/?directConnection=true`);
    db = client.db('node_agg_stages');
    await db.collection('artwork').insertMany(ARTWORK);
  });
  after(async () => {
    await client.close();
    assert.deepEqual(await server.stop(), []);
  });

  test('the $facet artwork example', async () => {
    const [doc] = await db.collection('artwork').aggregate([{ $facet: {
      categorizedByTags: [{ $unwind: '$tags' }, { $sortByCount: '$tags' }],
      categorizedByPrice: [
        { $match: { price: { $exists: 1 } } },
        { $bucket: { groupBy: '$price', boundaries: [0, 150, 200, 300, 400], default: 'Other',
          output: { count: { $sum: 1 }, titles: { $push: '$title' } } } },
      ],
      'categorizedByYears(Auto)': [{ $bucketAuto: { groupBy: '$year', buckets: 4 } }],
    } }]).toArray();
    assert.deepEqual(Object.keys(doc), ['categorizedByTags', 'categorizedByPrice', 'categorizedByYears(Auto)']);
    assert.deepEqual(doc.categorizedByTags.slice(0, 3),
      [{ _id: 'painting', count: 6 }, { _id: 'oil', count: 4 }, { _id: 'Expressionism', count: 3 }]);
    assert.equal(doc.categorizedByTags.length, 10);
    assert.deepEqual(plain(doc.categorizedByPrice), [
      { _id: 0, count: 2, titles: ['Dancer', 'Blue Flower'] },
      { _id: 150, count: 2, titles: ['The Pillars of Society', 'The Great Wave off Kanagawa'] },
      { _id: 200, count: 1, titles: ['Melancholy III'] },
      { _id: 300, count: 1, titles: ['Composition VII'] },
      { _id: 'Other', count: 1, titles: ['The Persistence of Memory'] },
    ]);
    assert.deepEqual(doc['categorizedByYears(Auto)'], [
      { _id: { min: null, max: 1902 }, count: 2 },
      { _id: { min: 1902, max: 1918 }, count: 2 },
      { _id: { min: 1918, max: 1926 }, count: 2 },
      { _id: { min: 1926, max: 1931 }, count: 2 },
    ]);
  });

  test('$sample returns distinct documents', async () => {
    const out = await db.collection('artwork').aggregate([{ $sample: { size: 5 } }]).toArray();
    assert.equal(new Set(out.map((d) => d._id)).size, 5);
  });

  test('$redact prunes a level-5 subdocument whole (accounts example)', async () => {
    const acc = db.collection('accounts');
    await acc.insertOne({ _id: 1, level: 1, acct_id: 'xyz123', status: 'A',
      cc: { level: 5, type: 'yy', shipping_addr: [{ level: 3, addr1: '987 XYZ Ave' }] } });
    const out = await acc.aggregate([{ $match: { status: 'A' } },
      { $redact: { $cond: { if: { $eq: ['$level', 5] }, then: '$$PRUNE', else: '$$DESCEND' } } }]).toArray();
    assert.deepEqual(out, [{ _id: 1, level: 1, acct_id: 'xyz123', status: 'A' }]);
  });

  test('mongod error codes', async () => {
    const code = async (pipeline) => {
      try { await db.collection('artwork').aggregate(pipeline).toArray(); } catch (e) {
        assert.ok(e instanceof MongoServerError); return e.code;
      }
      return 0;
    };
    assert.equal(await code([{ $facet: { a: [{ $out: 'x' }] } }]), 40600);
    assert.equal(await code([{ $bucket: { groupBy: '$year', boundaries: [1900, 1950] } }]), 40066);
    assert.equal(await code([{ $bucketAuto: { groupBy: '$year', buckets: 2, granularity: 'X' } }]), 40257);
    assert.equal(await code([{ $sample: { size: -1 } }]), 28747);
    assert.equal(await code([{ $redact: 1 }]), 17053);
  });
});
