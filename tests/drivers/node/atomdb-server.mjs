// Starting and stopping a real atomdb for the Node driver tests: the binary
// from ATOMDB_BIN (default <repo>/build/atomdb) on a free 127.0.0.1 port with
// its own --dbpath. stop() reports a crash, an unexpected exit code or a
// sanitizer report in the server's stderr, so a test can fail on them.
// startAtomdbWithClient()/stopAtomdbWithClient(): one server and one
// connected client shared by a whole test file; rejection(): an error a
// test expects.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, openSync, readFileSync, closeSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MongoClient } from 'mongodb';

const here = dirname(fileURLToPath(import.meta.url));
export const repo = resolve(here, '..', '..', '..');
export const atomdbBin = process.env.ATOMDB_BIN || join(repo, 'build', 'atomdb');

const SANITIZER_MARKERS = ['ERROR: AddressSanitizer', 'ERROR: LeakSanitizer', 'runtime error:'];

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A TCP port on 127.0.0.1 that nothing listens on right now.
export function freePort() {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.on('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => res(port));
    });
  });
}

function canConnect(port) {
  return new Promise((res) => {
    const s = connect({ host: '127.0.0.1', port }, () => { s.destroy(); res(true); });
    s.on('error', () => res(false));
  });
}

// Starts atomdb. Options: `dir` reuses a data directory (a restart), `port`
// a port (a restart where clients wait), `keep` leaves the directory in
// place at stop() (remove it with cleanup()), `args` adds command-line
// flags (['--auth']).
// Returns { port, dir, uri, alive(), stop({ kill }), cleanup() }; stop()
// resolves to the list of problems found (empty when all went well).
export async function startAtomdb({ dir, keep = false, args = [], port } = {}) {
  const ownDir = !dir;
  dir = dir || mkdtempSync(join(tmpdir(), 'atomdb-node-'));
  const logPath = join(dir, `atomdb-${Date.now()}.stderr`);
  const logFd = openSync(logPath, 'a');
  port = port || await freePort();
  const child = spawn(atomdbBin, [
    '--bind', '127.0.0.1', '--port', String(port), '--dbpath', join(dir, 'data'),
    '--replSet', 'rs0', '--advertise', `127.0.0.1:${port}`, '--log-level', 'debug', ...args,
  ], { stdio: ['ignore', logFd, logFd] });
  let exit = null;
  const exited = new Promise((res) => child.on('exit', (code, signal) => { exit = { code, signal }; res(); }));
  const log = () => readFileSync(logPath, 'utf8');
  const deadline = Date.now() + 30000;
  while (!(await canConnect(port))) {
    if (exit) throw new Error(`atomdb exited during start-up (${JSON.stringify(exit)}):\n${log()}`);
    if (Date.now() > deadline) throw new Error(`atomdb did not accept connections in 30s:\n${log()}`);
    await sleep(50);
  }
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  return {
    port,
    dir,
    uri: `mongodb://127.0.0.1:${port}/?directConnection=true`,
    alive: () => exit === null,
    log,
    cleanup,
    async stop({ kill = false } = {}) {
      const problems = [];
      if (exit) problems.push(`atomdb exited on its own before the test stopped it: ${JSON.stringify(exit)}`);
      else {
        child.kill(kill ? 'SIGKILL' : 'SIGTERM');
        // an unref'd timer, so that a clean exit does not keep node waiting
        const timeout = new Promise((r) => setTimeout(r, 20000).unref());
        const timedOut = await Promise.race([exited.then(() => false), timeout.then(() => true)]);
        if (timedOut) { problems.push('atomdb did not exit within 20s of SIGTERM; killed'); child.kill('SIGKILL'); await exited; }
        else if (!kill && exit.code !== 0) problems.push(`atomdb exited with ${JSON.stringify(exit)} after SIGTERM (expected code 0)`);
      }
      closeSync(logFd);
      const text = log();
      const marker = SANITIZER_MARKERS.find((m) => text.includes(m));
      if (marker) problems.push(`sanitizer report in atomdb's stderr (${marker})`);
      if (problems.length) problems.push('--- atomdb stderr (tail) ---\n' + text.split('\n').slice(-80).join('\n'));
      if (ownDir && !keep) cleanup();
      return problems;
    },
  };
}

// Starts atomdb and connects a directConnection client to it, for a file's
// before(). Returns { atomdb, client, db } (db: the database named `dbName`).
// The client's server selection is short: if the server dies, the remaining
// tests fail fast instead of each waiting 30 s.
export async function startAtomdbWithClient(dbName) {
  const atomdb = await startAtomdb();
  const client = new MongoClient(atomdb.uri, { serverSelectionTimeoutMS: 3000 });
  await client.connect();
  return { atomdb, client, db: client.db(dbName) };
}

// For the file's after(): closes the client, stops atomdb and fails on
// anything stop() found (a crash, an exit code, a sanitizer report).
export async function stopAtomdbWithClient(atomdb, client) {
  await client?.close();
  const problems = await atomdb.stop();
  assert.deepEqual(problems, [], 'atomdb stopped cleanly with no sanitizer report');
}

// Resolves to the error `promise` rejects with; fails the test, naming
// `what`, when it resolves instead.
export async function rejection(promise, what = 'the operation') {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail(`${what}: expected an error, the operation succeeded`);
}

// A command reply without $clusterTime and operationTime, which every reply
// of a replica-set member carries; throws unless both are there.
export function withoutClusterTime(reply) {
  const { $clusterTime, operationTime, ...rest } = reply;
  if (!$clusterTime || !$clusterTime.clusterTime || !$clusterTime.signature || !operationTime)
    throw new Error(`the reply lacks $clusterTime / operationTime: ${JSON.stringify(Object.keys(reply))}`);
  return rest;
}
