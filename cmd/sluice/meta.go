package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-broker/sluice/metastore"
)

// Membership of the metadata quorum is changed through the admin HTTP
// endpoint of any meta node; `sluice meta` is its command-line front.

func (a *adminServer) handleAddVoter(w http.ResponseWriter, r *http.Request) {
	meta := a.meta.Load()
	if meta == nil {
		http.Error(w, "not a meta node", http.StatusNotFound)
		return
	}
	id, err := strconv.ParseUint(r.FormValue("id"), 10, 64)
	addr := r.FormValue("addr")
	if err != nil || id == 0 || addr == "" {
		http.Error(w, "want id (a new, non-zero node id) and addr (its meta.listen address)", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if err := meta.AddVoter(ctx, id, addr); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	fmt.Fprintf(w, "added voter %d at %s\n", id, addr)
}

func (a *adminServer) handleRemoveVoter(w http.ResponseWriter, r *http.Request) {
	meta := a.meta.Load()
	if meta == nil {
		http.Error(w, "not a meta node", http.StatusNotFound)
		return
	}
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		http.Error(w, "bad node id", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if err := meta.RemoveVoter(ctx, id); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	fmt.Fprintf(w, "removed voter %d\n", id)
}

func (a *adminServer) handleMetaStatus(w http.ResponseWriter, _ *http.Request) {
	meta := a.meta.Load()
	if meta == nil {
		http.Error(w, "not a meta node", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	st := meta.Status()
	json.NewEncoder(w).Encode(map[string]any{
		"id":      meta.ID(),
		"leader":  meta.Leader(),
		"members": meta.Members(),
		"term":    st.Term,
		"commit":  st.Commit,
	})
}

// handleMetaBackup streams a consistent copy of this meta node's database
// (metastore.Node.Backup).
func (a *adminServer) handleMetaBackup(w http.ResponseWriter, _ *http.Request) {
	meta := a.meta.Load()
	if meta == nil {
		http.Error(w, "not a meta node", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if _, err := meta.Backup(w); err != nil {
		// The status is sent; a cut stream fails the client's check.
		a.lg.Warn().Err(err).Msg("metastore backup")
	}
}

func metaCommand() *cobra.Command {
	var admin, token string
	cmd := &cobra.Command{Use: "meta", Short: "Change or show the metadata quorum (through a meta node's admin address)"}
	cmd.PersistentFlags().StringVar(&admin, "admin", "127.0.0.1:9644", "admin HTTP address of any meta node")
	cmd.PersistentFlags().StringVar(&token, "token", os.Getenv("SLUICE_ADMIN_HTTP_TOKEN"), "bearer token of the admin port (admin.http.token; default $SLUICE_ADMIN_HTTP_TOKEN)")
	add := &cobra.Command{
		Use:   "add-voter ID ADDR",
		Short: "Add a meta node (started with meta.join=true) as a voter",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return adminCall(cmd, http.MethodPost, admin, token, "/meta/voters", url.Values{"id": {args[0]}, "addr": {args[1]}})
		},
	}
	remove := &cobra.Command{
		Use:   "remove-voter ID",
		Short: "Remove a voter from the metadata quorum",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return adminCall(cmd, http.MethodDelete, admin, token, "/meta/voters/"+url.PathEscape(args[0]), nil)
		},
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "Show this meta node's id, the leader and the members",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return adminCall(cmd, http.MethodGet, admin, token, "/meta/status", nil)
		},
	}
	backup := &cobra.Command{
		Use:   "backup FILE",
		Short: "Copy the metastore's state from a meta node into FILE (consistent while it serves)",
		Long: "Downloads a copy of the meta node's database made in one read transaction, checks it " +
			"(complete, consistent, a started cluster) and only then renames it to FILE.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return metaBackup(cmd, admin, token, args[0])
		},
	}
	var cfgFile, from string
	restore := &cobra.Command{
		Use:   "restore --config FILE --from BACKUP",
		Short: "Create a meta node's database from a backup, offline, as a quorum of one",
		Long: "Writes data.dir/meta of the node the config file describes (it must not exist) from BACKUP: " +
			"the whole state, with the raft history reset so that this node (meta.id, at meta.listen) is the " +
			"only voter. Start it with sluice serve; add the other meta nodes, started empty with " +
			"meta.join=true, with sluice meta add-voter.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfgFile == "" || from == "" {
				return fmt.Errorf("restore needs --config and --from")
			}
			cfg, err := loadConfig(cfgFile, overrides{})
			if err != nil {
				return err
			}
			if !cfg.HasRole("meta") {
				return fmt.Errorf("%s: not a meta node (process.roles has no meta)", cfgFile)
			}
			dir := filepath.Join(cfg.DataDir, "meta")
			info, err := metastore.Restore(from, dir, cfg.MetaID, cfg.MetaListen)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored cluster %s at index %d (%d topics, %d brokers) into %s as meta node %d, the only voter\n",
				info.ClusterID, info.Applied, info.Topics, info.Brokers, dir, cfg.MetaID)
			return nil
		},
	}
	restore.Flags().StringVar(&cfgFile, "config", "", "the restored node's config file (data.dir, meta.id, meta.listen)")
	restore.Flags().StringVar(&from, "from", "", "backup file made by sluice meta backup")
	cmd.AddCommand(add, remove, status, backup, restore)
	return cmd
}

// metaBackup downloads the backup next to file, checks it and renames it.
func metaBackup(cmd *cobra.Command, admin, token, file string) error {
	base, hc, err := adminClient(admin, 10*time.Minute)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(cmd.Context(), http.MethodGet, base+"/meta/backup", nil)
	if err != nil {
		return err
	}
	setAdminAuth(req, token)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		out, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(out)))
	}
	tmp := file + ".part"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, resp.Body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("backup from %s: %w", admin, err)
	}
	info, err := metastore.ReadBackup(tmp)
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, file); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "backup of cluster %s at index %d (%d topics, %d brokers): %s, %d bytes\n",
		info.ClusterID, info.Applied, info.Topics, info.Brokers, file, n)
	return nil
}

// adminCall sends one request to a meta node's admin port, with the
// bearer token when one is given.
func adminCall(cmd *cobra.Command, method, admin, token, path string, form url.Values) error {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	base, hc, err := adminClient(admin, 40*time.Second)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(cmd.Context(), method, base+path, body)
	if err != nil {
		return err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	setAdminAuth(req, token)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(out)))
	}
	fmt.Fprint(cmd.OutOrStdout(), string(out))
	return nil
}
