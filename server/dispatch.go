package server

import (
	"fmt"
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

func (s *Server) dispatch(rc *reqCtx, req kmsg.Request) (kmsg.Response, error) {
	h, ok := handlers[req.Key()]
	if !ok {
		return nil, errUnsupportedRequest{key: req.Key(), version: req.GetVersion()}
	}
	return h(s, rc, req)
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
