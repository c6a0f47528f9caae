package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-broker/sluice/metastore"
)

// Decommissioning through the admin address of any node (every node has
// a metastore client): the metastore moves the broker's replicas
// (metastore/decommission.go), the partitions' leaders carry the moves
// out, and the progress is the partitions that still name the broker.
//
//	POST   /brokers/{id}/decommission  mark it and start the moves
//	DELETE /brokers/{id}/decommission  recommission
//	GET    /brokers/{id}/decommission  progress

// decommissionStatus is the JSON of the endpoints (stable field names).
type decommissionStatus struct {
	Broker         int32                 `json:"broker"`
	Decommissioned bool                  `json:"decommissioned"`
	Registered     bool                  `json:"registered"`
	Remaining      []decommissionPending `json:"remaining"`
}

type decommissionPending struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Voter     bool   `json:"voter"`
	Learner   bool   `json:"learner"`
}

func (a *adminServer) brokerRoutes(mux *http.ServeMux, guard adminGuard) {
	mux.HandleFunc("POST /brokers/{id}/decommission", guard.wrap(a.handleDecommission))
	mux.HandleFunc("DELETE /brokers/{id}/decommission", guard.wrap(a.handleDecommission))
	mux.HandleFunc("GET /brokers/{id}/decommission", a.handleDecommission)
}

func (a *adminServer) handleDecommission(w http.ResponseWriter, r *http.Request) {
	cat := a.catalog.Load()
	if cat == nil {
		http.Error(w, "starting: not connected to the metastore yet", http.StatusServiceUnavailable)
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 32)
	if err != nil || id < 0 {
		http.Error(w, "bad broker id", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	switch r.Method {
	case http.MethodPost:
		err = cat.DecommissionBroker(ctx, int32(id))
	case http.MethodDelete:
		err = cat.RecommissionBroker(ctx, int32(id))
	}
	if err != nil {
		code := http.StatusConflict
		switch {
		case errors.Is(err, metastore.ErrUnknownBroker):
			code = http.StatusNotFound
		case errors.Is(err, metastore.ErrTimeout), errors.Is(err, metastore.ErrUnreachable), errors.Is(err, metastore.ErrNotLeader):
			code = http.StatusServiceUnavailable
		}
		http.Error(w, err.Error(), code)
		return
	}
	st := decommissionStatus{Broker: int32(id), Decommissioned: slices.Contains(cat.Decommissioned(), int32(id)), Remaining: []decommissionPending{}}
	for _, b := range cat.Brokers() {
		if b.ID == int32(id) {
			st.Registered = true
		}
	}
	for _, p := range cat.DecommissionProgress(int32(id)) {
		st.Remaining = append(st.Remaining, decommissionPending{Topic: p.Topic, Partition: p.Partition, Voter: p.Voter, Learner: p.Learner})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(st)
}

func brokerCommand() *cobra.Command {
	var admin, token string
	var asJSON bool
	cmd := &cobra.Command{Use: "broker", Short: "Decommission or recommission a broker (through any node's admin address)"}
	cmd.PersistentFlags().StringVar(&admin, "admin", "127.0.0.1:9644", "admin HTTP address of any node of the cluster")
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the final status as JSON")
	cmd.PersistentFlags().StringVar(&token, "token", os.Getenv("SLUICE_ADMIN_HTTP_TOKEN"), "bearer token of the admin port (admin.http.token; default $SLUICE_ADMIN_HTTP_TOKEN)")
	var wait time.Duration
	decommission := &cobra.Command{
		Use:   "decommission ID",
		Short: "Move every replica off broker ID and keep placement from choosing it; waits until it holds none",
		Long: "Marks the broker decommissioned in the metastore and moves each of its voter replicas to another write broker " +
			"(the one holding fewest) and each of its learner slots to another read broker; the partitions' leaders carry " +
			"the moves out as reassignments. Prints the partitions still on the broker every few seconds until none is " +
			"left (--wait 0 returns at once); then the broker can be stopped. Refused, changing nothing, when a replica " +
			"has nowhere to go. `sluice broker recommission ID` undoes the mark.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := brokerCall(cmd, http.MethodPost, admin, token, args[0])
			if err != nil {
				return err
			}
			deadline := time.Now().Add(wait)
			for len(st.Remaining) > 0 && time.Now().Before(deadline) {
				if !asJSON {
					fmt.Fprintf(cmd.OutOrStdout(), "broker %d: %d partitions still on it (%s)\n", st.Broker, len(st.Remaining), pendingText(st.Remaining))
				}
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(2 * time.Second):
				}
				if st, err = brokerCall(cmd, http.MethodGet, admin, token, args[0]); err != nil {
					return err
				}
			}
			if err := printDecommission(cmd.OutOrStdout(), st, asJSON); err != nil {
				return err
			}
			if len(st.Remaining) > 0 && wait > 0 {
				return fmt.Errorf("broker %d still holds %d partitions after %v; the moves go on (sluice broker status %d)", st.Broker, len(st.Remaining), wait, st.Broker)
			}
			return nil
		},
	}
	decommission.Flags().DurationVar(&wait, "wait", 10*time.Minute, "how long to wait for the replicas to move (0: do not wait)")
	recommission := &cobra.Command{
		Use:   "recommission ID",
		Short: "Undo a decommission: placement may choose the broker again (replicas do not move back by themselves)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := brokerCall(cmd, http.MethodDelete, admin, token, args[0])
			if err != nil {
				return err
			}
			return printDecommission(cmd.OutOrStdout(), st, asJSON)
		},
	}
	status := &cobra.Command{
		Use:   "status ID",
		Short: "Show whether broker ID is decommissioned and which partitions are still on it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := brokerCall(cmd, http.MethodGet, admin, token, args[0])
			if err != nil {
				return err
			}
			return printDecommission(cmd.OutOrStdout(), st, asJSON)
		},
	}
	cmd.AddCommand(decommission, recommission, status)
	return cmd
}

func brokerCall(cmd *cobra.Command, method, admin, token, id string) (decommissionStatus, error) {
	var st decommissionStatus
	base, hc, err := adminClient(admin, 40*time.Second)
	if err != nil {
		return st, err
	}
	req, err := http.NewRequestWithContext(cmd.Context(), method, base+"/brokers/"+url.PathEscape(id)+"/decommission", nil)
	if err != nil {
		return st, err
	}
	setAdminAuth(req, token)
	resp, err := hc.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return st, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("answer of %s: %w", admin, err)
	}
	return st, nil
}

func pendingText(ps []decommissionPending) string {
	var out []string
	for i, p := range ps {
		if i == 5 {
			out = append(out, fmt.Sprintf("and %d more", len(ps)-5))
			break
		}
		out = append(out, fmt.Sprintf("%s-%d", p.Topic, p.Partition))
	}
	return strings.Join(out, ", ")
}

func printDecommission(w io.Writer, st decommissionStatus, asJSON bool) error {
	if asJSON {
		return writeJSON(w, st)
	}
	state := "in service"
	if st.Decommissioned {
		state = "decommissioned"
	}
	reg := "registered"
	if !st.Registered {
		reg = "not registered"
	}
	fmt.Fprintf(w, "broker %d: %s, %s, %d partitions on it\n", st.Broker, state, reg, len(st.Remaining))
	for _, p := range st.Remaining {
		role := "voter"
		if p.Learner {
			role = "learner"
		}
		fmt.Fprintf(w, "  %s-%d (%s)\n", p.Topic, p.Partition, role)
	}
	if st.Decommissioned && len(st.Remaining) == 0 {
		fmt.Fprintf(w, "broker %d holds no replica: it can be stopped\n", st.Broker)
	}
	return nil
}
