package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/internal/leakcheck"
)

// The program does what the README says it does, against a real server on
// 127.0.0.1, and leaves no goroutine behind.
func TestRun(t *testing.T) {
	leakcheck.Check(t)
	var out bytes.Buffer
	if err := run(t.Context(), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"client: GET /orders/42: 200 OK",
		"client: GET /nothing: 404 Not Found, no error",
		"breaker: open after 5 failures",
		"hedged: GET /orders/7: 200 OK",
		"retry.Do: succeeded on try 2",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// Every Go snippet of the README's "Wiring a service" section is quoted,
// line for line, from the body of a function of this program (one tab of
// indentation removed), so each compiles and runs in TestRun.
func TestReadmeQuotesThisProgram(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	var body []string
	for _, l := range strings.Split(string(src), "\n") {
		body = append(body, strings.TrimPrefix(l, "\t"))
	}
	program := strings.Join(body, "\n")
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Wiring a service\n")
	if !ok {
		t.Fatal(`README.md has no "## Wiring a service" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	blocks := strings.Split(section, "```go\n")[1:]
	for _, block := range blocks {
		code, _, _ := strings.Cut(block, "```")
		if !strings.Contains(program, code) {
			t.Errorf("README.md: this snippet is not in examples/wiring/main.go:\n%s", code)
		}
	}
	if got, want := len(blocks), 6; got != want {
		t.Errorf("%d Go snippets in the section; want %d (server, client, give-up, breaker, hedging, retry.Do)", got, want)
	}
}
