package scenario

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/retry"
)

// TestPolicyFileRefs: what a scenario's reference to a policy file does,
// and its errors, at the scenario's lines.
func TestPolicyFileRefs(t *testing.T) {
	dir := t.TempDir()
	policy := "clients:\n  db:\n    preset: sre\n    attempt_timeout: 250ms\n    breaker: gobreaker\n  cache: naive\n"
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("clients:\n  db:\n    max_attempts: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	scenario := func(client string) string {
		return "name: s\nclients:\n  - name: app\n    target: db\n    arrivals: {rate: 10}\n" + client +
			"services:\n  - name: db\n    service_time: {mean: 10ms}\n    calls:\n      - service: cache\n        policy_file: policy.yaml\n  - name: cache\n    service_time: {mean: 1ms}\n"
	}
	parse := func(t *testing.T, client string) (File, error) {
		t.Helper()
		path := filepath.Join(dir, "s.yaml")
		if err := os.WriteFile(path, []byte(scenario(client)), 0o644); err != nil {
			t.Fatal(err)
		}
		return Load(path)
	}

	t.Run("resolved", func(t *testing.T) {
		f, err := parse(t, "    policy_file: policy.yaml\n")
		if err != nil {
			t.Fatal(err)
		}
		sre, _ := retry.Preset("sre")
		sre.AttemptTimeout = 250 * time.Millisecond
		gb, _ := breaker.Preset("gobreaker")
		for _, s := range []Scenario{f.Base, f.Runs[0].Scenario} {
			c, call := s.Clients[0], s.Services[0].Calls[0]
			tests := []struct {
				name      string
				got, want any
			}{
				{"client preset", c.Policy.Preset, "sre"},
				{"client policy", c.Policy.Policy, sre.WithDefaults()},
				{"client breaker", reflect.DeepEqual(c.Breaker.Spec, gb), true},
				{"client timeout: the attempt_timeout", c.Timeout, 250 * time.Millisecond},
				{"call: the dependency is the service called", call.Policy.Preset, "naive"},
				{"call: no breaker", call.Breaker == nil, true},
			}
			for _, tt := range tests {
				if tt.got != tt.want {
					t.Errorf("%s = %+v, want %+v", tt.name, tt.got, tt.want)
				}
			}
		}
	})

	bad := []struct {
		name   string
		client string
		want   string
	}{
		{"missing file", "    policy_file: none.yaml\n",
			"s.yaml:6: clients.app.policy_file: stat "},
		{"bad file", "    policy_file: bad.yaml\n",
			"s.yaml:6: clients.app.policy_file: " + filepath.Join(dir, "bad.yaml") + ":3: clients.db.max_attempts: 0 is not a value here"},
		{"unknown dependency", "    policy_file: policy.yaml\n    dependency: dbx\n",
			`s.yaml:7: clients.app.dependency: ` + filepath.Join(dir, "policy.yaml") + `: no client policy for dependency "dbx" (have db, cache)`},
		{"policy and policy_file", "    policy_file: policy.yaml\n    policy: naive\n",
			"s.yaml:7: clients.app.policy: the policy comes from policy_file policy.yaml"},
		{"breaker and policy_file", "    policy_file: policy.yaml\n    breaker: stormguard\n",
			"s.yaml:7: clients.app.breaker: the breaker comes from policy_file policy.yaml"},
		{"dependency alone", "    dependency: db\n",
			"s.yaml:6: clients.app.dependency: names a client block of a policy file: give policy_file too"},
		{"timeout disagrees", "    policy_file: policy.yaml\n    timeout: 1s\n",
			"s.yaml:7: clients.app.timeout: 1s is not the attempt_timeout 250ms of dependency db in policy.yaml"},
		{"not a regular file", "    policy_file: .\n",
			"s.yaml:6: clients.app.policy_file: " + dir + " is not a regular file"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(t, tt.client)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
		})
	}

	t.Run("a run drops the reference", func(t *testing.T) {
		f, err := parse(t, "    policy_file: policy.yaml\n"+
			"runs:\n  - name: file\n  - name: naive\n    set: {clients.app.policy_file: \"\", clients.app.policy: naive}\n")
		if err != nil {
			t.Fatal(err)
		}
		if got := []string{f.Runs[0].Scenario.Clients[0].Policy.Preset, f.Runs[1].Scenario.Clients[0].Policy.Preset}; got[0] != "sre" || got[1] != "naive" {
			t.Errorf("runs' presets = %q, want [sre naive]", got)
		}
	})
}
