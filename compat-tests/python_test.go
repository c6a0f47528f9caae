package compat

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The Python clients: confluent-kafka (librdkafka bundled in its wheel) and
// kafka-python (pure Python), each driven through python/scenarios.py, one
// process per scenario group (see matrix_test.go).

var pythonClients = []struct{ client, arg, module string }{
	{"python-confluent-kafka", "confluent", "confluent_kafka"},
	{"kafka-python", "kafka-python", "kafka"},
}

// pythonHas reports whether python3 is on PATH and imports module.
func pythonHas(module string) bool {
	if _, err := exec.LookPath("python3"); err != nil {
		return false
	}
	return exec.Command("python3", "-c", "import "+module).Run() == nil
}

func pythonArgv(arg string) func(group, addr, prefix string, rest ...string) []string {
	return func(group, addr, prefix string, rest ...string) []string {
		return append([]string{"python3", "scenarios.py", arg, group, addr, prefix}, rest...)
	}
}

func TestPythonConfluentKafka(t *testing.T) { testPython(t, 0) }
func TestPythonKafkaPython(t *testing.T)    { testPython(t, 1) }

func testPython(t *testing.T, i int) {
	t.Parallel()
	c := pythonClients[i]
	requireToolMatrix(t, c.client, allScenarios(), pythonHas(c.module),
		"python3 with the "+c.module+" module (make test-setup installs it into compat-tests/.venv)")
	argv := pythonArgv(c.arg)
	runClientScenarios(t, c.client, "py-"+c.arg, filepath.Join(".", "python"), 90*time.Second,
		func(group, addr, prefix string) []string { return argv(group, addr, prefix) })
}
