package server

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestTxnVerifyErrorCodes: the Produce code a partition's failed
// transaction check (KIP-890) gets, by request version, as Kafka 4.4's
// ReplicaManager and AddPartitionsToTxnManager give it: the coordinator's
// retriable answers are NOT_ENOUGH_REPLICAS, except CONCURRENT_TRANSACTIONS
// from Produce v12 (transaction version 2, Kafka's ADD_PARTITION
// operation, whose clients retry it), which is answered as it is; and
// TRANSACTION_ABORTABLE is INVALID_TXN_STATE only up to v10 (Kafka's
// DEFAULT_ERROR operation).
func TestTxnVerifyErrorCodes(t *testing.T) {
	for _, c := range []struct {
		code    int16
		version int16
		want    int16
	}{
		{kerr.ConcurrentTransactions.Code, 9, kerr.NotEnoughReplicas.Code},
		{kerr.ConcurrentTransactions.Code, 11, kerr.NotEnoughReplicas.Code},
		{kerr.ConcurrentTransactions.Code, 12, kerr.ConcurrentTransactions.Code},
		{kerr.ConcurrentTransactions.Code, 13, kerr.ConcurrentTransactions.Code},
		{kerr.CoordinatorNotAvailable.Code, 12, kerr.NotEnoughReplicas.Code},
		{kerr.NotCoordinator.Code, 13, kerr.NotEnoughReplicas.Code},
		{kerr.CoordinatorLoadInProgress.Code, 11, kerr.NotEnoughReplicas.Code},
		{kerr.ProducerFenced.Code, 12, kerr.InvalidProducerEpoch.Code},
		{kerr.TransactionAbortable.Code, 10, kerr.InvalidTxnState.Code},
		{kerr.TransactionAbortable.Code, 11, kerr.TransactionAbortable.Code},
		{kerr.TransactionAbortable.Code, 12, kerr.TransactionAbortable.Code},
		{kerr.InvalidProducerIDMapping.Code, 10, kerr.InvalidProducerIDMapping.Code},
	} {
		got := errorCode(verifyError(c.code, "id", c.version >= 12, c.version))
		if got != c.want {
			t.Errorf("%v at Produce v%d: %v, want %v", kerr.ErrorForCode(c.code), c.version, kerr.ErrorForCode(got), kerr.ErrorForCode(c.want))
		}
	}
}
