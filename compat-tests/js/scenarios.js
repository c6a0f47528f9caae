#!/usr/bin/env node
// Sluice compat scenarios for kafkajs (driven by js_test.go).
//
//   node scenarios.js GROUP BOOTSTRAP PREFIX [ARGS...]
//
// GROUP is basic, admin, group, write-codecs or read-codecs, as in
// python/scenarios.py; every scenario prints one line:
// RESULT <scenario> pass|fail|na <detail>.
//
// kafkajs has no standalone consumer: every read here is a group consumer
// (a fresh group id where the scenario wants none). It speaks only the
// non-flexible versions of each API. It ships gzip only; snappy comes from
// kafkajs-snappy and LZ4 from a small codec over lz4js (pure JavaScript, as
// the kafkajs-lz4 plugin needs an old native add-on);
// there is no ZSTD codec that builds on current Node (@kafkajs/zstd needs the
// native cppzst 2.0.6 add-on, whose node-gyp build fails on Node 20), so
// ZSTD is not expressible.
'use strict'

const crypto = require('crypto')
const { Kafka, CompressionTypes, CompressionCodecs, ConfigResourceTypes, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const lz4 = require('lz4js')

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
// lz4js writes one 4 MiB-block frame without the block-independence flag,
// which Kafka's Java client refuses ("Dependent block stream is
// unsupported"); a frame of a single block is independent, so set the flag
// and recompute the descriptor checksum.
const xxh32 = require('lz4js/xxh32.js')
function lz4Frame (buf) {
  if (buf.length > 4 << 20) throw new Error('lz4 codec: batches over 4 MiB are not supported here')
  const f = Buffer.from(lz4.compress(buf))
  f[4] |= 0x20
  f[6] = (xxh32.hash(0, f, 4, 2) >> 8) & 0xff
  return f
}
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  async compress (encoder) { return lz4Frame(encoder.buffer) },
  async decompress (buffer) { return Buffer.from(lz4.decompress(buffer)) }
})

const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP, snappy: CompressionTypes.Snappy, lz4: CompressionTypes.LZ4, zstd: CompressionTypes.ZSTD }
const CODEC_RECORDS = 50
const TS_BASE = 1700000000000
const CLIENT = 'kafkajs'
const ZSTD_NA = 'kafkajs ships no ZSTD codec; its plugin @kafkajs/zstd 0.1.1 needs the native cppzst 2.0.6 add-on, which does not build on Node 20'

function result (scenario, status, detail) {
  console.log(`RESULT ${scenario} ${status} ${String(detail || '').replace(/\n/g, ' ').slice(0, 400)}`)
}

class NA { constructor (why) { this.why = why } }

async function run (scenario, fn) {
  try {
    const d = await fn()
    if (d instanceof NA) result(scenario, 'na', d.why)
    else result(scenario, 'pass', d)
  } catch (e) {
    console.error(scenario, e)
    result(scenario, 'fail', `${e.name}: ${e.message}${e.type ? ' (' + e.type + ')' : ''}`)
  }
}

function check (cond, msg) { if (!cond) throw new Error(msg) }
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

// errorCode finds the Kafka error code in a kafkajs error and what it wraps.
function errorCode (e) {
  const seen = new Set()
  const walk = x => {
    if (!x || typeof x !== 'object' || seen.has(x)) return undefined
    seen.add(x)
    if (typeof x.code === 'number') return x.code
    for (const k of ['originalError', 'cause', 'error']) {
      const c = walk(x[k]); if (c !== undefined) return c
    }
    for (const y of x.errors || []) { const c = walk(y); if (c !== undefined) return c }
    return undefined
  }
  return walk(e)
}

function codecDigest (records) {
  const h = crypto.createHash('sha256')
  for (const r of records) {
    const hs = Object.entries(r.headers || {}).map(([k, v]) => `${k}=${v == null ? '' : v.toString()}`).join(',')
    h.update(Buffer.concat([r.key || Buffer.alloc(0), Buffer.from('\t'), r.value || Buffer.alloc(0), Buffer.from(`\t${hs}\n`)]))
  }
  return h.digest('hex')
}

let kafka
let groupSeq = 0

async function produce (topic, messages, { acks = -1, idempotent = false, compression = CompressionTypes.None } = {}) {
  const p = kafka.producer(idempotent ? { idempotent: true, maxInFlightRequests: 1 } : {})
  await p.connect()
  try {
    return await p.send({ topic, acks, compression, messages })
  } finally {
    await p.disconnect()
  }
}

// consume reads n records of one partition through a throw-away group.
// start: 'earliest', 'latest' or {offset}. onRunning runs once the consumer
// has fetched (so "latest" is resolved).
async function consume (topic, partition, start, n, { timeout = 20000, onRunning, readUncommitted = false } = {}) {
  const c = kafka.consumer({ groupId: `sluice-compat-js-${process.pid}-${groupSeq++}`, maxWaitTimeInMs: 200, heartbeatInterval: 500, readUncommitted })
  const out = []
  let fetched = false
  c.on(c.events.FETCH, () => { fetched = true })
  await c.connect()
  try {
    await c.subscribe({ topic, fromBeginning: start === 'earliest' })
    await c.run({
      autoCommit: false,
      eachMessage: async ({ partition: p, message }) => {
        if (p === partition) out.push({ offset: Number(message.offset), key: message.key, value: message.value, headers: message.headers, ts: Number(message.timestamp) })
      }
    })
    if (typeof start === 'object') c.seek({ topic, partition, offset: String(start.offset) })
    const deadline = Date.now() + timeout
    if (onRunning) {
      while (!fetched && Date.now() < deadline) await sleep(50)
      check(fetched, 'the consumer never fetched')
      await onRunning()
    }
    while (out.length < n && Date.now() < deadline) await sleep(50)
    return out
  } finally {
    await c.disconnect()
  }
}

async function basic (p) {
  const admin = kafka.admin()
  await admin.connect()
  await run('bootstrap-metadata', async () => {
    const cl = await admin.describeCluster()
    check(cl.brokers.length === 1, `brokers=${cl.brokers.length}`)
    const md = await admin.fetchTopicMetadata({ topics: [`${p}-meta`] })
    check(md.topics[0].partitions.length === 3, `${p}-meta has ${md.topics[0].partitions.length} partitions`)
  })
  const acks = (a, topic, idempotent) => async () => {
    const msgs = []
    for (let i = 0; i < 100; i++) msgs.push({ key: `k${i}`, value: `${topic}-${i}` })
    await produce(topic, msgs, { acks: a, idempotent })
  }
  await run('produce-acks0', acks(0, `${p}-acks0`))
  await run('produce-acks1', acks(1, `${p}-acks1`))
  await run('produce-acksall', acks(-1, `${p}-acksall`))
  await run('produce-idempotent', acks(-1, `${p}-idem`, true))

  await run('keys-nulls-headers-timestamps', async () => {
    const t = `${p}-fields`
    const want = [
      { key: 'k1', value: 'v1', headers: { h1: 'a', h2: 'b' }, timestamp: String(TS_BASE) },
      { key: 'k2', value: null, headers: {}, timestamp: String(TS_BASE + 1) },
      { key: null, value: 'v3', headers: { h3: '' }, timestamp: String(TS_BASE + 2) }
    ]
    await produce(t, want)
    const got = await consume(t, 0, 'earliest', 3)
    check(got.length === 3, `read ${got.length} records, want 3`)
    got.forEach((r, i) => {
      const w = want[i]
      const s = b => b == null ? null : b.toString()
      check(s(r.key) === w.key && s(r.value) === w.value && r.ts === Number(w.timestamp),
        `record ${i}: key=${s(r.key)} value=${s(r.value)} ts=${r.ts}, want ${JSON.stringify(w)}`)
      const gh = Object.fromEntries(Object.entries(r.headers || {}).map(([k, v]) => [k, s(v)]))
      check(JSON.stringify(gh) === JSON.stringify(w.headers), `record ${i}: headers ${JSON.stringify(gh)}`)
    })
  })

  const big = `${p}-big`
  await run('near-max-message-bytes', async () => {
    const v = 'n'.repeat(99000)
    await produce(big, [{ key: 'near', value: v }])
    const got = await consume(big, 0, 'earliest', 1)
    check(got.length === 1 && got[0].value.toString() === v, `read ${got.length} records`)
  })
  await run('error-record-too-large', async () => {
    try {
      await produce(big, [{ key: 'over', value: 'o'.repeat(101000) }])
    } catch (e) {
      const code = errorCode(e)
      check(code === 10, `error code ${code} (${e.message}), want 10 (MESSAGE_TOO_LARGE)`)
      return
    }
    throw new Error('a 101,000-byte record over max.message.bytes=100000 was accepted')
  })

  const cons = `${p}-cons`
  await run('consume-earliest', async () => {
    const got = await consume(cons, 0, 'earliest', 10)
    const vals = got.map(r => r.value.toString())
    check(JSON.stringify(vals) === JSON.stringify([...Array(10).keys()].map(i => `c-${i}`)), `read ${vals}`)
  })
  await run('consume-latest', async () => {
    const got = await consume(cons, 0, 'latest', 1, {
      onRunning: () => produce(cons, [{ value: 'after-latest', timestamp: String(TS_BASE + 100000) }])
    })
    check(got.length === 1 && got[0].value.toString() === 'after-latest' && got[0].offset === 10,
      `read ${JSON.stringify(got.map(r => [r.offset, r.value.toString()]))}`)
  })
  await run('consume-timestamp', async () => {
    const offs = await admin.fetchTopicOffsetsByTimestamp(cons, TS_BASE + 4500)
    const off = Number(offs.find(o => o.partition === 0).offset)
    check(off === 5, `offset for timestamp base+4500: ${off}, want 5`)
    const got = await consume(cons, 0, { offset: off }, 3)
    const vals = got.slice(0, 3).map(r => r.value.toString())
    check(JSON.stringify(vals) === '["c-5","c-6","c-7"]', `read ${vals}`)
  })
  await run('error-unknown-topic', async () => {
    try {
      await admin.fetchTopicMetadata({ topics: [`${p}-no-such-topic`] })
    } catch (e) {
      const code = errorCode(e)
      check(code === 3, `error code ${code} (${e.message}), want 3 (UNKNOWN_TOPIC_OR_PARTITION)`)
      return
    }
    throw new Error('metadata for a missing topic succeeded')
  })
  // PREFIX-txn (1 partition, created by the Go test): a transaction of
  // c-0..c-4 committed, one of a-0..a-4 aborted, one of c-5..c-9
  // committed (kafkajs' transactional producer: idempotent, one request
  // in flight); a read_committed consumer reads exactly c-0..c-9.
  await run('txn-commit-abort', async () => {
    const t = `${p}-txn`
    const prod = kafka.producer({ transactionalId: `${t}-tid`, idempotent: true, maxInFlightRequests: 1 })
    await prod.connect()
    try {
      for (const [vals, commit] of [[[0, 1, 2, 3, 4].map(i => `c-${i}`), true], [[0, 1, 2, 3, 4].map(i => `a-${i}`), false], [[5, 6, 7, 8, 9].map(i => `c-${i}`), true]]) {
        const txn = await prod.transaction()
        await txn.send({ topic: t, messages: vals.map(v => ({ value: v, partition: 0 })) })
        if (commit) await txn.commit()
        else await txn.abort()
      }
    } finally {
      await prod.disconnect()
    }
    const got = await consume(t, 0, 'earliest', 10, { readUncommitted: false })
    const vals = got.map(r => r.value.toString())
    check(JSON.stringify(vals) === JSON.stringify([...Array(10).keys()].map(i => `c-${i}`)), `read_committed read ${vals}, want c-0..c-9`)
  })
  // txn-offsets (the Go test's prepareTxn): read i-0..i-9 of PREFIX-txo-in
  // (through a throw-away group, as every read here), then a transaction
  // writes o-0..o-4 to PREFIX-txo-out, sends offset 5 for group
  // PREFIX-txo-g (transaction.sendOffsets: AddOffsetsToTxn and
  // TxnOffsetCommit) and commits; the next writes o-5..o-9 with offset 10
  // and aborts. The group's committed offset (admin.fetchOffsets) is 5
  // and a read_committed consumer reads o-0..o-4.
  await run('txn-offsets', async () => {
    const tin = `${p}-txo-in`; const tout = `${p}-txo-out`; const group = `${p}-txo-g`
    const input = (await consume(tin, 0, 'earliest', 10)).map(r => r.value.toString())
    check(JSON.stringify(input) === JSON.stringify([...Array(10).keys()].map(i => `i-${i}`)), `read ${input} from ${tin}, want i-0..i-9`)
    const prod = kafka.producer({ transactionalId: `${p}-txo-tid`, idempotent: true, maxInFlightRequests: 1 })
    await prod.connect()
    try {
      for (const [i, commit] of [[0, true], [1, false]]) {
        const batch = input.slice(5 * i, 5 * i + 5)
        const txn = await prod.transaction()
        await txn.send({ topic: tout, messages: batch.map(v => ({ value: v.replace(/^i-/, 'o-'), partition: 0 })) })
        await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic: tin, partitions: [{ partition: 0, offset: String(5 * i + 5) }] }] })
        if (commit) await txn.commit()
        else await txn.abort()
      }
    } finally {
      await prod.disconnect()
    }
    const offs = await admin.fetchOffsets({ groupId: group, topics: [tin] })
    const o = offs[0].partitions.find(x => x.partition === 0)
    check(o && o.offset === '5', `committed offset of ${tin}/0: ${JSON.stringify(offs)}, want 5`)
    const got = (await consume(tout, 0, 'earliest', 5)).map(r => r.value.toString())
    check(JSON.stringify(got) === '["o-0","o-1","o-2","o-3","o-4"]', `read_committed read ${got}, want o-0..o-4`)
  })
  // txn-fencing (prepareTxn): producer A (transactional id PREFIX-txf-tid)
  // writes f-a-0 in an open transaction; B with the same id begins a
  // transaction, fencing A (kafkajs' connect sends InitProducerId without
  // the transactional id; producer.transaction() sends it with the id);
  // A's commit fails with INVALID_PRODUCER_EPOCH (kafkajs sends EndTxn
  // v1, from before KIP-588's PRODUCER_FENCED, which the broker converts
  // as Kafka does); B writes f-b-0 and commits; read_committed reads
  // f-b-0 only.
  await run('txn-fencing', async () => {
    const t = `${p}-txf`
    const mk = () => kafka.producer({ transactionalId: `${p}-txf-tid`, idempotent: true, maxInFlightRequests: 1 })
    const a = mk(); const b = mk()
    await a.connect()
    try {
      const ta = await a.transaction()
      await ta.send({ topic: t, messages: [{ value: 'f-a-0', partition: 0 }] })
      await b.connect()
      const tb = await b.transaction()
      let err
      try {
        await ta.commit()
      } catch (e) {
        err = e
      }
      check(err && errorCode(err) === 47, `A's commit after B began: ${err ? err.name + ' ' + err.type + ' code ' + errorCode(err) : 'succeeded'}, want INVALID_PRODUCER_EPOCH (47)`)
      await tb.send({ topic: t, messages: [{ value: 'f-b-0', partition: 0 }] })
      await tb.commit()
    } finally {
      await a.disconnect()
      await b.disconnect()
    }
    const got = (await consume(t, 0, 'earliest', 1)).map(r => r.value.toString())
    check(JSON.stringify(got) === '["f-b-0"]', `read_committed read ${got}, want f-b-0`)
  })
  await admin.disconnect()
}

async function adminGroup (p) {
  const admin = kafka.admin()
  await admin.connect()
  const t = `${p}-adm`
  const partitions = async () => {
    const md = await admin.fetchTopicMetadata({ topics: [t] })
    return md.topics[0].partitions.length
  }
  const describe = async () => {
    const r = await admin.describeConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: t }], includeSynonyms: false })
    const res = r.resources[0]
    check(res.errorCode === 0, `describeConfigs: error ${res.errorCode}`)
    return Object.fromEntries(res.configEntries.map(e => [e.configName, e.configValue]))
  }
  await run('admin-create', async () => {
    const ok = await admin.createTopics({ topics: [{ topic: t, numPartitions: 2, replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: '3600000' }] }] })
    check(ok === true, `createTopics returned ${ok}`)
    check(await partitions() === 2, 'partitions after create')
    // kafkajs answers false (not an error) for TOPIC_ALREADY_EXISTS.
    const again = await admin.createTopics({ topics: [{ topic: t, numPartitions: 2, replicationFactor: 1 }] })
    check(again === false, `createTopics of an existing topic returned ${again}, want false (TOPIC_ALREADY_EXISTS)`)
  })
  await run('admin-describe-configs', async () => {
    const cfg = await describe()
    check(cfg['retention.ms'] === '3600000', `retention.ms=${cfg['retention.ms']}`)
    check('cleanup.policy' in cfg, 'no cleanup.policy')
  })
  await run('admin-alter-configs', async () => {
    // kafkajs has AlterConfigs only (no IncrementalAlterConfigs).
    await admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: t, configEntries: [{ name: 'retention.ms', value: '7200000' }] }] })
    const cfg = await describe()
    check(cfg['retention.ms'] === '7200000', `after alter retention.ms=${cfg['retention.ms']}`)
  })
  await run('admin-create-partitions', async () => {
    await admin.createPartitions({ topicPartitions: [{ topic: t, count: 4 }] })
    check(await partitions() === 4, 'partitions after create partitions')
  })
  await run('admin-delete', async () => {
    await admin.deleteTopics({ topics: [t], timeout: 10000 })
    const topics = await admin.listTopics()
    check(!topics.includes(t), 'topic still listed after delete')
  })
  await run('error-bad-config', async () => {
    try {
      await admin.createTopics({ topics: [{ topic: `${p}-bad`, numPartitions: 1, replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: 'soon' }] }] })
    } catch (e) {
      const code = errorCode(e)
      check(code === 40, `error code ${code} (${e.message}), want 40 (INVALID_CONFIG)`)
      return
    }
    throw new Error('retention.ms=soon was accepted')
  })
  await admin.disconnect()
}

function member (groupId, topic, log) {
  const c = kafka.consumer({ groupId, maxWaitTimeInMs: 200, heartbeatInterval: 500, sessionTimeout: 10000, rebalanceTimeout: 15000 })
  c.assigned = []
  c.on(c.events.GROUP_JOIN, e => { c.assigned = (e.payload.memberAssignment[topic] || []).slice().sort() })
  c.start = async (autoCommit) => {
    await c.connect()
    await c.subscribe({ topic, fromBeginning: true })
    await c.run({ autoCommit, eachMessage: async ({ partition, message }) => { log.push({ partition, offset: Number(message.offset), value: message.value.toString() }) } })
  }
  return c
}

async function groups (p) {
  const t = `${p}-grp`
  await run('group-commit-resume', async () => {
    const g = `${p}-g1`
    let log = []
    let m = member(g, t, log)
    await m.start(false)
    let deadline = Date.now() + 30000
    while (log.length < 40 && Date.now() < deadline) await sleep(50)
    check(log.length === 40, `first member read ${log.length} of 40`)
    const next = {}
    for (const r of log) next[r.partition] = Math.max(next[r.partition] || 0, r.offset + 1)
    await m.commitOffsets(Object.entries(next).map(([partition, offset]) => ({ topic: t, partition: Number(partition), offset: String(offset) })))
    await m.disconnect()
    await produce(t, [0, 1, 2, 3].map(i => ({ key: 'k', value: `after-${i}`, partition: i })))
    log = []
    m = member(g, t, log)
    await m.start(false)
    deadline = Date.now() + 30000
    while (log.length < 4 && Date.now() < deadline) await sleep(50)
    await sleep(1500)
    await m.disconnect()
    const vals = log.map(r => r.value).sort()
    check(JSON.stringify(vals) === JSON.stringify(['after-0', 'after-1', 'after-2', 'after-3']), `resumed member read ${vals.slice(0, 8)}`)
  })
  await run('group-rebalance', async () => {
    const g = `${p}-g2`
    const log = []
    const a = member(g, t, log)
    await a.start(true)
    const waitFor = async (what, cond, ms) => {
      const deadline = Date.now() + ms
      while (!cond() && Date.now() < deadline) await sleep(50)
      check(cond(), what)
    }
    const all = x => JSON.stringify(x) === '[0,1,2,3]'
    await waitFor(`single member holds ${a.assigned}`, () => all(a.assigned), 30000)
    const b = member(g, t, log)
    await b.start(true)
    await waitFor('after join', () => a.assigned.length === 2 && b.assigned.length === 2 && all([...a.assigned, ...b.assigned].sort()), 40000)
    await b.disconnect()
    await waitFor(`after leave: ${a.assigned}`, () => all(a.assigned), 30000)
    await a.disconnect()
  })
}

function codecMessages (codec) {
  const out = []
  for (let i = 0; i < CODEC_RECORDS; i++) {
    out.push({ key: `k-${i}`, value: `${CLIENT}/${codec}/${i}/` + 'abcdefghij'.repeat(20), headers: { h: codec } })
  }
  return out
}

async function writeCodecs (p) {
  for (const codec of Object.keys(CODECS)) {
    await run(`write-${codec}`, async () => {
      if (codec === 'zstd') return new NA(ZSTD_NA)
      await produce(`${p}-${codec}`, codecMessages(codec), { compression: CODECS[codec] })
    })
  }
}

async function readCodecs (topics) {
  for (const t of topics) {
    await run(`read ${t}`, async () => {
      if (t.endsWith('-zstd')) return new NA(ZSTD_NA)
      const got = await consume(t, 0, 'earliest', CODEC_RECORDS)
      check(got.length === CODEC_RECORDS, `read ${got.length} of ${CODEC_RECORDS}`)
      return codecDigest(got)
    })
  }
}

async function main () {
  const [group, bootstrap, prefix, ...rest] = process.argv.slice(2)
  kafka = new Kafka({ clientId: 'sluice-compat-kafkajs', brokers: [bootstrap], logLevel: logLevel.NOTHING, retry: { retries: 3 } })
  console.log(`VERSION kafkajs ${require('kafkajs/package.json').version}`)
  switch (group) {
    case 'basic': await basic(prefix); break
    case 'admin': await adminGroup(prefix); break
    case 'group': await groups(prefix); break
    case 'write-codecs': await writeCodecs(prefix); break
    case 'read-codecs': await readCodecs(rest); break
    default: throw new Error(`unknown group ${group}`)
  }
}

main().then(() => process.exit(0), e => { console.error(e); process.exit(1) })
