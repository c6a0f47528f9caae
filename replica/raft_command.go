package replica

import (
	"bytes"
	"encoding/binary"
)

// Raft-only command entries: normal raft entries whose data is not a record
// batch but a command every replica applies when the entry commits, in log
// order. Like raft's own entries (an empty entry, a configuration change)
// they are no data and take no Kafka offset: the storage keeps their record
// (kindCommand) in raft.index and their bytes in raft.confs, never a batch
// in the log, so clients see no trace of them. A command's data is a 4-byte
// tag and its arguments, 12 bytes in all, so it can never be taken for a
// record batch (at least 61 bytes).
//
// One command exists: DeleteRecords, tag "SLDR", then the new log start
// offset, 8 bytes big endian (Replica.DeleteRecords).

var deleteRecordsTag = []byte("SLDR")

const commandSize = 12

// deleteRecordsCmd is the data of the entry that moves the log start of
// every replica to offset.
func deleteRecordsCmd(offset int64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), deleteRecordsTag...), uint64(offset))
}

// isCommand says whether a normal entry's data is a command.
func isCommand(data []byte) bool {
	return len(data) == commandSize && bytes.HasPrefix(data, deleteRecordsTag)
}

// deleteRecordsOf returns the offset a DeleteRecords command asks for.
func deleteRecordsOf(data []byte) (int64, bool) {
	if !isCommand(data) {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(data[len(deleteRecordsTag):])), true
}
