// Package raftlog adapts zerolog to etcd raft's Logger, for the two users
// of raft: the partition replicas and the metadata quorum. They differ only
// in where raft's Info goes (a broker hosts thousands of partition groups
// that all elect at start, so there it is debug) and in what Fatal does.
package raftlog

import (
	"fmt"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3"
)

// Logger is a raft.Logger writing to a zerolog.Logger.
type Logger struct {
	lg        zerolog.Logger
	infoLevel zerolog.Level
	exit      bool
}

var _ raft.Logger = (*Logger)(nil)

// Options say how raft's levels map onto zerolog.
type Options struct {
	// InfoAsDebug logs raft's Info and Infof (elections, term changes)
	// at debug level instead of info.
	InfoAsDebug bool
	// ExitOnFatal makes Fatal log at fatal level and exit the process
	// (zerolog's Fatal, exit status 1), as etcd does. Without it Fatal
	// panics like Panic, so a caller that recovers raft's panics stops
	// only the group that failed.
	ExitOnFatal bool
}

// New returns a raft.Logger over lg.
func New(lg zerolog.Logger, o Options) *Logger {
	l := &Logger{lg: lg, infoLevel: zerolog.InfoLevel, exit: o.ExitOnFatal}
	if o.InfoAsDebug {
		l.infoLevel = zerolog.DebugLevel
	}
	return l
}

// msg logs fmt.Sprint(v...) at e's level; a disabled level costs no
// formatting.
func msg(e *zerolog.Event, v []any) {
	if e.Enabled() {
		e.Msg(fmt.Sprint(v...))
	}
}

func (l *Logger) Debug(v ...any)              { msg(l.lg.Debug(), v) }
func (l *Logger) Debugf(f string, v ...any)   { l.lg.Debug().Msgf(f, v...) }
func (l *Logger) Info(v ...any)               { msg(l.lg.WithLevel(l.infoLevel), v) }
func (l *Logger) Infof(f string, v ...any)    { l.lg.WithLevel(l.infoLevel).Msgf(f, v...) }
func (l *Logger) Warning(v ...any)            { msg(l.lg.Warn(), v) }
func (l *Logger) Warningf(f string, v ...any) { l.lg.Warn().Msgf(f, v...) }
func (l *Logger) Error(v ...any)              { msg(l.lg.Error(), v) }
func (l *Logger) Errorf(f string, v ...any)   { l.lg.Error().Msgf(f, v...) }

func (l *Logger) Fatal(v ...any) {
	if l.exit {
		l.lg.Fatal().Msg(fmt.Sprint(v...))
	}
	l.Panic(v...)
}

func (l *Logger) Fatalf(f string, v ...any) {
	if l.exit {
		l.lg.Fatal().Msgf(f, v...)
	}
	l.Panicf(f, v...)
}

// Panic logs at error level, then panics with the message.
func (l *Logger) Panic(v ...any) {
	s := fmt.Sprint(v...)
	l.lg.Error().Msg(s)
	panic(s)
}

// Panicf logs at error level, then panics with the message.
func (l *Logger) Panicf(f string, v ...any) {
	s := fmt.Sprintf(f, v...)
	l.lg.Error().Msg(s)
	panic(s)
}
