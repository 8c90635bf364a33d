package rehearse

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/lab"
	"github.com/stormguard/stormguard/rehearse/demo"
	"github.com/stormguard/stormguard/sim/scenario"
)

// The servers the tests rehearse against run in processes of their own,
// as a real service does: the test binary started again with
// REHEARSE_TEST_ROLE set runs one of them instead of the tests —
//
//	slow      the slow upstream of the nginx tests (slowServer)
//	shop      the demo shop (package demo)
//	gate      a service that sheds only at admission (gateService)
//	backend   the lab's backend role (lab.RoleMain), as stormguard lab
//	          starts it
//
// — and ends when its standard input does.
func TestMain(m *testing.M) {
	switch os.Getenv("REHEARSE_TEST_ROLE") {
	case "":
		os.Exit(m.Run())
	case "slow":
		os.Exit(serveSlow())
	case "shop":
		os.Exit(serveShop())
	case "gate":
		os.Exit(serveGate())
	case "backend":
		err := lab.RoleMain(context.Background(), lab.RoleBackend, []string{"--config", os.Getenv("REHEARSE_TEST_CONFIG")}, os.Stdin, os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(2)
}

// serveSlow serves a slow upstream (REHEARSE_TEST_WORKERS handlers of
// REHEARSE_TEST_SERVICE each), prints its address and serves until stdin
// ends.
func serveSlow() int {
	workers, _ := strconv.Atoi(os.Getenv("REHEARSE_TEST_WORKERS"))
	st, _ := time.ParseDuration(os.Getenv("REHEARSE_TEST_SERVICE"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	slots := make(chan struct{}, max(1, workers))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slots <- struct{}{} // like a database: whether its caller still waits or not
		time.Sleep(st)
		<-slots
		w.Write([]byte("ok\n"))
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	fmt.Printf("%s\n", ln.Addr())
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
	return 0
}

// serveShop serves a demo shop (REHEARSE_TEST_SHOP: its demo.Config as
// JSON), prints its URLs as JSON and serves until stdin ends.
func serveShop() int {
	var cfg demo.Config
	if err := json.Unmarshal([]byte(os.Getenv("REHEARSE_TEST_SHOP")), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := demo.Start(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	line, _ := json.Marshal(map[string]string{"addr": strings.TrimPrefix(s.URL, "http://")[:strings.Index(strings.TrimPrefix(s.URL, "http://"), "/")],
		"url": s.URL, "admin": s.AdminURL, "metrics": s.MetricsURL})
	fmt.Printf("%s\n", line)
	io.Copy(io.Discard, os.Stdin)
	s.Close()
	return 0
}

// shopURLs are a shop process's addresses.
type shopURLs struct{ URL, Admin, Metrics string }

// startShopProc starts a demo shop in a process of its own.
func startShopProc(t testing.TB, cfg demo.Config) shopURLs {
	t.Helper()
	data, _ := json.Marshal(cfg)
	p := startProc(t, "shop", "REHEARSE_TEST_SHOP="+string(data))
	var u struct{ URL, Admin, Metrics string }
	if err := json.Unmarshal([]byte(p.line), &u); err != nil {
		t.Fatal(err)
	}
	return shopURLs(u)
}

// proc is a server process of a test.
type proc struct {
	addr  string
	line  string
	stdin io.WriteCloser
	cmd   *exec.Cmd
}

// startProc starts the test binary in role, with env, and waits for the
// first line it prints (its address, or the lab's ready line). The
// process ends when the test does: its stdin is closed, then it is killed.
func startProc(t testing.TB, role string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "REHEARSE_TEST_ROLE="+role), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{stdin: stdin, cmd: cmd}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line := make(chan string, 1)
	go func() {
		br := bufio.NewReader(stdout)
		l, _ := br.ReadString('\n')
		line <- strings.TrimSpace(l)
		io.Copy(io.Discard, br)
	}()
	select {
	case l := <-line:
		p.addr, p.line = l, l
		var ready struct{ Addr string }
		if json.Unmarshal([]byte(l), &ready) == nil && ready.Addr != "" {
			p.addr = ready.Addr
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: no address after 15 s", role)
	}
	if _, _, err := net.SplitHostPort(p.addr); err != nil {
		t.Fatalf("%s: %q is not an address", role, p.addr)
	}
	return p
}

// startSlowProc starts a slow upstream in a process of its own and returns
// its URL.
func startSlowProc(t testing.TB, workers int, serviceTime time.Duration) string {
	p := startProc(t, "slow", fmt.Sprintf("REHEARSE_TEST_WORKERS=%d", workers), "REHEARSE_TEST_SERVICE="+serviceTime.String())
	return "http://" + p.addr
}

// startBackend starts the lab's backend role (its configuration cfg,
// without the common part) in a process of its own, started now for
// dur, and returns its address.
func startBackend(t testing.TB, cfg lab.ServiceConfig, dur time.Duration) string {
	t.Helper()
	dir := t.TempDir()
	cfg.Common = lab.Common{Role: lab.RoleBackend, Name: "backend", Seed: 1, Bin: 100 * time.Millisecond, Duration: dur,
		Result: filepath.Join(dir, "result.json")}
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "backend.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, "backend", "REHEARSE_TEST_CONFIG="+path)
	if _, err := fmt.Fprintf(p.stdin, "start %d\n", time.Now().UnixNano()); err != nil {
		t.Fatal(err)
	}
	return p.addr
}

var _ = scenario.EndpointHTTP
