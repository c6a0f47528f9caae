package server

import (
	"fmt"
	"runtime/debug"
	"sync"

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
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, rc.conn.handlerPanicked(req.Key(), p)
		}
	}()
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

// handlerPanicked logs a handler's panic with its stack, counts it, and
// returns the error that closes the connection.
func (c *conn) handlerPanicked(key int16, p any) error {
	c.srv.metrics.panics.WithLabelValues(apiName(key)).Inc()
	c.log.Error().Str("api", apiName(key)).Str("panic", fmt.Sprint(p)).Bytes("stack", debug.Stack()).Msg("request handler panicked: closing its connection")
	return errHandlerPanic{key: key, p: p}
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
