package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// startRedis starts a redis-server on 127.0.0.1 and a free port, without
// persistence, and returns its address and a function that stops it. The
// kernel kills it if this program dies (Linux).
func startRedis(dir string) (string, func(), error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, fmt.Errorf("redis-server is not installed (apt-get install redis-server): %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--loglevel", "warning", "--maxclients", "10000")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_, _ = c.Write([]byte("PING\r\n"))
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") {
				return addr, stop, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("redis-server on %s did not answer within 10s", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// redisStats is what INFO commandstats and INFO cpu say at one moment.
type redisStats struct {
	at    time.Time
	calls map[string]int64 // command → calls
	cpu   float64          // seconds of CPU, user + system, all threads
}

// topLevel are the commands a client sends itself (the rest are called
// from scripts, or by this program: INFO).
var topLevel = []string{"evalsha", "eval", "evalsha_ro", "eval_ro", "ping", "hello", "auth", "client", "select", "subscribe", "psubscribe"}

func readStats(ctx context.Context, rdb *redis.Client) (redisStats, error) {
	s := redisStats{at: time.Now(), calls: map[string]int64{}}
	text, err := rdb.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "cmdstat_"):
			name, rest, _ := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
			for _, kv := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(kv, "calls="); ok {
					n, _ := strconv.ParseInt(v, 10, 64)
					s.calls[strings.ToLower(name)] = n
				}
			}
		case strings.HasPrefix(line, "used_cpu_sys:"), strings.HasPrefix(line, "used_cpu_user:"):
			_, v, _ := strings.Cut(line, ":")
			f, _ := strconv.ParseFloat(v, 64)
			s.cpu += f
		}
	}
	return s, nil
}

// delta is what Redis did between two readings.
type delta struct {
	seconds    float64
	roundTrips int64 // commands sent by clients (scripts, pings, handshakes)
	commands   int64 // every command Redis ran, those of scripts included (INFO excluded)
	cpu        float64
	byCommand  map[string]int64 // the top-level commands
}

func diff(a, b redisStats) delta {
	d := delta{seconds: b.at.Sub(a.at).Seconds(), cpu: b.cpu - a.cpu}
	for name, n := range b.calls {
		if name == "info" {
			continue
		}
		d.commands += n - a.calls[name]
	}
	d.byCommand = map[string]int64{}
	for _, name := range topLevel {
		if n := b.calls[name] - a.calls[name]; n > 0 {
			d.roundTrips += n
			d.byCommand[name] = n
		}
	}
	return d
}
