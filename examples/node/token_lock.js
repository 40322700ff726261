#!/usr/bin/env node
// A minimal correct token lock on Debian's node-redis (4.x), as a
// lockjepsen client (docs/client-protocol.md, protocol 1).
//
//   lockjepsen test --client 'node examples/node/token_lock.js'
//   lockjepsen test --client 'node examples/node/token_lock.js --fenced' --workload counter --nemesis client-pause
//
// Acquire: SET key token NX PX ttl, valid until the time before the request
// + TTL - (TTL/100 + 2 ms); release: a Lua compare-and-delete; with
// --fenced, the grant and an INCR of a fencing counter in one Lua script.

// Debian installs node modules in /usr/share/nodejs, which the node first
// on PATH may not search.
if (!(process.env.NODE_PATH || '').split(':').includes('/usr/share/nodejs')) {
  process.env.NODE_PATH = ['/usr/share/nodejs', process.env.NODE_PATH].filter(Boolean).join(':');
  require('module').Module._initPaths();
}
const { createClient } = require('redis');
const readline = require('readline');

const RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";
const FENCED_ACQUIRE = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then " +
  "return redis.call('INCR', KEYS[1] .. ':fence') else return false end";
const fenced = process.argv.includes('--fenced');
const now = () => process.hrtime.bigint(); // CLOCK_MONOTONIC on Linux, as the harness reads
const drift = (ttl) => BigInt(ttl) * 10000n + 2000000n; // TTL/100 + 2 ms, in ns

class NotAcquired extends Error {}
class NotHeld extends Error {}

let client, prefix, counter = 0, timeoutMs = 250;

// withTimeout gives an answer of unknown outcome when Redis is slow:
// node-redis has no command timeout of its own.
function withTimeout(p) {
  let timer;
  const t = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error('timeout')), timeoutMs); });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

async function init(msg) {
  const [host, port] = msg.nodes[0].addr.split(/:(?=[^:]*$)/);
  prefix = msg.token_prefix;
  timeoutMs = msg.op_timeout_ms;
  // Reconnect at once and never queue commands while disconnected: a lost
  // connection is an unknown outcome, not a delayed one.
  client = createClient({ socket: { host, port: Number(port), connectTimeout: timeoutMs, reconnectStrategy: () => 10 },
    disableOfflineQueue: true });
  client.on('error', () => {});
  // node-redis's connect() waits for the first connection however long
  // the reconnects take, so it is given a second: the harness's probe of
  // a client's init_ok hands it a port nothing listens on (and would wait
  // its 30 s start timeout), and in a run an unreachable server is every
  // request's unknown outcome, not a client that never answers.
  const connected = client.connect().catch(() => {});
  await Promise.race([connected, new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
  return { type: 'init_ok', protocol: 1, name: 'node-redis token lock' + (fenced ? ' (fenced)' : ''),
    capabilities: fenced ? ['fence'] : [] };
}

async function acquire(msg) {
  const token = `${prefix}.${++counter}`;
  const start = now();
  let fence;
  if (fenced) {
    fence = await withTimeout(client.eval(FENCED_ACQUIRE, { keys: [msg.key], arguments: [token, String(msg.ttl_ms)] }));
    if (fence === null) throw new NotAcquired();
  } else if ((await withTimeout(client.set(msg.key, token, { NX: true, PX: msg.ttl_ms }))) !== 'OK') {
    throw new NotAcquired();
  }
  const reply = { type: 'ok', token, started_mono_ns: Number(start),
    valid_until_mono_ns: Number(start + BigInt(msg.ttl_ms) * 1000000n - drift(msg.ttl_ms)) };
  if (fenced) reply.fence = fence;
  return reply;
}

async function release(msg) {
  if ((await withTimeout(client.eval(RELEASE, { keys: [msg.key], arguments: [msg.token] }))) !== 1) throw new NotHeld();
  return { type: 'ok' };
}

async function answer(msg) {
  try {
    switch (msg.type) {
      case 'init': return await init(msg);
      case 'acquire': return await acquire(msg);
      case 'release': return await release(msg);
      default: return { type: 'fail', error: 'unknown request ' + msg.type };
    }
  } catch (e) {
    if (e instanceof NotAcquired) return { type: 'fail', error: 'not-acquired' };
    if (e instanceof NotHeld) return { type: 'fail', error: 'not-held' };
    return { type: 'info', error: String(e && e.message || e) }; // it may have happened
  }
}

// One request at a time, in order, as the harness sends them.
let queue = Promise.resolve();
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  if (!line.trim()) return;
  const msg = JSON.parse(line);
  queue = queue.then(async () => {
    const reply = await answer(msg);
    reply.in_reply_to = msg.id;
    process.stdout.write(JSON.stringify(reply) + '\n');
  });
}).on('close', () => queue.then(() => process.exit(0)));
