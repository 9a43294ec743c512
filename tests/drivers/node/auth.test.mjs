// Authentication, authorization and TLS through the Node.js driver 7.x
// (docs/security.md): the driver's default login is SCRAM-SHA-256 with
// speculativeAuthenticate in the first hello; SCRAM-SHA-1; the same error
// for a wrong password and an unknown user; Unauthorized for a missing
// privilege; and TLS against a CA the test makes with the openssl tool.
// Run: node --test tests/drivers/node/auth.test.mjs   (ATOMDB_BIN picks the binary)

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { startAtomdb } from './atomdb-server.mjs';

const PW = 'node-Pa55';

function url(server, user, pw, extra = '') {
  const cred = user ? `${encodeURIComponent(user)}:${encodeURIComponent(pw)}@` : '';
  return `mongodb://${cred}127.0.0.1:${server.port}/?directConnection=true&serverSelectionTimeoutMS=5000${extra}`;
}

async function withClient(u, fn) {
  const c = new MongoClient(u);
  try { return await fn(c); } finally { await c.close(); }
}

describe('SCRAM through the Node driver', () => {
  let server;
  before(async () => {
    server = await startAtomdb({ args: ['--auth'] });
    await withClient(url(server), (c) => c.db('admin').command({
      createUser: 'admin', pwd: PW, roles: ['root'] }));
    await withClient(url(server, 'admin', PW), (c) => c.db('admin').command({
      createUser: 'reader', pwd: 'r', roles: [{ role: 'read', db: 'app' }] }));
  });
  after(async () => { assert.deepEqual(await server.stop(), []); });

  test('the default login is SCRAM-SHA-256 and speculative', async () => {
    await withClient(url(server, 'admin', PW), async (c) => {
      const st = await c.db('admin').command({ connectionStatus: 1 });
      assert.deepEqual(st.authInfo.authenticatedUsers, [{ user: 'admin', db: 'admin' }]);
      await c.db('app').collection('c').insertOne({ by: 'node' });
    });
    const lines = server.log().split('\n').filter((l) => l.includes('"Successfully authenticated"'));
    assert.ok(lines.some((l) => l.includes('"isSpeculative":true') && l.includes('"mechanism":"SCRAM-SHA-256"')),
      'a speculative SCRAM-SHA-256 login is logged:\n' + lines.join('\n'));
  });

  test('SCRAM-SHA-1 logs in too', async () => {
    await withClient(url(server, 'admin', PW, '&authMechanism=SCRAM-SHA-1'), async (c) => {
      const st = await c.db('admin').command({ connectionStatus: 1 });
      assert.equal(st.authInfo.authenticatedUsers[0].user, 'admin');
    });
  });

  test('a wrong password and an unknown user get the same AuthenticationFailed', async () => {
    const errs = [];
    for (const [u, p] of [['admin', 'wrong'], ['nobody', PW]]) {
      try {
        await withClient(url(server, u, p), (c) => c.db('admin').command({ ping: 1 }));
        errs.push(null);
      } catch (e) { errs.push([e.code, e.errmsg || e.message]); }
    }
    assert.equal(errs[0][0], 18, JSON.stringify(errs));
    assert.deepEqual(errs[0], errs[1]);
  });

  test('a missing privilege is Unauthorized 13', async () => {
    await withClient(url(server, 'reader', 'r', '&authSource=admin'), async (c) => {
      assert.ok(await c.db('app').collection('c').findOne({}));
      await assert.rejects(c.db('app').collection('c').insertOne({ x: 1 }),
        (e) => e.code === 13 && /not authorized on app to execute command/.test(e.message));
    });
  });

  test('without a login every data command needs authentication', async () => {
    await withClient(url(server), async (c) => {
      await assert.rejects(c.db('app').collection('c').findOne({}),
        (e) => e.code === 13 && /command find requires authentication/.test(e.message));
    });
  });
});

describe('TLS through the Node driver', () => {
  let server, dir;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'atomdb-node-tls-'));
    const ssl = (...a) => execFileSync('openssl', a, { cwd: dir, stdio: 'pipe' });
    ssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=node-test-ca');
    ssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost');
    writeFileSync(join(dir, 'ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
    ssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
      '-days', '2', '-out', 'server.crt', '-extfile', 'ext');
    writeFileSync(join(dir, 'server.pem'),
      readFileSync(join(dir, 'server.crt'), 'utf8') + readFileSync(join(dir, 'server.key'), 'utf8'));
    server = await startAtomdb({ args: ['--auth', '--tlsMode', 'requireTLS',
      '--tlsCertificateKeyFile', join(dir, 'server.pem')] });
  });
  after(async () => {
    assert.deepEqual(await server.stop(), []);
    rmSync(dir, { recursive: true, force: true });
  });

  test('a TLS client creates the first user and logs in; plaintext is refused', async () => {
    const tls = `&tls=true&tlsCAFile=${encodeURIComponent(join(dir, 'ca.pem'))}`;
    await withClient(url(server, null, null, tls), (c) => c.db('admin').command({
      createUser: 'admin', pwd: PW, roles: ['root'] }));
    await withClient(url(server, 'admin', PW, tls), async (c) => {
      await c.db('app').collection('t').insertOne({ over: 'tls' });
      assert.equal((await c.db('app').collection('t').findOne({})).over, 'tls');
    });
    await assert.rejects(withClient(url(server, 'admin', PW, '&serverSelectionTimeoutMS=1500'),
      (c) => c.db('admin').command({ ping: 1 })), 'plaintext is refused under requireTLS');
  });
});
