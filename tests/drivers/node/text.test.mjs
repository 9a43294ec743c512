// Text search (issue 20) through the Node.js MongoDB driver 7.x: a text
// index declared with createIndex (as a model layer syncs its indexes), $text
// searches from MongoDB's documentation (terms, phrases, negation, language,
// case sensitivity), textScore projection and sort, and mongod's errors.
// Run: node --test tests/drivers/node/text.test.mjs   (ATOMDB_BIN picks the binary)

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAtomdbWithClient, stopAtomdbWithClient } from './atomdb-server.mjs';
import { MongoServerError } from 'mongodb';

let atomdb;
let client;
let articles;

const ARTICLES = [
  { _id: 1, subject: 'coffee', author: 'xyz', views: 50 },
  { _id: 2, subject: 'Coffee Shopping', author: 'efg', views: 5 },
  { _id: 3, subject: 'Baking a cake', author: 'abc', views: 90 },
  { _id: 4, subject: 'baking', author: 'xyz', views: 100 },
  { _id: 5, subject: 'Café Con Leche', author: 'abc', views: 200 },
  { _id: 6, subject: 'Сырники', author: 'jkl', views: 80 },
  { _id: 7, subject: 'coffee and cream', author: 'efg', views: 10 },
  { _id: 8, subject: 'Cafe con Leche', author: 'xyz', views: 10 },
];

before(async () => {
  let db;
  ({ atomdb, client, db } = await startAtomdbWithClient('text'));
  articles = db.collection('articles');
  await articles.insertMany(ARTICLES);
  assert.equal(await articles.createIndex({ subject: 'text' }), 'subject_text');
});
after(() => stopAtomdbWithClient(atomdb, client));

async function search(text) {
  const docs = await articles.find({ $text: text }).toArray();
  return docs.map((d) => d._id).sort((a, b) => a - b);
}

test('the documentation examples find what mongod finds', async () => {
  assert.deepEqual(await search({ $search: 'coffee' }), [1, 2, 7]);
  assert.deepEqual(await search({ $search: 'bake coffee cake' }), [1, 2, 3, 4, 7]);
  assert.deepEqual(await search({ $search: '"coffee shop"' }), [2]);
  assert.deepEqual(await search({ $search: 'coffee -shop' }), [1, 7]);
  assert.deepEqual(await search({ $search: 'leche', $language: 'es' }), [5, 8]);
  assert.deepEqual(await search({ $search: 'Coffee', $caseSensitive: true }), [2]);
  assert.deepEqual(await search({ $search: 'CAFÉ', $diacriticSensitive: true }), [5]);
});

test('textScore in projection and sort', async () => {
  const docs = await articles.find({ $text: { $search: 'coffee' } },
    { projection: { score: { $meta: 'textScore' } }, sort: { score: { $meta: 'textScore' } } })
    .toArray();
  assert.deepEqual(docs.map((d) => [d._id, d.score]).slice(0, 1), [[1, 1]]);
  assert.deepEqual(docs.slice(1).map((d) => d.score), [0.75, 0.75]);
});

test('listIndexes shows the resolved text spec; a second text index is refused', async () => {
  const spec = (await articles.listIndexes().toArray()).find((i) => i.name === 'subject_text');
  assert.deepEqual(spec.key, { _fts: 'text', _ftsx: 1 });
  assert.deepEqual(spec.weights, { subject: 1 });
  assert.equal(spec.textIndexVersion, 3);
  await assert.rejects(articles.createIndex({ author: 'text' }),
    (e) => e instanceof MongoServerError && e.code === 85);
});

test('no text index: IndexNotFound 27', async () => {
  const plain = client.db('text').collection('plain');
  await plain.insertOne({ a: 'coffee' });
  await assert.rejects(plain.find({ $text: { $search: 'coffee' } }).toArray(),
    (e) => e instanceof MongoServerError && e.code === 27);
});
