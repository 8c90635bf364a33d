// Command rehearse is stormguard rehearse's example: it starts a small
// service on 127.0.0.1 (the demo shop of package rehearse/demo: 5 workers
// × 20 ms, behind httpx.Server, with a kill-switch admin endpoint and a
// /metrics page) on the addresses that storm.yaml names, then rehearses
// every run of storm.yaml against it — real requests, a real network
// hold, the real admin endpoint — and prints each run's verdict.
//
//	go run ./examples/rehearse            # start the shop, rehearse, stop
//	go run ./examples/rehearse --serve    # only start the shop (Ctrl-C
//	                                      # stops it); then, elsewhere:
//	SHOP_ADMIN_TOKEN=… stormguard rehearse examples/rehearse/storm.yaml
//
// With --serve it prints the admin token to put in SHOP_ADMIN_TOKEN.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/stormguard/stormguard/rehearse"
	"github.com/stormguard/stormguard/rehearse/demo"
	"github.com/stormguard/stormguard/sim/scenario"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "rehearse:", err)
		os.Exit(1)
	}
}

// run is the example: flags in args, output to w.
func run(ctx context.Context, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("rehearse", flag.ContinueOnError)
	serve := fs.Bool("serve", false, "only start the shop, until Ctrl-C")
	file := fs.String("file", filepath.Join("examples", "rehearse", "storm.yaml"), "the scenario `FILE`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := scenario.LoadRehearsal(*file)
	if err != nil {
		return err
	}
	token := os.Getenv("SHOP_ADMIN_TOKEN")
	if token == "" {
		b := make([]byte, 16)
		rand.Read(b)
		token = hex.EncodeToString(b)
		os.Setenv("SHOP_ADMIN_TOKEN", token)
	}
	shop := f.Base.Services[0].Endpoint
	cfg := demo.Config{Addr: hostport(shop.Target), AdminAddr: hostport(shop.Admin.URL), MetricsAddr: hostport(shop.Metrics.Scrape),
		Workers: 5, Token: token}
	if *serve {
		s, err := demo.Start(ctx, cfg)
		if err != nil {
			return err
		}
		defer s.Close()
		fmt.Fprintf(w, "shop on %s (admin %s, metrics %s); SHOP_ADMIN_TOKEN=%s; Ctrl-C stops it\n", s.URL, s.AdminURL, s.MetricsURL, token)
		<-ctx.Done()
		return nil
	}
	for _, r := range f.Runs {
		p, err := rehearse.NewPlan(r.Scenario, r.Name, filepath.Dir(*file), rehearse.Shard{}, rehearse.Limits{})
		if err != nil {
			return err
		}
		// A fresh shop for every run: a naive one is still busy with the
		// last run's storm long after it.
		s, err := demo.Start(ctx, cfg)
		if err != nil {
			return err
		}
		res, err := rehearse.Run(ctx, p, rehearse.Options{})
		s.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: %s — %s\n", r.Name, res.Result.Verdict, res.Result.Why)
		out := rehearse.Output{}
		out.Add(p, res)
		for _, l := range rehearse.Lines(out, 0) {
			fmt.Fprintln(w, "  "+l)
		}
		if res.Interrupted {
			break
		}
	}
	return nil
}

// hostport is the HOST:PORT of an http:// URL.
func hostport(url string) string {
	rest := strings.TrimPrefix(url, "http://")
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	return rest
}
