package main

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"runtime/debug"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/magiconair/properties"
	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/sluice-broker/sluice/configs"
)

// version is set at build time with -ldflags "-X main.version=..." (make
// build does); otherwise it comes from the module's build information (a
// tagged `go install ...@v1.2.3`, or the VCS revision of a checkout build).
var version = ""

func init() {
	if version == "" {
		version = buildVersion()
	}
}

// buildVersion derives a version from debug.ReadBuildInfo: the main
// module's version when it was installed at one, else the VCS revision
// (with "-dirty" for a modified tree), else "dev".
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return rev + dirty
}

func run(ctx context.Context, args []string) error {
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "Sluice: a Kafka-compatible broker with read/write separation",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(devCommand(ctx), serveCommand(ctx), versionCommand(), metaCommand(), clusterCommand(),
		topicCommand(), groupCommand(), brokerCommand())
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "sluice %s\n", version)
		},
	}
}

// overrides are the flags common to dev and serve.
type overrides struct {
	dataDir, kafkaAddr, adminAddr string
	listeners, advertised         string
	logFormat, logLevel           string
	set                           []string
	// secure: sluice dev --secure (secure.go).
	secure bool
	// dev: the flags of `sluice dev`, whose defaults differ a little.
	dev bool
}

func (o *overrides) bind(cmd *cobra.Command, dev bool) {
	o.dev = dev
	f := cmd.Flags()
	f.StringVar(&o.dataDir, "data-dir", "", "data directory (data.dir)")
	if dev {
		f.StringVar(&o.kafkaAddr, "kafka-addr", "", "Kafka listener host:port (default 127.0.0.1:9092)")
		f.BoolVar(&o.secure, "secure", false, "SASL_SSL with SCRAM-SHA-256/512 and a generated CA (data.dir/tls/ca.crt); the first user comes from SLUICE_BOOTSTRAP_USER=name:password")
	}
	f.StringVar(&o.listeners, "listeners", "", "Kafka listeners as NAME://host:port,... (listeners)")
	f.StringVar(&o.advertised, "advertised-listeners", "", "addresses given to clients, NAME://host:port,... (advertised.listeners)")
	f.StringVar(&o.adminAddr, "admin-addr", "", "admin HTTP host:port: /metrics, /healthz, /readyz, pprof (admin.addr)")
	f.StringVar(&o.logFormat, "log-format", "", "console or json (log.format; default console on a terminal)")
	f.StringVar(&o.logLevel, "log-level", "", "debug, info, warn or error (log.level)")
	f.StringArrayVar(&o.set, "set", nil, "set any config key, e.g. --set auto.create.topics.enable=false (repeatable)")
}

func devCommand(ctx context.Context) *cobra.Command {
	var o overrides
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run one node with every role (meta, write, read) on 127.0.0.1:9092 with data in ./data",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig("", o)
			if err != nil {
				return err
			}
			cfg.Roles = []string{"meta", "write", "read"}
			if o.secure {
				if err := prepareDevSecure(cmd, &cfg); err != nil {
					return err
				}
			}
			return runNode(cmd.Context(), cfg)
		},
	}
	o.bind(cmd, true)
	return cmd
}

func serveCommand(ctx context.Context) *cobra.Command {
	var o overrides
	var file string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the roles a config file names (YAML, or Kafka's server.properties form)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return fmt.Errorf("serve needs --config FILE")
			}
			cfg, err := loadConfig(file, o)
			if err != nil {
				return err
			}
			return runNode(cmd.Context(), cfg)
		},
	}
	cmd.Flags().StringVar(&file, "config", "", "config file: .yaml/.yml, or .properties as Kafka writes server.properties")
	o.bind(cmd, false)
	return cmd
}

// loadConfig layers flags over SLUICE_* environment variables over the file
// over configs.Default(). Keys are flat Kafka-style names with dots, so
// viper's key delimiter is changed to keep them whole.
func loadConfig(file string, o overrides) (configs.Config, error) {
	codecs := viper.NewCodecRegistry()
	for _, ext := range []string{"properties", "props", "prop"} {
		if err := codecs.RegisterCodec(ext, propertiesCodec{}); err != nil {
			return configs.Config{}, err
		}
	}
	v := viper.NewWithOptions(viper.KeyDelimiter("::"), viper.WithCodecRegistry(codecs))
	v.SetEnvPrefix("SLUICE")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	// Every key needs a default, or AutomaticEnv plus Unmarshal would
	// miss environment overrides (spf13/viper#761).
	defaults := map[string]any{}
	if err := mapstructure.Decode(configs.Default(), &defaults); err != nil {
		return configs.Config{}, err
	}
	for k, val := range defaults {
		v.SetDefault(k, val)
	}
	if o.dev {
		// A development node starts groups at once, as Kafka's
		// quickstart server.properties has it.
		v.SetDefault("group.initial.rebalance.delay.ms", 0)
	}
	if file != "" {
		v.SetConfigFile(file)
		if err := v.ReadInConfig(); err != nil {
			return configs.Config{}, fmt.Errorf("reading %s: %w", file, err)
		}
	}
	for _, kv := range o.set {
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return configs.Config{}, fmt.Errorf("--set %q: want key=value", kv)
		}
		if _, known := defaults[k]; !known && configs.CheckListenerOverride(k) != nil {
			return configs.Config{}, fmt.Errorf("--set: unknown config key %q", k)
		}
		v.Set(k, val)
	}
	if o.dataDir != "" {
		v.Set("data.dir", o.dataDir)
		v.Set("log.dirs", "")
	}
	if o.listeners != "" {
		v.Set("listeners", o.listeners)
	}
	if o.advertised != "" {
		v.Set("advertised.listeners", o.advertised)
	}
	if o.adminAddr != "" {
		v.Set("admin.addr", o.adminAddr)
	}
	if o.logFormat != "" {
		v.Set("log.format", o.logFormat)
	}
	if o.logLevel != "" {
		v.Set("log.level", o.logLevel)
	}
	if o.secure {
		setDevSecure(v, o, defaults)
	}
	// The bootstrap user's super-user status is not a local setting: the
	// metastore stores it with the user (bootstrapUser), for every broker.
	var cfg configs.Config
	// kafkaForm: listeners came as Kafka's "NAME://host:port,..." string
	// (server.properties, SLUICE_LISTENERS, --listeners), not the YAML list.
	kafkaForm := false
	listenersHook := func(from, to reflect.Type, data any) (any, error) {
		if from.Kind() != reflect.String || to != reflect.TypeOf([]configs.Listener(nil)) {
			return data, nil
		}
		kafkaForm = true
		return configs.ParseListeners(data.(string))
	}
	dc := func(c *mapstructure.DecoderConfig) {
		c.ErrorUnused = true
		c.WeaklyTypedInput = true
		c.DecodeHook = mapstructure.ComposeDecodeHookFunc(
			listenersHook,
			mapstructure.StringToSliceHookFunc(","),
			mapstructure.StringToTimeDurationHookFunc(),
		)
	}
	// Kafka's per-listener keys (listener.name.<name>.<key>) have names
	// no struct field can hold; they are set aside before decoding.
	settings := v.AllSettings()
	overrides := map[string]string{}
	for k, val := range settings {
		if !strings.HasPrefix(strings.ToLower(k), configs.ListenerOverridePrefix) {
			continue
		}
		if err := configs.CheckListenerOverride(k); err != nil {
			return cfg, fmt.Errorf("config: %w", err)
		}
		overrides[strings.ToLower(k)] = fmt.Sprint(val)
		delete(settings, k)
	}
	decCfg := &mapstructure.DecoderConfig{Result: &cfg}
	dc(decCfg)
	dec, err := mapstructure.NewDecoder(decCfg)
	if err != nil {
		return cfg, err
	}
	if err := dec.Decode(settings); err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	cfg.ListenerOverrides = overrides
	if o.kafkaAddr != "" {
		if _, _, err := net.SplitHostPort(o.kafkaAddr); err != nil {
			return cfg, fmt.Errorf("--kafka-addr: %w", err)
		}
		name := "PLAINTEXT"
		if o.secure {
			name = configs.ProtocolSASLSSL
		}
		cfg.Listeners = []configs.Listener{{Name: name, View: "mixed", Address: o.kafkaAddr}}
	}
	cfg.DevSecure = o.secure
	if err := cfg.ResolveListeners(kafkaForm); err != nil {
		return cfg, fmt.Errorf("invalid config:\n%w", err)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("invalid config:\n%w", err)
	}
	return cfg, nil
}

// propertiesCodec reads Java properties files, the form of Kafka's
// server.properties: keys stay flat ("log.dirs"), values are strings that
// the config decoder converts.
type propertiesCodec struct{}

func (propertiesCodec) Decode(b []byte, v map[string]any) error {
	// No ${...} expansion: Kafka does not expand a file's own keys.
	l := properties.Loader{Encoding: properties.UTF8, DisableExpansion: true}
	p, err := l.LoadBytes(b)
	if err != nil {
		return err
	}
	for _, k := range p.Keys() {
		v[k], _ = p.Get(k)
	}
	return nil
}

func (propertiesCodec) Encode(v map[string]any) ([]byte, error) {
	p := properties.NewProperties()
	for k, val := range v {
		if _, _, err := p.Set(k, fmt.Sprint(val)); err != nil {
			return nil, err
		}
	}
	var b strings.Builder
	if _, err := p.Write(&b, properties.UTF8); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}
