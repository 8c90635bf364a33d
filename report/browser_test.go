package report

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// browserChromiumFlags run Debian's chromium headless, offline and without state.
var browserChromiumFlags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
}

// browserChartProbe is appended to a copy of a report page (the page itself has
// no script): after load it records, for every image, whether it decoded
// and its natural and rendered sizes, and for every inline svg its
// rendered size, in an attribute of body that --dump-dom shows.
const browserChartProbe = `<script>
window.addEventListener("load", function () {
  var out = [];
  for (var i = 0; i < document.images.length; i++) {
    var im = document.images[i], r = im.getBoundingClientRect();
    out.push("img:" + (im.complete ? 1 : 0) + ":" + im.naturalWidth + ":" + im.naturalHeight + ":" + Math.round(r.width) + ":" + Math.round(r.height));
  }
  var svgs = document.querySelectorAll("svg");
  for (var j = 0; j < svgs.length; j++) {
    var b = svgs[j].getBoundingClientRect();
    out.push("svg:1:" + Math.round(b.width) + ":" + Math.round(b.height) + ":" + Math.round(b.width) + ":" + Math.round(b.height));
  }
  document.body.setAttribute("data-charts", out.join(" ") || "none");
});
</script>`

// browserChromium returns the path of Debian's chromium, or skips the test (fails
// it when CI=true: CI installs the package).
func browserChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/chromium", "chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "chromium is not installed (Debian: apt-get install chromium); the reports' browser test needs it"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// TestReportsRenderInChromium writes the sim report of a real small run
// (its first run with two replicas and a runbook action, so that the
// chart marks both),
// the sweep report of a real small sweep (its four charts: hysteresis,
// phase, capacity to add, latest time) and the analyze report of the
// same scenario (all three charts: amplification, vulnerable load, fluid
// model), opens each page in headless Chromium with the network off, and
// checks that every chart rendered.
func TestReportsRenderInChromium(t *testing.T) {
	bin := browserChromium(t)
	simDir, sweepDir, analyzeDir, runs := browserReports(t, t.TempDir())
	if svg, err := os.ReadFile(filepath.Join(simDir, FileNames(runs)[0]+".svg")); err != nil || !bytes.Contains(svg, []byte("retries-off app")) || !bytes.Contains(svg, []byte("replicas serving")) {
		t.Errorf("the first run's chart does not mark its action and replicas (%v)", err)
	}

	for _, page := range []struct {
		dir    string
		charts int
	}{{simDir, len(runs)}, {sweepDir, 4}, {analyzeDir, 3}} {
		t.Run(filepath.Base(page.dir), func(t *testing.T) {
			t.Parallel()
			charts := browserCharts(t, bin, page.dir)
			if len(charts) != page.charts {
				t.Fatalf("the page shows %d charts, want %d: %q", len(charts), page.charts, charts)
			}
			for i, c := range charts {
				// kind:complete:naturalWidth:naturalHeight:width:height
				f := strings.Split(c, ":")
				n := make([]int, len(f)-1)
				for j := range n {
					n[j], _ = strconv.Atoi(f[j+1])
				}
				if len(n) != 5 || n[0] != 1 || n[1] < 300 || n[2] < 150 || n[3] < 100 || n[4] < 50 {
					t.Errorf("chart %d did not render: %s (complete, natural width and height, shown width and height)", i+1, c)
				}
			}
		})
	}
}

var browserChartsAttr = regexp.MustCompile(`data-charts="([^"]*)"`)

// browserCharts opens dir/index.html in headless Chromium, with the probe
// added, and returns what the probe recorded for each chart.
func browserCharts(t *testing.T, bin, dir string) []string {
	t.Helper()
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndex(page, []byte("</body>"))
	if i < 0 {
		t.Fatal("index.html has no </body>")
	}
	probe := filepath.Join(dir, "probe.html")
	withProbe := append(append(append([]byte(nil), page[:i]...), browserChartProbe...), page[i:]...)
	if err := os.WriteFile(probe, withProbe, 0o644); err != nil {
		t.Fatal(err)
	}
	// A fresh browser may, rarely, dump the page before its load event, or
	// crash on a loaded machine (a segmentation fault was seen beside
	// parallel race-detector builds): up to four tries, each with a new
	// profile. A page that never renders fails every try.
	var stderr string
	for range 4 {
		dom, errText, ok := browserDumpDOM(t, bin, probe)
		stderr = errText
		if !ok {
			continue
		}
		if m := browserChartsAttr.FindSubmatch(dom); m != nil {
			if string(m[1]) == "none" {
				return nil
			}
			return strings.Fields(string(m[1]))
		}
	}
	t.Fatalf("the probe left no result: the page did not load or scripts did not run\n%s", browserTail(stderr, 2000))
	return nil
}

// browserDumpDOM runs headless Chromium on the file and returns the DOM it dumps
// and what it said on stderr; ok is false when the browser failed (its error
// is then at the start of the text). The virtual time budget holds the dump
// until the page has loaded and its load handlers have run.
func browserDumpDOM(t *testing.T, bin, file string) (dom []byte, stderrText string, ok bool) {
	t.Helper()
	// Chromium's helpers may outlive it for a moment: a directory of our
	// own, removed on a best-effort basis.
	profile, err := os.MkdirTemp("", "stormguard-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(profile) })
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	args := append(append([]string(nil), browserChromiumFlags...),
		"--user-data-dir="+profile, "--virtual-time-budget=10000", "--dump-dom", "file://"+file)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Sprintf("chromium: %v\n%s", err, stderr.String()), false
	}
	return stdout.Bytes(), stderr.String(), true
}

func browserTail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
