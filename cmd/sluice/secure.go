package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/internal/sasl"
	"github.com/sluice-broker/sluice/internal/tlsconfig"
	"github.com/sluice-broker/sluice/metastore"
)

// devTLSDir is where `sluice dev --secure` keeps its CA and server
// certificate, under the data directory.
const devTLSDir = "tls"

// setDevSecure makes `sluice dev --secure` one SASL_SSL listener (same
// address as plain `sluice dev`) with SCRAM-SHA-256/512, its key store the
// generated server certificate, and authorization on where the config has
// it.
func setDevSecure(v *viper.Viper, o overrides, defaults map[string]any) {
	addr := "127.0.0.1:9092"
	if o.kafkaAddr != "" {
		addr = o.kafkaAddr
	}
	if o.listeners == "" {
		v.Set("listeners", configs.ProtocolSASLSSL+"://"+addr)
	}
	dataDir := v.GetString("data.dir")
	if d := v.GetString("log.dirs"); d != "" {
		dataDir = d
	}
	// What --set gives explicitly wins (say, more mechanisms).
	given := map[string]bool{}
	for _, kv := range o.set {
		k, _, _ := strings.Cut(kv, "=")
		given[k] = true
	}
	if !given["ssl.keystore.location"] {
		v.Set("ssl.keystore.location", filepath.Join(dataDir, devTLSDir, "server.pem"))
	}
	if !given["sasl.enabled.mechanisms"] {
		v.Set("sasl.enabled.mechanisms", sasl.ScramSHA256+","+sasl.ScramSHA512)
	}
	if !given["admin.http.require.auth"] {
		v.Set("admin.http.require.auth", true)
	}
	if _, known := defaults["authorizer.class.name"]; known {
		v.Set("authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer")
	}
}

// prepareDevSecure writes the development CA and server certificate (once:
// later starts keep them, so clients that trust the CA keep working) and
// says where the CA is.
func prepareDevSecure(cmd *cobra.Command, cfg *configs.Config) error {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	for _, l := range cfg.Listeners {
		addr := l.Advertised
		if addr == "" {
			addr = l.Address
		}
		if h, _, err := net.SplitHostPort(addr); err == nil && h != "" {
			hosts = append(hosts, h)
		}
	}
	files, err := tlsconfig.GenerateDev(filepath.Join(cfg.DataDir, devTLSDir), hosts)
	if err != nil {
		return fmt.Errorf("sluice dev --secure: certificates: %w", err)
	}
	ca, _ := filepath.Abs(files.CA)
	fmt.Fprintf(cmd.ErrOrStderr(), "sluice dev --secure: SASL_SSL (SCRAM-SHA-256, SCRAM-SHA-512) on %s; clients trust the CA in %s\n", cfg.Listeners[0].Address, ca)
	return nil
}

// bootstrapUser creates the SCRAM-SHA-256 and -512 credentials of
// bootstrap.user if the user has none yet (the first start), and records
// User:<name> among the metastore's stored super users, which every
// broker's authorizer adds to its super.users: the user stays a super user
// on brokers that never had the variable and after it is removed. A start
// with the variable on a cluster that has the credentials but not the
// record (one bootstrapped before the record existed) adds the record. A
// secure dev node without any user at all refuses to start: nobody could
// connect.
func bootstrapUser(ctx context.Context, cfg configs.Config, catalog *metastore.Client, lg zerolog.Logger) error {
	user, password, ok, err := cfg.BootstrapCredentials()
	if err != nil || cfg.MetaJoin {
		// A meta node joining a quorum has no state yet; a member of it
		// (or a broker) creates the user.
		return err
	}
	if !ok {
		if cfg.DevSecure && len(catalog.ScramUsers()) == 0 {
			return errors.New("sluice dev --secure: no user exists yet: set SLUICE_BOOTSTRAP_USER=name:password for the first one")
		}
		return nil
	}
	var creds []metastore.ScramCredential
	for _, mech := range []string{sasl.ScramSHA256, sasl.ScramSHA512} {
		if _, exists := catalog.ScramCredential(user, mech); exists {
			continue
		}
		c, err := sasl.NewScramCredential(mech, password, 4096)
		if err != nil {
			return err
		}
		creds = append(creds, metastore.ScramCredential{User: user, Mechanism: mech, Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations})
	}
	principal := "User:" + user
	stored := slices.Contains(catalog.StoredSuperUsers(), principal)
	if len(creds) == 0 && stored {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if len(creds) > 0 {
		if err := catalog.AlterScramCredentials(wctx, creds); err != nil {
			return fmt.Errorf("bootstrap.user: creating %s's credentials: %w", user, err)
		}
		lg.Info().Str("user", user).Msg("bootstrap user created (SCRAM-SHA-256, SCRAM-SHA-512)")
	}
	if !stored {
		if err := catalog.AddSuperUser(wctx, principal); err != nil {
			return fmt.Errorf("bootstrap.user: recording %s as a super user: %w", principal, err)
		}
		lg.Info().Str("principal", principal).Msg("bootstrap user recorded as a super user in the metastore")
	}
	return nil
}
