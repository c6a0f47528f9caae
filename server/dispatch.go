package server

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handler is one Kafka API. It returns the response, or (nil, nil) after
// calling rc.later for a second stage, or (nil, nil) after rc.noResponse.
// A non-nil error closes the connection.
type handler func(s *Server, rc *reqCtx, req kmsg.Request) (kmsg.Response, error)

// handlers is filled by each API file's init, keyed by API key; the
// advertised versions live in protocol's table, and a test checks the two
// agree.
var handlers = map[int16]handler{}

func register(key int16, h handler) {
	if _, dup := handlers[key]; dup {
		panic(fmt.Sprintf("server: handler for key %d registered twice", key))
	}
	handlers[key] = h
}

func (s *Server) dispatch(rc *reqCtx, req kmsg.Request) (resp kmsg.Response, err error) {
	h, ok := handlers[req.Key()]
	if !ok {
		return nil, errUnsupportedRequest{key: req.Key(), version: req.GetVersion()}
	}
	defer rc.containPanic("request handler panicked: closing its connection", func(p any) {
		resp, err = nil, errHandlerPanic{key: req.Key(), p: p}
	})
	return h(s, rc, req)
}

// errHandlerPanic closes the connection whose request made a handler
// panic. Kafka answers an unexpected exception with UNKNOWN_SERVER_ERROR
// in the API's error response; a panic here may have left the request's
// own state half changed, so the connection goes, as a broken one would,
// and the client retries on a new one. Other connections are not
// touched.
type errHandlerPanic struct {
	key int16
	p   any
}

func (e errHandlerPanic) Error() string {
	return fmt.Sprintf("%s handler panicked: %v", apiName(e.key), e.p)
}

// containPanic, deferred, recovers a panic in the goroutine it is deferred
// in, while it works on rc: a first stage (dispatch), a second stage
// (reqCtx.contain), or a goroutine a handler started for some of the
// request's partitions (Produce, DeleteRecords). The panic is logged with
// its stack and msg, counted in sluice_request_panics_total under the
// request's API (Server.notePanic), and onPanic says what the request
// answers instead: for one partition's work, as Kafka's ReplicaManager
// does for an unexpected exception on a partition, UNKNOWN_SERVER_ERROR
// for that partition (errPartitionPanic), the rest of the request served.
// Every recovery in a request's goroutines is this one; only recover
// itself must be called here, in the deferred function.
func (rc *reqCtx) containPanic(msg string, onPanic func(p any)) {
	if p := recover(); p != nil {
		rc.conn.srv.notePanic(rc.conn.log, apiName(rc.hdr.Key), p, msg)
		onPanic(p)
	}
}

// containPanic is reqCtx.containPanic for a goroutine a handler started
// that outlives its request (the partitions a CreateTopics opens): counted
// under api, and onPanic (optional) runs after.
func (s *Server) containPanic(api, msg string, onPanic func(p any)) {
	if p := recover(); p != nil {
		s.notePanic(s.log, api, p, msg)
		if onPanic != nil {
			onPanic(p)
		}
	}
}

// notePanic logs a recovered panic with its stack and counts it.
func (s *Server) notePanic(log zerolog.Logger, api string, p any, msg string) {
	s.metrics.panics.WithLabelValues(api).Inc()
	log.Error().Str("api", api).Str("panic", fmt.Sprint(p)).Bytes("stack", debug.Stack()).Msg(msg)
}

// errPartitionPanic answers a partition whose work panicked:
// UNKNOWN_SERVER_ERROR (errorCode's default), as Kafka answers a
// partition whose append or delete threw an unexpected exception.
var errPartitionPanic = errors.New("unexpected error processing the partition (the broker logged it)")

// partitionFault, set by tests only, runs at the start of one partition's
// work in a request (api, and "stage1", "stage2" or "forward"): a panic
// injected there is one in the broker's own code.
var partitionFault func(api int16, stage, topic string, partition int32)

func faultAt(api int16, stage, topic string, partition int32) {
	if f := partitionFault; f != nil {
		f(api, stage, topic, partition)
	}
}

// noResponse marks a request that is never answered (acks=0 produce).
func (rc *reqCtx) noResponse() {
	rc.async = true
	rc.finish(nil)
}

var apiNames sync.Map

func apiName(key int16) string {
	if v, ok := apiNames.Load(key); ok {
		return v.(string)
	}
	name := kmsg.NameForKey(key)
	if name == "" {
		name = fmt.Sprintf("Unknown%d", key)
	}
	apiNames.Store(key, name)
	return name
}
