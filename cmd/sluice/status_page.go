package main

import (
	"context"
	"encoding/base64"
	"html/template"
	"maps"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/replica"
	"github.com/sluice-broker/sluice/server"
)

// The status page (GET / and /status on the admin address): a read-only
// view of the cluster as this process knows it, rendered on the server
// with html/template, no script and no external asset. Its sources are
// the ones /metrics and `sluice cluster status` use: the metastore view
// (brokers, partitions, placement, ISR, decommissioned brokers), the
// metadata quorum's status, and this broker's own replicas and groups
// (server.LocalReplicas, server.GroupsStatus). Replica lag is known only
// to a partition's leader, and group lag only where the partition is
// hosted (every partition on a read broker): another broker's page shows
// the rest.

type statusPage struct {
	NodeID     int32
	Roles      []string
	ClusterID  string
	Revision   uint64
	Rendered   string
	LeaseValid *bool // this broker's lease; nil on a meta-only node
	Meta       *metastore.Status
	MetaErr    string
	Brokers    []statusBroker
	Topics     []statusTopic
	Groups     []server.GroupStatus
	HasGroups  bool
}

type statusBroker struct {
	ID             int32
	Role           string
	Rack           string
	Endpoints      []string
	Registered     bool // holds a lease: the metastore leader expires a broker that stops renewing
	Incarnation    uint64
	ShuttingDown   bool
	Decommissioned bool
	Remaining      int // partitions still naming a decommissioned broker
	Self           bool
}

type statusTopic struct {
	Name       string
	ID         string
	Partitions []statusPartition
}

type statusPartition struct {
	ID          int32
	Leader      int32
	LeaderEpoch int32
	Voters      []int32
	Learners    []int32
	Target      []int32 // a move in progress
	ISR         []int32
	// Local is this broker's replica, nil when it hosts none.
	Local *server.ReplicaStatus
	// Lag is each other member's lag, reported when this broker leads
	// the partition.
	Lag []statusLag
}

type statusLag struct {
	Member  int32
	Learner bool
	replica.MemberLag
	Ms     int64
	InSync bool
}

func (a *adminServer) handleStatus(w http.ResponseWriter, r *http.Request) {
	cat := a.catalog.Load()
	cfg := a.cfg.Load()
	if cat == nil || cfg == nil {
		http.Error(w, "starting: not connected to the metastore yet", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	pg := statusPage{NodeID: cfg.NodeID, Roles: cfg.Roles, ClusterID: cat.ClusterID(), Revision: cat.Revision(),
		Rendered: time.Now().UTC().Format(time.RFC3339)}
	if l := a.lease.Load(); l != nil {
		v := l.Valid()
		pg.LeaseValid = &v
	}
	if st, err := cat.NodeStatus(ctx); err == nil {
		pg.Meta = &st
	} else {
		pg.MetaErr = err.Error()
	}
	dec := cat.Decommissioned()
	topics := cat.Topics()
	seen := map[int32]bool{}
	for _, b := range cat.Brokers() {
		sb := statusBroker{ID: b.ID, Role: string(b.Role), Rack: b.Rack, Registered: true, Incarnation: b.Incarnation,
			ShuttingDown: b.ShuttingDown, Decommissioned: slices.Contains(dec, b.ID), Self: b.ID == cfg.NodeID && (cfg.HasRole("write") || cfg.HasRole("read"))}
		for _, ep := range b.Endpoints {
			sb.Endpoints = append(sb.Endpoints, ep.Name+" ("+ep.View+") "+net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port))))
		}
		pg.Brokers = append(pg.Brokers, sb)
		seen[b.ID] = true
	}
	// Brokers the placement names that hold no lease (stopped, or their
	// lease lapsed), and decommissioned ones that are gone.
	for _, t := range topics {
		for _, p := range t.Partitions {
			for _, id := range slices.Concat(p.Voters, p.Learners, p.Target) {
				if !seen[id] {
					seen[id] = true
					pg.Brokers = append(pg.Brokers, statusBroker{ID: id, Role: "?", Decommissioned: slices.Contains(dec, id)})
				}
			}
		}
	}
	for _, id := range dec {
		if !seen[id] {
			seen[id] = true
			pg.Brokers = append(pg.Brokers, statusBroker{ID: id, Role: "?", Decommissioned: true})
		}
	}
	for i := range pg.Brokers {
		if pg.Brokers[i].Decommissioned {
			pg.Brokers[i].Remaining = len(cat.DecommissionProgress(pg.Brokers[i].ID))
		}
	}
	sort.Slice(pg.Brokers, func(i, j int) bool { return pg.Brokers[i].ID < pg.Brokers[j].ID })

	var local map[metastore.TopicID]map[int32]server.ReplicaStatus
	srv := a.kafka.Load()
	if srv != nil {
		local = srv.LocalReplicas()
		pg.Groups = srv.GroupsStatus(ctx)
		pg.HasGroups = cfg.HasRole("read")
	}
	for _, t := range topics {
		st := statusTopic{Name: t.Name, ID: topicIDString(t.ID)}
		for _, p := range t.Partitions {
			sp := statusPartition{ID: p.ID, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Voters: p.Voters, Learners: p.Learners,
				ISR: p.InSync()}
			if p.Reassigning() {
				sp.Target = p.Target
			}
			if rs, ok := local[t.ID][p.ID]; ok {
				sp.Local = &rs
				for _, id := range slices.Sorted(maps.Keys(rs.Lags)) {
					l := rs.Lags[id]
					sp.Lag = append(sp.Lag, statusLag{Member: id, Learner: slices.Contains(p.Learners, id), MemberLag: l,
						Ms: l.Time.Milliseconds(), InSync: slices.Contains(rs.InSync, id)})
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		pg.Topics = append(pg.Topics, st)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := statusTemplate.Execute(w, pg); err != nil {
		a.lg.Warn().Err(err).Msg("rendering the status page")
	}
}

// topicIDString prints a topic id as Kafka's tools do (Uuid.toString:
// URL-safe base64 without padding).
func topicIDString(id metastore.TopicID) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

var statusTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"ids": func(s []int32) string {
		out := ""
		for i, id := range s {
			if i > 0 {
				out += ","
			}
			out += strconv.Itoa(int(id))
		}
		return out
	},
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Sluice node {{.NodeID}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; font-variant-numeric: tabular-nums; }
th { background: #f3f3f3; }
.bad { color: #b00; font-weight: bold; } .ok { color: #070; } .muted { color: #777; }
</style>
</head>
<body>
<h1>Sluice node {{.NodeID}}</h1>
<p>Roles: <span id="roles">{{range $i, $r := .Roles}}{{if $i}}, {{end}}{{$r}}{{end}}</span>.
Cluster <span id="cluster-id">{{.ClusterID}}</span>, metastore revision <span id="revision">{{.Revision}}</span>, rendered {{.Rendered}}.
{{with .LeaseValid}}This broker's lease: {{if .}}<span id="lease" class="ok">valid</span>{{else}}<span id="lease" class="bad">not certainly valid</span>{{end}}.{{end}}</p>

<h2>Metadata quorum</h2>
{{with .Meta}}
<table id="meta">
<tr><th>Node</th><th>Address</th><th>Role</th></tr>
{{range $id, $addr := .Members}}<tr data-node="{{$id}}"><td>{{$id}}</td><td>{{$addr}}</td><td class="role">{{if eq $id $.Meta.Leader}}leader{{else}}member{{end}}</td></tr>
{{end}}</table>
<p>Term {{.Term}}, commit {{.Commit}}, applied {{.Applied}} (as node {{.ID}} answers).</p>
{{else}}<p class="bad">Metastore status unavailable: {{.MetaErr}}</p>{{end}}

<h2>Brokers</h2>
<table id="brokers">
<tr><th>Id</th><th>Role</th><th>Rack</th><th>Lease</th><th>State</th><th>Endpoints</th></tr>
{{range .Brokers}}<tr data-broker="{{.ID}}"><td>{{.ID}}{{if .Self}} (this node){{end}}</td><td class="role">{{.Role}}</td><td>{{.Rack}}</td>
<td class="lease">{{if .Registered}}<span class="ok">valid</span> (incarnation {{.Incarnation}}){{else}}<span class="bad">none</span> (not registered: stopped, or its lease lapsed){{end}}</td>
<td class="state">{{if .Decommissioned}}<span class="bad">decommissioned</span>, {{.Remaining}} partitions still on it{{else if .ShuttingDown}}<span class="bad">shutting down</span>{{else if .Registered}}serving{{else}}-{{end}}</td>
<td>{{range .Endpoints}}{{.}}<br>{{end}}</td></tr>
{{end}}</table>

<h2>Partitions</h2>
<p class="muted">Member lag, on the leader's page: the records (offsets) a member is behind the leader's log end, the time since it last had the leader's whole log, and the raft entries (batches) it is behind; in sync means caught up within replica.lag.time.max.ms.</p>
<table id="partitions">
<tr><th>Topic</th><th>Partition</th><th>Leader (epoch)</th><th>Voters</th><th>Learners</th><th>ISR</th><th>Moving to</th><th>Local replica (start / end / high watermark)</th><th>Member lag</th></tr>
{{range $t := .Topics}}{{range .Partitions}}<tr data-topic="{{$t.Name}}" data-partition="{{.ID}}">
<td title="topic id {{$t.ID}}">{{$t.Name}}</td><td>{{.ID}}</td><td>{{if lt .Leader 0}}<span class="leader bad">none</span>{{else}}<span class="leader">{{.Leader}}</span> ({{.LeaderEpoch}}){{end}}</td>
<td class="voters">{{ids .Voters}}</td><td class="learners">{{ids .Learners}}</td><td class="isr">{{ids .ISR}}</td><td class="target">{{ids .Target}}</td>
<td class="local">{{with .Local}}{{.LogStartOffset}} / {{.LogEndOffset}} / {{.HighWatermark}}{{if .Leader}} (leader){{end}}{{else}}<span class="muted">not hosted here</span>{{end}}</td>
<td class="lag">{{range .Lag}}<span data-member="{{.Member}}" data-entries="{{.Entries}}" data-records="{{.Offsets}}" data-ms="{{.Ms}}">{{.Member}}{{if .Learner}} (learner){{end}}: {{.Offsets}} records, {{.Ms}} ms ({{.Entries}} entries){{if not .InSync}} <span class="bad">out of sync</span>{{end}}</span><br>{{end}}</td></tr>
{{end}}{{end}}</table>

<h2>Consumer groups coordinated here</h2>
{{if not .HasGroups}}<p class="muted">This node coordinates no groups (read brokers do).</p>{{end}}
{{range .Groups}}<h3>{{.Name}}</h3>
<p>State <span class="group-state" data-group="{{.Name}}">{{.State}}</span> ({{.Type}}), {{.MemberCount}} members.{{if .Err}} <span class="bad">Offsets unavailable: {{.Err}}</span>{{end}}</p>
{{if .Members}}<table class="members" data-group="{{.Name}}"><tr><th>Member</th><th>Client id</th><th>Host</th></tr>
{{range .Members}}<tr><td>{{.MemberID}}</td><td>{{.ClientID}}</td><td>{{.ClientHost}}</td></tr>
{{end}}</table>{{end}}
<table class="group-offsets" data-group="{{.Name}}"><tr><th>Topic</th><th>Partition</th><th>Committed offset</th><th>Lag</th></tr>
{{range .Offsets}}<tr data-topic="{{.Topic}}" data-partition="{{.Partition}}"><td>{{.Topic}}</td><td>{{.Partition}}</td><td class="committed">{{.Committed}}</td><td class="lag">{{if .HasLag}}{{.Lag}}{{else}}-{{end}}</td></tr>
{{end}}</table>
{{end}}
</body>
</html>
`))
