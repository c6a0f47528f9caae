// Package log stores one Kafka partition per directory in the Kafka on-disk
// layout. The full contract is written below once the package settles.
package log
