// The Node.js driver 7.x against atomdb's $jsonSchema and hashed indexes
// (issue 20): the manual's students validator and the errInfo mongod 7
// returns for it (MongoServerError.errInfo), validationAction warn,
// bypassDocumentValidation, the query operator, and a hashed index used
// for equality (explain). Expectations are mongod 7.0's.
// Run: node --test tests/drivers/node/jsonschema.test.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rejection, startAtomdbWithClient, stopAtomdbWithClient } from './atomdb-server.mjs';
import { Int32, Long, MongoServerError } from 'mongodb';

let atomdb;
let client;
let db;

before(async () => ({ atomdb, client, db } = await startAtomdbWithClient('node_schema')));
after(() => stopAtomdbWithClient(atomdb, client));

const students = {
  bsonType: 'object',
  title: 'Student Object Validation',
  required: ['address', 'major', 'name', 'year'],
  properties: {
    name: { bsonType: 'string', description: "'name' must be a string and is required" },
    year: { bsonType: 'int', minimum: 2017, maximum: 3017,
      description: "'year' must be an integer in [ 2017, 3017 ] and is required" },
    gpa: { bsonType: ['double'], description: "'gpa' must be a double if the field exists" },
  },
};

test('the manual\'s students example fails with its errInfo', async () => {
  const c = await db.createCollection('students', { validator: { $jsonSchema: students } });
  const e = await rejection(c.insertOne({ _id: 1, name: 'Alice', year: new Int32(2019),
    major: 'History', gpa: new Int32(3), address: { city: 'NYC', street: '33rd Street' } }), 'insert');
  assert.ok(e instanceof MongoServerError, String(e));
  assert.equal(e.code, 121);
  assert.deepEqual(e.errInfo, {
    failingDocumentId: 1,
    details: {
      operatorName: '$jsonSchema',
      title: 'Student Object Validation',
      schemaRulesNotSatisfied: [{
        operatorName: 'properties',
        propertiesNotSatisfied: [{
          propertyName: 'gpa',
          description: "'gpa' must be a double if the field exists",
          details: [{ operatorName: 'bsonType', specifiedAs: { bsonType: ['double'] },
            reason: 'type did not match', consideredValue: 3, consideredType: 'int' }],
        }],
      }],
    },
  });
  await c.insertOne({ _id: 2, name: 'Alice', year: new Int32(2019), major: 'History', gpa: 3.5,
    address: {} });
  await c.insertOne({ _id: 3 }, { bypassDocumentValidation: true });
  assert.equal(await c.countDocuments({}), 2);
  // the query operator finds the documents that do not satisfy the schema
  const bad = await c.find({ $nor: [{ $jsonSchema: students }] }).toArray();
  assert.deepEqual(bad.map((d) => d._id), [3]);
});

test('validationAction warn writes the document', async () => {
  const c = await db.createCollection('warned', {
    validator: { $jsonSchema: { required: ['x'] } }, validationAction: 'warn' });
  await c.insertOne({ _id: 'w' });
  assert.equal(await c.countDocuments({}), 1);
  const log = await db.admin().command({ getLog: 'global' });
  assert.ok(log.log.some((l) => l.includes('"id":20294')), 'log id 20294 written');
});

test('an unknown keyword is refused as mongod refuses it', async () => {
  const e = await rejection(db.createCollection('bad', { validator: { $jsonSchema: { foo: 1 } } }),
    'create');
  assert.equal(e.code, 9);
  assert.match(e.message, /Unknown \$jsonSchema keyword: foo/);
});

test('a hashed index serves equality', async () => {
  const c = db.collection('hashed');
  assert.equal(await c.createIndex({ email: 'hashed' }), 'email_hashed');
  await c.insertMany([...Array(50).keys()].map((i) => ({ _id: i, email: `u${i}@x.io` })));
  const plan = await c.find({ email: 'u7@x.io' }).explain();
  assert.equal(plan.queryPlanner.winningPlan.inputStage.stage, 'IXSCAN');
  assert.deepEqual(plan.queryPlanner.winningPlan.inputStage.keyPattern, { email: 'hashed' });
  assert.deepEqual((await c.find({ email: 'u7@x.io' }).toArray()).map((d) => d._id), [7]);
  const keys = await db.command({ find: 'hashed', filter: { _id: 0 }, hint: 'email_hashed',
    returnKey: true }, { promoteLongs: false });
  assert.ok(keys.cursor.firstBatch[0].email instanceof Long, 'the key is a NumberLong hash');
  const e = await rejection(c.insertOne({ email: ['a'] }), 'array in a hashed field');
  assert.equal(e.code, 16766);
});
