package rehearse

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/rehearse/demo"
	"github.com/stormguard/stormguard/sim/scenario"
)

// The service's side measured through a real Prometheus server (Debian's,
// which .ci/run installs for promtool) that scrapes the shop every second:
// it sees the attempts the clients sent (measured: 710 of 797 over 8 s,
// the last second not yet scraped; from the shop's own page, 795).
// TestKillSwitchFleetDials reads the page itself.
func TestServiceMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("a rehearsal of real time against real servers: not in -short")
	}
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if ci {
			t.Fatal("prometheus is not installed (.ci/run installs Debian's prometheus)")
		}
		t.Skip("prometheus is not installed")
	}
	shop := startShopProc(t, demo.Config{Workers: 20, Token: strings.Repeat("t", 16)})
	metricsAddr := strings.TrimSuffix(strings.TrimPrefix(shop.Metrics, "http://"), "/metrics")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: shop
    static_configs: [{targets: ["%s"]}]
`, metricsAddr)), 0o644)
	addr := freeAddr(t)
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 30 s: %s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Until Prometheus has scraped the shop (its first scrape may come up
	// to an interval after it is ready).
	probe := &scraper{e: EndpointPlan{Metrics: &scenario.Metrics{Prometheus: "http://" + addr}}, client: http.DefaultClient}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if vs, err := probe.instant(t.Context(), `stormguard_server_offered_total{job="shop"}`); err == nil && len(vs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus has no sample of the shop after 30 s: %s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	text := fmt.Sprintf(`
name: m
duration: 8s
clients: [{name: c, target: shop, arrivals: {kind: poisson, rate: 100}}]
services:
  - name: shop
    target: %s
    metrics: {%s}
`, shop.URL, "%s")
	prom := rehearseFile(t, fmt.Sprintf(text, `prometheus: "http://`+addr+`", selector: 'job="shop"'`), dir, Limits{})[0]
	for _, p := range []Plan{prom} {
		r, err := Run(t.Context(), p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		checkAccounts(t, r)
		s, tot := r.Services[0], r.Result.Services[0].Total
		t.Logf("%s: %+v; arrived %d, goodput %d; %d attempts sent; verdict %s", p.Endpoints[0].Metrics.Scrape+p.Endpoints[0].Metrics.Prometheus, s, tot.Arrived, tot.Goodput, r.Sent, r.Result.Services[0].Verdict)
		if !s.Measured || float64(tot.Arrived) < 0.7*float64(r.Sent) || tot.Arrived > r.Sent+PreflightWorstCase {
			t.Errorf("the service's side saw %d arrivals of the %d attempts sent (%+v)", tot.Arrived, r.Sent, s)
		}
		if v := r.Result.Services[0].Verdict; v != "stable" {
			t.Errorf("the service's verdict %s: %s", v, r.Result.Services[0].Why)
		}
	}
}
