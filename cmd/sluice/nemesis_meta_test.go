package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// nemAdminToken guards the meta nodes' mutating admin endpoints when they
// listen on a namespace's address (a non-loopback admin.addr needs one).
const nemAdminToken = "nemesis-admin-token"

// metaChange is the meta-change fault: a meta node is removed from the
// metastore's quorum through the admin API and added back as a new, empty
// member (meta.join, a fresh data directory), and right after each change
// is proposed another meta node is killed (-9) and restarted 1 s later.
// The quorum must take both changes and end with the three meta nodes
// agreeing on the same three members and the same leader.
func (n *nemesis) metaChange(r int) (string, time.Duration) {
	x := 1 + n.rng.IntN(3) // removed, then added back
	var others []int
	for i := 1; i <= 3; i++ {
		if i != x {
			others = append(others, i)
		}
	}
	k1, k2 := others[n.rng.IntN(2)], others[n.rng.IntN(2)]
	d1 := time.Duration(n.rng.IntN(500)) * time.Millisecond
	d2 := time.Duration(n.rng.IntN(500)) * time.Millisecond
	meta := func(i int) *proc { return n.c.meta[i-1] }
	other := func(not int) int { // the other of others
		if others[0] == not {
			return others[1]
		}
		return others[0]
	}
	xp := meta(x)
	addr := configValue(n.t, xp.cfg, "meta.listen")

	// change runs the admin call on node via, kills node k d into it
	// and restarts it, then waits until the call, repeated when it
	// failed, finds the change made (done).
	change := func(what string, via, k int, d time.Duration, call func(*proc) error, done func() bool) {
		errc := make(chan error, 1)
		t0 := time.Now()
		go func() { errc <- call(meta(via)) }()
		time.Sleep(d)
		meta(k).kill()
		time.Sleep(time.Second)
		meta(k).start(n.t)
		err := <-errc
		took, first := time.Since(t0), err
		deadline := time.Now().Add(60 * time.Second)
		retries := 0
		for !done() {
			if time.Now().After(deadline) {
				n.fatalf("meta-change: %s not made within 60 s (last attempt: %v)", what, err)
			}
			time.Sleep(500 * time.Millisecond)
			if !done() {
				err = call(meta(via))
				retries++
			}
		}
		n.t.Logf("NEMESIS round %d: meta-change: %s through meta-%d, meta-%d killed %v into it: first call answered after %v (%v); %d retries; made %v after the first call",
			r, what, via, k, d, took.Round(time.Millisecond), first, retries, time.Since(t0).Round(time.Millisecond))
	}
	membersAre := func(want []int) func() bool {
		return func() bool {
			for _, i := range want {
				st, err := n.metaStatus(meta(i))
				if err != nil || !sameIntKeys(st.Members, want) {
					return false
				}
			}
			return true
		}
	}

	start := time.Now()
	change(fmt.Sprintf("removing meta-%d", x), other(k1), k1, d1,
		func(p *proc) error {
			err := n.metaAdmin(p, http.MethodDelete, "/meta/voters/"+strconv.Itoa(x), nil)
			if err != nil && strings.Contains(err.Error(), "unknown raft member") {
				return nil
			}
			return err
		},
		membersAre(others))
	// A removed node stops its metastore node once it applies its
	// removal (the process goes on; its operator stops it). One that
	// never learns the removal committed (the leader that committed it
	// no longer sends to it) keeps running raft, refused by the others
	// as a non-member.
	removed := fmt.Sprintf("meta-%d, not told of its removal within 10 s", x)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if b, err := os.ReadFile(xp.logf.Name()); err == nil && strings.Contains(string(b), "this node was removed from the metastore group") {
			removed = fmt.Sprintf("meta-%d applied its removal", x)
			break
		}
	}
	xp.kill()
	// Back as a new member: an empty data directory, waiting to be added.
	cfg, err := os.ReadFile(xp.cfg)
	if err != nil {
		n.fatalf("%v", err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(cfg), "\n"), "\n") {
		if v, ok := strings.CutPrefix(l, "data.dir: "); ok {
			v, _, _ = strings.Cut(v, "-rejoin")
			l = fmt.Sprintf("data.dir: %s-rejoin%d", v, r)
		}
		if l != "meta.join: true" {
			lines = append(lines, l)
		}
	}
	lines = append(lines, "meta.join: true")
	if err := os.WriteFile(xp.cfg, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		n.fatalf("%v", err)
	}
	xp.start(n.t)
	change(fmt.Sprintf("adding meta-%d back", x), other(k2), k2, d2,
		func(p *proc) error {
			err := n.metaAdmin(p, http.MethodPost, "/meta/voters", url.Values{"id": {strconv.Itoa(x)}, "addr": {addr}})
			if err != nil && strings.Contains(err.Error(), "raft member exists") {
				return nil
			}
			return err
		},
		membersAre([]int{1, 2, 3}))
	healed := time.Since(start)

	// The three agree: same members, same addresses, same leader, on two
	// polls a second apart (a member that stops after applying an entry
	// can still answer the first).
	want := map[string]string{}
	for i := 1; i <= 3; i++ {
		want[strconv.Itoa(i)] = configValue(n.t, meta(i).cfg, "meta.listen")
	}
	deadline := time.Now().Add(60 * time.Second)
	agreed := 0
	for {
		var got []string
		agree := true
		var leader uint64
		for i := 1; i <= 3; i++ {
			st, err := n.metaStatus(meta(i))
			if err != nil {
				agree = false
				got = append(got, fmt.Sprintf("meta-%d: %v", i, err))
				continue
			}
			got = append(got, fmt.Sprintf("meta-%d: leader %d members %v", i, st.Leader, st.Members))
			if st.Leader == 0 || (leader != 0 && st.Leader != leader) || !maps.Equal(st.Members, want) {
				agree = false
			}
			leader = st.Leader
		}
		if agree {
			if agreed++; agreed == 2 {
				break
			}
			time.Sleep(time.Second)
			continue
		}
		agreed = 0
		if time.Now().After(deadline) {
			n.failf("meta-change: the meta nodes disagree 60 s after the changes: %v (want members %v)", got, want)
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	return fmt.Sprintf("meta-%d removed with meta-%d killed %v into it (%s), added back empty with meta-%d killed %v into it",
		x, k1, d1, removed, k2, d2), healed
}

type nemMetaStatus struct {
	Leader  uint64            `json:"leader"`
	Members map[string]string `json:"members"`
}

func (n *nemesis) metaStatus(p *proc) (nemMetaStatus, error) {
	var st nemMetaStatus
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + p.admin + "/meta/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("meta status: %s", resp.Status)
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// metaAdmin calls a mutating admin endpoint of meta node p.
func (n *nemesis) metaAdmin(p *proc, method, path string, form url.Values) error {
	ctx, cancel := context.WithTimeout(n.ctx, 35*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+p.admin+path, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+nemAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func sameIntKeys(m map[string]string, want []int) bool {
	if len(m) != len(want) {
		return false
	}
	for _, i := range want {
		if _, ok := m[strconv.Itoa(i)]; !ok {
			return false
		}
	}
	return true
}
