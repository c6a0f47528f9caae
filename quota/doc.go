// Package quota enforces Kafka's client quotas (KIP-13, KIP-55, KIP-124,
// KIP-599): producer_byte_rate, consumer_byte_rate, request_percentage and
// controller_mutation_rate, set per user, per client id, or per user and
// client id, with <default> entities, as Kafka's ClientQuotaManager does.
//
// Limits resolves which configured quota a client falls under, by Kafka's
// precedence:
//
//  1. user and client id
//  2. user and <default> client id
//  3. user
//  4. <default> user and client id
//  5. <default> user and <default> client id
//  6. <default> user
//  7. client id
//  8. <default> client id
//
// Clients that fall under the same configured entity share one usage
// sensor (a user quota is shared by all that user's client ids), keyed as
// Kafka keys its metric tags.
//
// A Manager measures usage as Kafka's windowed Rate does (quota.window.num
// samples of quota.window.size.seconds) and, when a recorded value takes
// the rate over the bound, answers the throttle time that brings it back
// under: (rate - bound) / bound * window. The controller mutation quota is
// a token bucket instead (Kafka's TokenBucket): a burst of window.num *
// window.size * rate partitions, refilled at rate, and a request may spend
// it below zero once; the throttle time is the time to refill to zero.
//
// The package knows nothing of the wire protocol: the server records what
// requests cost, sets throttle_time_ms and mutes connections (KIP-219).
package quota
