package main

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-broker/sluice/configs"
)

// The packaging under deploy/ and the Dockerfile, checked without a
// container engine or a Kubernetes cluster: what each of them hands
// sluice (config files, environment) is loaded with loadConfig, the
// chart goes through helm lint --strict and helm template, the systemd
// unit through systemd-analyze verify, and the Dockerfile's build command
// is run as written.

// repoRoot is the repository, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// helmVersion is the helm release the chart is checked with, built from
// the Go module proxy (go run caches the executable after the first run).
const helmVersion = "v3.22.0"

// helm runs helm with args and returns its stdout. $HELM names a helm
// binary to use instead of building one.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var cmd *exec.Cmd
	if h := os.Getenv("HELM"); h != "" {
		cmd = exec.CommandContext(ctx, h, args...)
	} else {
		cmd = exec.CommandContext(ctx, "go", append([]string{"run", "helm.sh/helm/v3/cmd/helm@" + helmVersion}, args...)...)
		// Outside this module, so that its go.mod plays no part.
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// needHelm skips the test (fails it under CI=true) when helm cannot be
// had, and returns the chart's directory.
func needHelm(t *testing.T) string {
	t.Helper()
	if out, err := helm(t, "version", "--short"); err != nil {
		skipMissing(t, "helm "+helmVersion+" cannot be built (no Go module proxy?): "+err.Error())
	} else {
		t.Logf("helm %s", strings.TrimSpace(out))
	}
	return filepath.Join(repoRoot(t), "deploy", "helm", "sluice")
}

// manifest is one rendered Kubernetes object, decoded loosely.
type manifest map[string]any

func (m manifest) kind() string { return str(m["kind"]) }
func (m manifest) name() string { return str(dig(m, "metadata", "name")) }

func str(v any) string { s, _ := v.(string); return s }

// dig walks nested maps.
func dig(v any, path ...string) any {
	if m, ok := v.(manifest); ok {
		v = map[string]any(m)
	}
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func list(v any) []any { l, _ := v.([]any); return l }

// parseManifests splits helm template's output into objects; every
// document must be YAML with a kind.
func parseManifests(t *testing.T, out string) []manifest {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(out))
	var ms []manifest
	for {
		// Into a plain map: yaml gives nested maps the target's type.
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("rendered manifests are not YAML: %v", err)
		}
		if doc == nil {
			continue // an empty document
		}
		m := manifest(doc)
		if m.kind() == "" || m.name() == "" {
			t.Fatalf("rendered object without kind or name: %v", m)
		}
		ms = append(ms, m)
	}
	return ms
}

func countKinds(ms []manifest) map[string]int {
	n := map[string]int{}
	for _, m := range ms {
		n[m.kind()]++
	}
	return n
}

// selects reports whether selector (a matchLabels map) matches labels.
func selects(selector, labels any) bool {
	sel, _ := selector.(map[string]any)
	lab, _ := labels.(map[string]any)
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if lab[k] != v {
			return false
		}
	}
	return true
}

// kubeletEnv resolves a container's env as the kubelet would for one
// pod: field references from pod, $(VAR) from the variables before.
func kubeletEnv(t *testing.T, container any, pod map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, e := range list(dig(container, "env")) {
		name := str(dig(e, "name"))
		if field := str(dig(e, "valueFrom", "fieldRef", "fieldPath")); field != "" {
			v, ok := pod[field]
			if !ok {
				t.Fatalf("env %s: field %s not simulated", name, field)
			}
			env[name] = v
			continue
		}
		env[name] = ref.ReplaceAllStringFunc(str(dig(e, "value")), func(s string) string {
			v, ok := env[ref.FindStringSubmatch(s)[1]]
			if !ok {
				t.Fatalf("env %s refers to %s, which is not defined before it", name, s)
			}
			return v
		})
	}
	return env
}

// loadWithEnv loads a config file as `sluice serve --config file` would
// with env set (and every other SLUICE_ variable unset).
func loadWithEnv(t *testing.T, file string, env map[string]string) (configs.Config, error) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "SLUICE_") && k != "SLUICE_SKIP_FILE" {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	return loadConfig(file, overrides{})
}

// TestHelmChart lints the chart strictly, renders it with the default
// values and with the ServiceMonitor on, and checks the objects: their
// kinds, that every StatefulSet has its headless service, probes and
// non-root pods, that PodDisruptionBudgets and the ServiceMonitor select
// what they should, and that each role's config file, with the
// environment one of its pods gets, is a config sluice accepts.
func TestHelmChart(t *testing.T) {
	chart := needHelm(t)
	for _, args := range [][]string{
		{"lint", "--strict", chart},
		{"lint", "--strict", "--set", "serviceMonitor.enabled=true", chart},
	} {
		if out, err := helm(t, args...); err != nil {
			t.Fatal(err)
		} else if !strings.Contains(out, "0 chart(s) failed") {
			t.Fatalf("helm %s:\n%s", strings.Join(args, " "), out)
		}
	}
	// The schema refuses what the chart cannot run: an even quorum.
	if _, err := helm(t, "lint", "--strict", "--set", "meta.replicas=2", chart); err == nil {
		t.Error("helm lint accepts meta.replicas=2")
	}

	// The chart needs Kubernetes 1.28 (Chart.yaml's kubeVersion); a helm
	// built with go run, without release ldflags, assumes 1.20.
	tmpl := []string{"template", "sluice", chart, "--namespace", "kafka", "--kube-version", "1.30.0"}
	out, err := helm(t, tmpl...)
	if err != nil {
		t.Fatal(err)
	}
	ms := parseManifests(t, out)
	want := map[string]int{"ConfigMap": 3, "StatefulSet": 3, "Service": 5, "PodDisruptionBudget": 3}
	if got := countKinds(ms); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rendered kinds %v, want %v", got, want)
	}
	byKindName := map[string]manifest{}
	for _, m := range ms {
		byKindName[m.kind()+"/"+m.name()] = m
	}
	for _, sts := range ms {
		if sts.kind() != "StatefulSet" {
			continue
		}
		name := sts.name()
		role := str(dig(sts, "spec", "template", "metadata", "labels", "app.kubernetes.io/component"))
		svc := byKindName["Service/"+str(dig(sts, "spec", "serviceName"))]
		if svc == nil || dig(svc, "spec", "clusterIP") != "None" || dig(svc, "spec", "publishNotReadyAddresses") != true {
			t.Errorf("%s: serviceName %v is not a headless service publishing not-ready pods", name, dig(sts, "spec", "serviceName"))
		}
		podLabels := dig(sts, "spec", "template", "metadata", "labels")
		if !selects(dig(sts, "spec", "selector", "matchLabels"), podLabels) || svc != nil && !selects(dig(svc, "spec", "selector"), podLabels) {
			t.Errorf("%s: selectors do not match the pod labels", name)
		}
		pdbs := 0
		for _, m := range ms {
			if m.kind() == "PodDisruptionBudget" && selects(dig(m, "spec", "selector", "matchLabels"), podLabels) {
				pdbs++
			}
		}
		if pdbs != 1 {
			t.Errorf("%s: %d PodDisruptionBudgets select its pods, want 1", name, pdbs)
		}
		if dig(sts, "spec", "template", "spec", "securityContext", "runAsNonRoot") != true {
			t.Errorf("%s: pods may run as root", name)
		}
		containers := list(dig(sts, "spec", "template", "spec", "containers"))
		if len(containers) != 1 {
			t.Fatalf("%s: %d containers", name, len(containers))
		}
		c := containers[0]
		ports := map[string]int{}
		for _, p := range list(dig(c, "ports")) {
			ports[str(dig(p, "name"))] = dig(p, "containerPort").(int)
		}
		for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"} {
			if got := dig(c, probe, "httpGet", "path"); got != path {
				t.Errorf("%s: %s path %v, want %s", name, probe, got, path)
			}
			if port := str(dig(c, probe, "httpGet", "port")); ports[port] == 0 {
				t.Errorf("%s: %s port %q is not a container port", name, probe, port)
			}
		}

		// The role's config file with the environment of its pod 1.
		var cm manifest
		for _, v := range list(dig(sts, "spec", "template", "spec", "volumes")) {
			if n := str(dig(v, "configMap", "name")); n != "" {
				cm = byKindName["ConfigMap/"+n]
			}
		}
		if cm == nil {
			t.Fatalf("%s: no ConfigMap volume", name)
		}
		file := filepath.Join(t.TempDir(), "sluice.yaml")
		if err := os.WriteFile(file, []byte(str(dig(cm, "data", "sluice.yaml"))), 0o644); err != nil {
			t.Fatal(err)
		}
		env := kubeletEnv(t, c, map[string]string{
			"metadata.name": name + "-1", "status.podIP": "10.1.2.3",
			"metadata.labels['apps.kubernetes.io/pod-index']": "1",
		})
		cfg, err := loadWithEnv(t, file, env)
		if err != nil {
			t.Errorf("%s: the pod's config is refused: %v", name, err)
			continue
		}
		if len(cfg.Roles) != 1 || cfg.Roles[0] != role {
			t.Errorf("%s: roles %v, want [%s]", name, cfg.Roles, role)
		}
		if cfg.AdminAddr != net.JoinHostPort("0.0.0.0", strconv.Itoa(ports["admin"])) {
			t.Errorf("%s: admin.addr %s does not serve the probes' port %d", name, cfg.AdminAddr, ports["admin"])
		}
		switch role {
		case "meta":
			if cfg.MetaID != 11 || len(cfg.MetaPeers) != 3 || !strings.HasPrefix(cfg.MetaPeers[1], "11=sluice-meta-1.sluice-meta.kafka.svc.cluster.local:") {
				t.Errorf("%s: meta.id %d, meta.peers %v", name, cfg.MetaID, cfg.MetaPeers)
			}
		default:
			wantID := map[string]int32{"write": 11, "read": 21}[role]
			host := name + "-1." + name + ".kafka.svc.cluster.local"
			if cfg.NodeID != wantID || cfg.ReplicaListen != "10.1.2.3:"+strconv.Itoa(ports["replication"]) || len(cfg.MetaAddrs) != 3 {
				t.Errorf("%s: node.id %d (want %d), replica.listen %s, meta.addrs %v", name, cfg.NodeID, wantID, cfg.ReplicaListen, cfg.MetaAddrs)
			}
			if len(cfg.Listeners) != 2 {
				t.Fatalf("%s: listeners %+v", name, cfg.Listeners)
			}
			for _, l := range cfg.Listeners {
				h, p, _ := net.SplitHostPort(l.Advertised)
				port, _ := strconv.Atoi(p)
				if h != host || port != ports["kafka-"+strings.ToLower(l.Name)] {
					t.Errorf("%s: listener %s (view %s) advertises %s, want %s and a container port", name, l.Name, l.View, l.Advertised, host)
				}
			}
		}
	}

	out, err = helm(t, append(tmpl, "--set", "serviceMonitor.enabled=true")...)
	if err != nil {
		t.Fatal(err)
	}
	ms = parseManifests(t, out)
	if n := countKinds(ms)["ServiceMonitor"]; n != 1 {
		t.Fatalf("%d ServiceMonitors with serviceMonitor.enabled=true, want 1", n)
	}
	for _, sm := range ms {
		if sm.kind() != "ServiceMonitor" {
			continue
		}
		comps := map[any]bool{}
		for _, e := range list(dig(sm, "spec", "selector", "matchExpressions")) {
			for _, v := range list(dig(e, "values")) {
				comps[v] = true
			}
		}
		scraped := 0
		for _, svc := range ms {
			if svc.kind() == "Service" && selects(dig(sm, "spec", "selector", "matchLabels"), dig(svc, "metadata", "labels")) &&
				comps[dig(svc, "metadata", "labels", "app.kubernetes.io/component")] {
				scraped++
				hasAdmin := false
				for _, p := range list(dig(svc, "spec", "ports")) {
					hasAdmin = hasAdmin || dig(p, "name") == dig(list(dig(sm, "spec", "endpoints"))[0], "port")
				}
				if !hasAdmin {
					t.Errorf("ServiceMonitor selects service %s, which has no admin port", svc.name())
				}
			}
		}
		if scraped != 3 {
			t.Errorf("ServiceMonitor selects %d services, want the 3 headless ones", scraped)
		}
	}
}

// composeService is what the tests read of a compose.yaml service.
type composeService struct {
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
}

// loadCompose reads deploy/compose/compose.yaml and returns its services
// and the host file each mounts as its config file.
func loadCompose(t *testing.T) (map[string]composeService, map[string]string) {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "deploy", "compose")
	b, err := os.ReadFile(filepath.Join(dir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for name, svc := range compose.Services {
		if len(svc.Command) != 3 || svc.Command[0] != "serve" || svc.Command[1] != "--config" {
			t.Fatalf("%s: command %v, want serve --config FILE", name, svc.Command)
		}
		for _, v := range svc.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) >= 2 && parts[1] == svc.Command[2] {
				files[name] = filepath.Join(dir, parts[0])
			}
		}
		if files[name] == "" {
			t.Fatalf("%s: no volume mounts %s", name, svc.Command[2])
		}
	}
	return compose.Services, files
}

// TestComposeConfigs loads every service of deploy/compose/compose.yaml
// as its container would (the mounted config file, the service's
// environment) and checks that each Kafka listener advertises
// 127.0.0.1 and the host port published for the container port it binds.
func TestComposeConfigs(t *testing.T) {
	services, files := loadCompose(t)
	roles := map[string]int{}
	hostPorts := map[string]string{}
	for name, svc := range services {
		cfg, err := loadWithEnv(t, files[name], svc.Environment)
		if err != nil {
			t.Errorf("%s: config refused: %v", name, err)
			continue
		}
		roles[strings.Join(cfg.Roles, ",")]++
		published := map[string]string{} // container port -> host address
		for _, p := range svc.Ports {
			parts := strings.Split(p, ":")
			if len(parts) != 3 || parts[0] != "127.0.0.1" {
				t.Errorf("%s: port %q is not published on 127.0.0.1", name, p)
				continue
			}
			published[parts[2]] = parts[0] + ":" + parts[1]
			if other, dup := hostPorts[parts[1]]; dup {
				t.Errorf("host port %s is published by %s and %s", parts[1], other, name)
			}
			hostPorts[parts[1]] = name
		}
		if _, p, _ := net.SplitHostPort(cfg.AdminAddr); published[p] == "" {
			t.Errorf("%s: admin port %s is not published", name, p)
		}
		for _, l := range cfg.Listeners {
			_, p, _ := net.SplitHostPort(l.Address)
			if l.Advertised == "" || l.Advertised != published[p] {
				t.Errorf("%s: listener %s binds %s and advertises %q, but that port is published at %q", name, l.Name, l.Address, l.Advertised, published[p])
			}
		}
		if !cfg.HasRole("meta") {
			if host, _, _ := net.SplitHostPort(cfg.ReplicaListen); host != name {
				t.Errorf("%s: replica.listen %q does not bind the service's own name", name, cfg.ReplicaListen)
			}
		}
	}
	if want := map[string]int{"meta": 3, "write": 3, "read": 2}; fmt.Sprint(roles) != fmt.Sprint(want) {
		t.Errorf("services by role %v, want %v", roles, want)
	}
}

// TestSystemdUnit runs systemd-analyze verify on deploy/systemd/sluice.service
// (with ExecStart pointing at the binary this test built, since verify
// checks that it exists) and fails on any complaint, which verify
// prints without failing for unknown or malformed settings. The example
// server.properties must load too.
func TestSystemdUnit(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy", "systemd")
	if _, err := loadWithEnv(t, filepath.Join(dir, "server.properties"), nil); err != nil {
		t.Errorf("example server.properties refused: %v", err)
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		skipMissing(t, "systemd-analyze not found: "+err.Error())
	}
	unit, err := os.ReadFile(filepath.Join(dir, "sluice.service"))
	if err != nil {
		t.Fatal(err)
	}
	const exec_ = "ExecStart=/usr/local/bin/sluice "
	if !bytes.Contains(unit, []byte(exec_)) {
		t.Fatalf("sluice.service has no %q line", exec_)
	}
	unit = bytes.Replace(unit, []byte(exec_), []byte("ExecStart="+binPath+" "), 1)
	file := filepath.Join(t.TempDir(), "sluice.service")
	if err := os.WriteFile(file, unit, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", file).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, want := range []string{"User=sluice", "NoNewPrivileges=yes", "ProtectSystem=strict", "ReadWritePaths=/var/lib/sluice", "LimitNOFILE=", "Restart=on-failure", "EnvironmentFile="} {
		if !bytes.Contains(unit, []byte("\n"+want)) {
			t.Errorf("sluice.service lacks %s", want)
		}
	}
}

// TestDockerfileBuild runs the Dockerfile's go build command as written
// (its output path aside) and checks the binary: static, stamped with the
// VERSION build argument, and able to run `sluice version` and
// `sluice dev --help`, the image's default command.
func TestDockerfileBuild(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var build string
	for _, ins := range strings.Split(strings.ReplaceAll(string(b), "\\\n", " "), "\n") {
		if strings.HasPrefix(ins, "RUN ") && strings.Contains(ins, " go build ") {
			build = strings.TrimPrefix(ins, "RUN ")
		}
	}
	const out = "-o /out/sluice "
	if build == "" || !strings.Contains(build, out) {
		t.Fatalf("no RUN ... go build %s... in the Dockerfile", out)
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	build = strings.Replace(build, out, "-o "+bin+" ", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", build)
	cmd.Dir = root
	// The build arguments, as docker passes them to RUN.
	cmd.Env = append(os.Environ(), "VERSION=9.8.7-test", "TARGETOS="+runtime.GOOS, "TARGETARCH="+runtime.GOARCH)
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, o)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary needs a dynamic loader; distroless static has none")
		}
	}
	f.Close()
	if o, err := exec.CommandContext(ctx, bin, "version").CombinedOutput(); err != nil || string(o) != "sluice 9.8.7-test\n" {
		t.Errorf("sluice version: %v %q", err, o)
	}
	if o, err := exec.CommandContext(ctx, bin, "dev", "--help").CombinedOutput(); err != nil || !bytes.Contains(o, []byte("--advertised-listeners")) {
		t.Errorf("sluice dev --help: %v\n%s", err, o)
	}
}
