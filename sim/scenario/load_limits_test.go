package scenario

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/internal/hostspeed"
)

// TestReadCapsTheInput: a file larger than MaxFileSize, or an endless
// one, is refused once MaxFileSize bytes are read.
func TestReadCapsTheInput(t *testing.T) {
	big := strings.NewReader("# " + strings.Repeat("x", MaxFileSize) + "\n")
	if _, err := Read("big.yaml", big); !errors.Is(err, ErrFileTooLarge) || !strings.HasPrefix(err.Error(), "big.yaml: ") {
		t.Errorf("a file of 1 MiB + 3 bytes: %v", err)
	}
	if _, err := Read("fits.yaml", strings.NewReader("# "+strings.Repeat("x", MaxFileSize-3)+"\n")); err == nil || errors.Is(err, ErrFileTooLarge) {
		t.Errorf("a file of 1 MiB is read (and has no scenario): %v", err)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		start := time.Now()
		if _, err := Load("/dev/zero"); !errors.Is(err, ErrFileTooLarge) {
			t.Errorf("/dev/zero: %v", err)
		}
		if took := time.Since(start); took > hostspeed.Scale(time.Second) {
			t.Errorf("/dev/zero took %v to refuse", took)
		}
	}
}

// TestLoadStandardInput: path - reads standard input.
func TestLoadStandardInput(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdin
	os.Stdin = r
	t.Cleanup(func() { os.Stdin = old; r.Close() })
	go func() {
		w.WriteString(smallFile("", "arrivals: {rate: 10}"))
		w.Close()
	}()
	f, err := Load("-")
	if err != nil || f.Path != "stdin" || len(f.Runs) != 1 || f.Runs[0].Scenario.Clients[0].Arrivals.Rate != 10 {
		t.Errorf("Load(-) = %+v, %v", f, err)
	}
	if _, err := Parse("stdin", []byte("name: g\nfoo: 1\n")); err == nil || !strings.HasPrefix(err.Error(), "stdin:2: ") {
		t.Errorf("errors name stdin: %v", err)
	}
}

// TestMaxRuns: a file asking for more runs than MaxRuns is refused at
// once, in one line, instead of decoding every one of them.
func TestMaxRuns(t *testing.T) {
	var runs, values strings.Builder
	for i := range 100 {
		runs.WriteString("  - name: r" + strconv.Itoa(i) + "\n")
		values.WriteString(strconv.Itoa(i+1) + ", ")
	}
	y := smallFile("", "arrivals: {rate: 10}") + "runs:\n" + runs.String() +
		"sweep: {set: clients.app.arrivals.rate, values: [" + values.String() + "]}\n"
	start := time.Now()
	_, err := Parse("many.yaml", []byte(y))
	if err == nil || err.Error() != "many.yaml:105: the file asks for 10000 runs (100 × 100 sweep values); the most is 1000" {
		t.Errorf("err = %v", err)
	}
	if took := time.Since(start); took > hostspeed.Scale(time.Second) {
		t.Errorf("the refusal took %v", took)
	}
}

// smallFile is a scenario file with one client and one service; top is put
// before the clients and client inside the client's mapping.
func smallFile(top, client string) string {
	return "name: g\n" + top + "clients: [{name: app, target: db, " + client + "}]\n" +
		"services: [{name: db, workers: 4, service_time: {mean: 10ms}}]\n"
}
