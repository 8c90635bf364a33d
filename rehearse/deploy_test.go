package rehearse

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// The Indexed Job of deploy/rehearse agrees with itself and with the
// command: completions, parallelism and the N of --shard are one number,
// the shard's index is the completion index plus one, and its start is a
// time --start-at reads.
func TestJobManifest(t *testing.T) {
	data, err := os.ReadFile("../deploy/rehearse/job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var job struct {
		Kind string
		Spec struct {
			CompletionMode string `yaml:"completionMode"`
			Completions    int
			Parallelism    int
			Template       struct {
				Spec struct {
					RestartPolicy string `yaml:"restartPolicy"`
					Containers    []struct {
						Args []string
						Env  []struct{ Name, Value string }
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(data, &job); err != nil {
		t.Fatal(err)
	}
	s := job.Spec
	if job.Kind != "Job" || s.CompletionMode != "Indexed" || s.Template.Spec.RestartPolicy != "Never" || len(s.Template.Spec.Containers) != 1 {
		t.Fatalf("not an Indexed Job of one container: %+v", job)
	}
	c := s.Template.Spec.Containers[0]
	m := regexp.MustCompile(`--shard "\$\(\(JOB_COMPLETION_INDEX \+ 1\)\)/(\d+)"`).FindStringSubmatch(c.Args[0])
	if m == nil {
		t.Fatalf("no --shard from JOB_COMPLETION_INDEX in %q", c.Args[0])
	}
	n, _ := strconv.Atoi(m[1])
	if n != s.Completions || n != s.Parallelism {
		t.Errorf("--shard …/%d, completions %d, parallelism %d: want one number", n, s.Completions, s.Parallelism)
	}
	if sh, err := ParseShard("1/" + m[1]); err != nil || sh.Count != n {
		t.Errorf("the command refuses the shard: %v", err)
	}
	for _, e := range c.Env {
		if e.Name == "START_AT" {
			if _, err := time.Parse(time.RFC3339, e.Value); err != nil {
				t.Errorf("START_AT %q: %v", e.Value, err)
			}
		}
	}
}
