package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"time"
)

// runTCP measures the loopback TCP ceiling: tcp-sink accepts one connection
// and reads it to the end, tcp-source writes 1 MiB buffers into it for a
// while. Run them as two processes (pinned to different cores, as the broker
// and the generator are) and read the sink's JSON line.
func runTCP(mode string, args []string) error {
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:7070", "listen (sink) or connect (source) address; loopback only")
	dur := fs.Duration("duration", 4*time.Second, "how long the source writes (the sink gives up after 3x this)")
	bufSize := fs.Int("buf", 1<<20, "bytes per write or read call")
	fs.Parse(args)
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return errors.New("-addr must be a loopback address")
	}
	buf := make([]byte, *bufSize)
	switch mode {
	case "tcp-sink":
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			return err
		}
		defer ln.Close()
		ln.(*net.TCPListener).SetDeadline(time.Now().Add(3**dur + 10*time.Second))
		conn, err := ln.Accept()
		if err != nil {
			return err
		}
		defer conn.Close()
		conn.SetReadDeadline(time.Now().Add(3 * *dur))
		var total int64
		var first time.Time
		for {
			n, err := conn.Read(buf)
			if n > 0 && first.IsZero() {
				first = time.Now()
			}
			total += int64(n)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
		secs := time.Since(first).Seconds()
		out, _ := json.Marshal(map[string]float64{"bytes": float64(total), "seconds": secs, "mb_per_s": float64(total) / secs / 1e6})
		fmt.Println(string(out))
	case "tcp-source":
		var conn net.Conn
		for i := 0; ; i++ { // the sink may still be starting
			conn, err = net.Dial("tcp", *addr)
			if err == nil || i == 50 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return err
		}
		until := time.Now().Add(*dur)
		for time.Now().Before(until) {
			if _, err := conn.Write(buf); err != nil {
				return err
			}
		}
		return conn.Close()
	}
	return nil
}
