#!/usr/bin/env node
// kafkajs side of the routing test (driven by routing_kafkajs_test.go).
//
//   node routing.js produce BOOTSTRAPS TOPIC KEYS_AND_VALUES_FILE
//   node routing.js consume BOOTSTRAPS TOPIC GROUP COUNT PARTITIONS RACK WARM
//
// BOOTSTRAPS is comma-separated. produce sends every "key value" line of
// the file with acks=-1 in one request per partition batch. consume reads
// exactly COUNT records as the only member of GROUP (rackId RACK, "-" for
// none: kafkajs sends it in Fetch v11 and follows the preferred read
// replica), committing each record after processing it; with WARM=1 it
// prints "WARM" once it has committed records of all PARTITIONS, and
// "DONE" once it has committed all COUNT, before it disconnects, and after
// each waits for a line on stdin. Output: "V <value>" per record, then
// "RESULT OK" or "RESULT FAIL: ..." (exit 1). ROUTING_JS_DEBUG=1 turns on
// kafkajs's debug log (on stdout, which the Go side passes through).
'use strict'

const fs = require('fs')
const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')

function kafkaFor (bootstraps) {
  return new Kafka({
    clientId: 'sluice-routing-kafkajs',
    brokers: bootstraps.split(','),
    logLevel: process.env.ROUTING_JS_DEBUG ? logLevel.DEBUG : logLevel.ERROR,
    retry: { retries: 8 }
  })
}

async function produce (bootstraps, topic, file) {
  const messages = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map(line => {
    const sp = line.indexOf(' ')
    return { key: line.slice(0, sp), value: line.slice(sp + 1) }
  })
  const producer = kafkaFor(bootstraps).producer()
  await producer.connect()
  try {
    await producer.send({ topic, acks: -1, messages })
  } finally {
    await producer.disconnect()
  }
  console.log(`PRODUCED ${messages.length}`)
}

// A promise for the next line on stdin.
function nextLine () {
  const rl = readline.createInterface({ input: process.stdin })
  return new Promise(resolve => rl.once('line', line => { rl.close(); resolve(line) }))
}

async function consume (bootstraps, topic, group, count, partitions, rack, warm) {
  const consumer = kafkaFor(bootstraps).consumer({
    groupId: group,
    rackId: rack === '-' ? '' : rack,
    maxWaitTimeInMs: 300,
    heartbeatInterval: 500,
    sessionTimeout: 10000
  })
  let got = 0
  const seen = new Set()
  let warmed = false
  let finish
  const finished = new Promise((resolve, reject) => { finish = { resolve, reject } })
  const timer = setTimeout(() => finish.reject(new Error(`consumed ${got} of ${count} before the deadline`)), 120000)
  // A crashed consumer stops fetching for good (e.g. a codec it lacks):
  // fail now rather than at the deadline.
  consumer.on(consumer.events.CRASH, e => finish.reject(e.payload.error))
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        if (got >= count) return
        got++
        console.log(`V ${message.value.toString()}`)
        await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }])
        seen.add(partition)
        if (warm && !warmed && seen.size === partitions) {
          warmed = true
          console.log('WARM')
          await nextLine()
        }
        if (got === count) finish.resolve()
      }
    })
    await finished
    if (warm) {
      console.log('DONE')
      await nextLine()
    }
  } finally {
    clearTimeout(timer)
    await consumer.disconnect()
  }
}

async function main () {
  const [mode, ...args] = process.argv.slice(2)
  if (mode === 'produce' && args.length === 3) {
    await produce(...args)
  } else if (mode === 'consume' && args.length === 7) {
    const [bootstraps, topic, group, count, partitions, rack, warm] = args
    await consume(bootstraps, topic, group, Number(count), Number(partitions), rack, warm === '1')
  } else {
    throw new Error('usage: routing.js produce BOOTSTRAPS TOPIC FILE | consume BOOTSTRAPS TOPIC GROUP COUNT PARTITIONS RACK WARM')
  }
}

main().then(() => {
  console.log('RESULT OK')
  process.exit(0)
}, e => {
  console.error(e)
  console.log(`RESULT FAIL: ${e.name}: ${e.message}`.replace(/\n/g, ' '))
  process.exit(1)
})
