package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/partition"
	"github.com/sluice-broker/sluice/protocol"
)

var errUnsupportedVersion = kerr.UnsupportedVersion.Code

// errUnsupportedRequest closes a connection that sent an API key or version
// we do not advertise, as Kafka does.
type errUnsupportedRequest struct{ key, version int16 }

func (e errUnsupportedRequest) Error() string {
	return fmt.Sprintf("unsupported request: api key %d (%s) version %d", e.key, apiName(e.key), e.version)
}

// errMalformed closes a connection whose request body did not decode.
type errMalformed struct {
	key, version int16
	err          error
}

func (e errMalformed) Error() string {
	return fmt.Sprintf("malformed %s v%d request: %v", apiName(e.key), e.version, e.err)
}

// errorCode is the one place internal errors become Kafka error codes.
func errorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, protocol.ErrCorruptBatch), errors.Is(err, partition.ErrCorrupt):
		return kerr.CorruptMessage.Code
	case errors.Is(err, protocol.ErrUnsupportedMagic):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, protocol.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, protocol.ErrUnsupportedCompression):
		return kerr.UnsupportedCompressionType.Code
	case errors.Is(err, partition.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, partition.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, partition.ErrCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code
	case errors.Is(err, errMessageTooLarge), errors.Is(err, protocol.ErrRecordsTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, errInvalidTimestamp):
		return kerr.InvalidTimestamp.Code
	case errors.Is(err, errTxnNotVerified):
		// The verification's own code where it carries one
		// (verifyError), else INVALID_TXN_STATE.
		if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
			return ke.Code
		}
		return kerr.InvalidTxnState.Code
	case errors.Is(err, errTxnVerifyUnavailable):
		// Retriable for every producer, as Kafka answers while the
		// transaction coordinator cannot be asked.
		return kerr.NotEnoughReplicas.Code
	case errors.Is(err, partition.ErrBatchTooLarge):
		// Kafka's RecordBatchTooLargeException: "message batch larger
		// than the configured segment size on the server".
		return kerr.RecordListTooLarge.Code
	case errors.Is(err, partition.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, partition.ErrPartitionClosed), errors.Is(err, partition.ErrClosed),
		errors.Is(err, partition.ErrNotLeader), errors.Is(err, partition.ErrReplicaClosed), errors.Is(err, partition.ErrDirInUse),
		errors.Is(err, errNotHosted):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, partition.ErrNotEnoughReplicas):
		return kerr.NotEnoughReplicas.Code
	case errors.Is(err, partition.ErrProposalDropped), errors.Is(err, partition.ErrBusy):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, partition.ErrSharedUnsupported):
		// Transactions on a shared-storage topic are not built: a
		// request Kafka would serve, refused as invalid here rather
		// than retried forever.
		return kerr.InvalidRequest.Code
	case errors.Is(err, partition.ErrReplicaFailed), errors.Is(err, partition.ErrLostCommitted), errors.Is(err, partition.ErrOldFormat), errors.Is(err, errNoSharedStorage):
		return kerr.KafkaStorageError.Code
	case errors.Is(err, metastore.ErrTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, metastore.ErrUnknownTopic):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, metastore.ErrInvalidPartitions):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, metastore.ErrPartitionLimit):
		return kerr.PolicyViolation.Code
	case errors.Is(err, metastore.ErrInvalidReplicationFactor):
		return kerr.InvalidReplicationFactor.Code
	case errors.Is(err, metastore.ErrNotLeader), errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, partition.ErrFatal), errors.Is(err, partition.ErrNoSpace):
		// Kafka answers a failed log directory with KAFKA_STORAGE_ERROR;
		// clients retry it, which after a full disk succeeds once space
		// is freed.
		return kerr.KafkaStorageError.Code
	default:
		return kerr.UnknownServerError.Code
	}
}

// errorMessage is the message that goes with errorCode where the protocol
// carries one.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

var (
	errMessageTooLarge  = errors.New("record batch is larger than max.message.bytes")
	errInvalidTimestamp = errors.New("timestamp is outside message.timestamp.before.max.ms / after.max.ms")
)
