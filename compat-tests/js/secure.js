#!/usr/bin/env node
// kafkajs over a secured listener, for the security matrix
// (security_matrix_test.go).
//
//   node secure.js BOOTSTRAP TOPIC CA scram USER PASSWORD   SASL_SSL, SCRAM-SHA-512
//   node secure.js BOOTSTRAP TOPIC CA mtls CERT KEY         SSL with a client certificate
//
// Produces 20 records to TOPIC (acks=all) and reads them back with a group
// consumer from the beginning (kafkajs has no standalone consumer). The
// last line is "RESULT OK" (exit 0) or "RESULT FAIL: reason" (exit 1).
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const COUNT = 20

async function main () {
  const [bootstrap, topic, ca, mode, a, b] = process.argv.slice(2)
  const ssl = { ca: [fs.readFileSync(ca)], rejectUnauthorized: true }
  const conf = { clientId: 'secure-js', brokers: [bootstrap], ssl, logLevel: logLevel.NOTHING }
  if (mode === 'scram') {
    conf.sasl = { mechanism: 'scram-sha-512', username: a, password: b }
  } else if (mode === 'mtls') {
    ssl.cert = fs.readFileSync(a)
    ssl.key = fs.readFileSync(b)
  } else {
    throw new Error('mode ' + mode + ': want scram or mtls')
  }
  const kafka = new Kafka(conf)
  const producer = kafka.producer()
  await producer.connect()
  const messages = []
  for (let i = 0; i < COUNT; i++) messages.push({ value: 'v' + i })
  await producer.send({ topic, acks: -1, messages })
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: 'secure-js-' + topic })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const got = []
  const done = new Promise((resolve) => {
    consumer.run({
      eachMessage: async ({ message }) => {
        got.push(message.value.toString())
        if (got.length >= COUNT) resolve()
      }
    })
  })
  await Promise.race([done, new Promise((resolve) => setTimeout(resolve, 60000))])
  await consumer.disconnect()
  for (let i = 0; i < COUNT; i++) {
    if (got[i] !== 'v' + i) throw new Error('read back ' + got.length + ' records; record ' + i + ' is ' + got[i])
  }
  console.log('CONSUMED ' + got.length)
}

main().then(() => { console.log('RESULT OK'); process.exit(0) },
  (e) => { console.log('RESULT FAIL: ' + (e && e.message ? e.message : e)); process.exit(1) })
