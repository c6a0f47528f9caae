package raftlog

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func lastLine(t *testing.T, buf *bytes.Buffer) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("log line %q: %v", lines[len(lines)-1], err)
	}
	buf.Reset()
	return m
}

func TestLevels(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		info string
	}{
		{"metastore", Options{ExitOnFatal: true}, "info"},
		{"replica", Options{InfoAsDebug: true}, "debug"},
	} {
		var buf bytes.Buffer
		l := New(zerolog.New(&buf), tc.o)
		for _, c := range []struct {
			log   func()
			level string
		}{
			{func() { l.Debug("a", 1) }, "debug"},
			{func() { l.Debugf("a%d", 1) }, "debug"},
			{func() { l.Info("a", 1) }, tc.info},
			{func() { l.Infof("a%d", 1) }, tc.info},
			{func() { l.Warning("a", 1) }, "warn"},
			{func() { l.Warningf("a%d", 1) }, "warn"},
			{func() { l.Error("a", 1) }, "error"},
			{func() { l.Errorf("a%d", 1) }, "error"},
		} {
			c.log()
			m := lastLine(t, &buf)
			if m["level"] != c.level || m["message"] != "a1" && m["message"] != "a 1" {
				t.Errorf("%s: logged %v, want level %s", tc.name, m, c.level)
			}
		}
	}
}

type countingStringer struct{ n *int }

func (c countingStringer) String() string { *c.n++; return "x" }

// raft logs at debug and info in every group's hot paths; a disabled level
// must not format its arguments.
func TestDisabledLevelDoesNotFormat(t *testing.T) {
	var buf bytes.Buffer
	l := New(zerolog.New(&buf).Level(zerolog.WarnLevel), Options{InfoAsDebug: true})
	n := 0
	s := countingStringer{&n}
	l.Debug(s)
	l.Debugf("%v", s)
	l.Info(s)
	l.Infof("%v", s)
	if n != 0 || buf.Len() != 0 {
		t.Errorf("disabled levels formatted %d times and wrote %q", n, buf.String())
	}
	l.Warning(s)
	if n != 1 || buf.Len() == 0 {
		t.Errorf("Warning formatted %d times and wrote %q", n, buf.String())
	}
}

func TestPanicAndFatalWithoutExit(t *testing.T) {
	var buf bytes.Buffer
	l := New(zerolog.New(&buf), Options{})
	for _, f := range []func(){
		func() { l.Panic("boom ", 1) },
		func() { l.Panicf("boom %d", 1) },
		func() { l.Fatal("boom ", 1) },
		func() { l.Fatalf("boom %d", 1) },
	} {
		func() {
			defer func() {
				if r := recover(); r != "boom 1" {
					t.Errorf("recovered %v, want boom 1", r)
				}
			}()
			f()
			t.Error("did not panic")
		}()
		if m := lastLine(t, &buf); m["level"] != "error" || m["message"] != "boom 1" {
			t.Errorf("logged %v before panicking", m)
		}
	}
}

// With ExitOnFatal, Fatal exits the process with status 1 after logging at
// fatal level; the test runs it in a child process.
func TestFatalExits(t *testing.T) {
	if os.Getenv("RAFTLOG_FATAL_CHILD") == "1" {
		l := New(zerolog.New(os.Stderr), Options{ExitOnFatal: true})
		l.Fatalf("bye %d", 2)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFatalExits$", "-test.count=1")
	cmd.Env = append(os.Environ(), "RAFTLOG_FATAL_CHILD=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("child: %v, want exit status 1; stderr %q", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), `"level":"fatal"`) || !strings.Contains(stderr.String(), "bye 2") {
		t.Errorf("child logged %q", stderr.String())
	}
}
