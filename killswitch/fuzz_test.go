package killswitch

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const fuzzToken = "s3cret-token-of-24-bytes"

// fuzzAdmin returns the admin handler of d whose clock moves an hour per
// request, so that the failure limit never refuses: each fuzz input is
// judged on its own.
func fuzzAdmin(t testing.TB, d *Dials) *admin {
	h, err := NewAdmin(d, fuzzToken, AdminLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	a := h.(*admin)
	now := t0
	a.now = func() time.Time { now = now.Add(time.Hour); return now }
	return a
}

// refBearer is an independent statement of the rule bearerToken
// implements: "bearer" in any case, a space, more spaces, a non-empty rest.
func refBearer(v string) (string, bool) {
	if len(v) <= len("bearer ") || !strings.EqualFold(v[:len("bearer")], "bearer") || v[len("bearer")] != ' ' {
		return "", false
	}
	tok := strings.TrimLeft(v[len("bearer"):], " ")
	return tok, tok != ""
}

// FuzzBearerToken: bearerToken never panics, and accepts exactly the
// values made of the scheme "bearer" in any case, one or more spaces and
// a non-empty token, which it returns.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer tok", "bearer tok", "BEARER  tok", "Bearer", "Bearer ", "Bearer\ttok",
		"Basic dXNlcjpwYXNz", "", " ", "Bearertok", "Bearer tok extra", "bEaReR x", "Bearer \x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		tok, ok := bearerToken(v)
		want, wantOK := refBearer(v)
		if ok != wantOK || (ok && tok != want) {
			t.Fatalf("bearerToken(%q) = %q, %v; want %q, %v", v, tok, ok, want, wantOK)
		}
		if ok && (tok == "" || tok[0] == ' ') {
			t.Fatalf("bearerToken(%q) = %q: empty or starts with a space", v, tok)
		}
	})
}

// FuzzAdminAuthorization: whatever the Authorization header holds, the
// handler answers 200 exactly when it is the bearer scheme (any case) with
// the right token, 401 otherwise, and a refused request changes nothing.
func FuzzAdminAuthorization(f *testing.F) {
	for _, s := range []string{"Bearer " + fuzzToken, "bearer " + fuzzToken, "Bearer  " + fuzzToken, "Bearer " + fuzzToken + " ",
		"Bearer " + fuzzToken[:5], "Basic " + fuzzToken, fuzzToken, "", "Bearer", "BEARER " + strings.ToUpper(fuzzToken)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d := new(Dials)
		a := fuzzAdmin(t, d)
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"retries_off": true}`))
		req.Header["Authorization"] = []string{v} // as it came, unvalidated
		w := httptest.NewRecorder()
		a.ServeHTTP(w, req)
		tok, ok := refBearer(v)
		right := ok && tok == fuzzToken
		switch {
		case right && w.Code != http.StatusOK:
			t.Fatalf("Authorization %q: %d; want 200", v, w.Code)
		case !right && w.Code != http.StatusUnauthorized:
			t.Fatalf("Authorization %q: %d; want 401", v, w.Code)
		case d.RetriesDisabled() != right:
			t.Fatalf("Authorization %q: retries off %v after %d", v, d.RetriesDisabled(), w.Code)
		}
	})
}

// FuzzAdminBody: whatever a POST's body holds, the handler answers 200 or
// 400 and never panics; a 400 changes nothing; a 200 applies exactly the
// fields the body holds, in range, and answers the new state.
func FuzzAdminBody(f *testing.F) {
	for _, s := range []string{
		`{"shed_fraction": 0.5}`, `{"retries_off": true, "shed_fraction": 1, "limit_override": 8}`,
		`{"limit_override": 0}`, `{"shed_fraction": 1.5}`, `{"shed_fraction": -0}`, `{"limit_override": -3}`,
		`{"limit_override": 2.5}`, `{"limit_override": 1e3}`, `{"limit_override": 99999999999999999999}`,
		`{"retry_off": false}`, `{"retries_off": "no"}`, `shed=1`, `{"shed_fraction": 0} {}`, `{}`, ``, `null`,
		`{"shed_fraction": null}`, `[1]`, `{"shed_fraction": 1e-7}`, `{"SHED_FRACTION": 0.25}`,
		`{"shed_fraction": 0.1, "shed_fraction": 0.2}`, "{\"retries_off\": true}\n", `{"shed_fraction": NaN}`,
		`{"shed_fraction": 0` + strings.Repeat(" ", 5000) + `}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		d := new(Dials)
		// A state that any applied field would visibly change.
		_ = d.SetShedFraction(0.125)
		_ = d.SetLimitOverride(7)
		before := d.Snapshot()
		a := fuzzAdmin(t, d)
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+fuzzToken)
		w := httptest.NewRecorder()
		a.ServeHTTP(w, req)
		after := d.Snapshot()
		switch w.Code {
		case http.StatusBadRequest:
			if after != before {
				t.Fatalf("body %q refused, yet the dials went from %+v to %+v", body, before, after)
			}
			return
		case http.StatusOK:
		default:
			t.Fatalf("body %q: %d; want 200 or 400", body, w.Code)
		}
		var answered State
		if err := json.Unmarshal(w.Body.Bytes(), &answered); err != nil || answered != after {
			t.Fatalf("body %q: answered %q (%v); want the state %+v", body, w.Body.String(), err, after)
		}
		// An accepted body names each field at most once, in its exact
		// case.
		keys := map[string]int{}
		var top map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &top); err != nil {
			t.Fatalf("body %q accepted, but it is not an object: %v", body, err)
		}
		for k := range top {
			if k != "retries_off" && k != "shed_fraction" && k != "limit_override" {
				t.Fatalf("body %q accepted with the key %q", body, k)
			}
		}
		kd := json.NewDecoder(strings.NewReader(body))
		kd.Token() // {
		for kd.More() {
			k, _ := kd.Token()
			var skip json.RawMessage
			_ = kd.Decode(&skip)
			if keys[k.(string)]++; keys[k.(string)] > 1 {
				t.Fatalf("body %q accepted with %q given twice", body, k)
			}
		}
		// What the body asked for, decoded on its own.
		var c change
		dec := json.NewDecoder(bytes.NewReader([]byte(body)))
		if err := dec.Decode(&c); err != nil {
			t.Fatalf("body %q accepted, but it does not decode: %v", body, err)
		}
		want := before
		if c.RetriesOff != nil {
			want.RetriesOff = *c.RetriesOff
		}
		if c.ShedFraction != nil {
			if !(*c.ShedFraction >= 0 && *c.ShedFraction <= 1) {
				t.Fatalf("body %q: shed_fraction %v accepted", body, *c.ShedFraction)
			}
			probe := new(Dials)
			_ = probe.SetShedFraction(*c.ShedFraction)
			want.ShedFraction = probe.ShedFraction() // in parts per million, as the dials keep it
		}
		if c.LimitOverride != nil {
			if *c.LimitOverride < 0 || *c.LimitOverride > MaxLimitOverride {
				t.Fatalf("body %q: limit_override %d accepted", body, *c.LimitOverride)
			}
			want.LimitOverride = int(*c.LimitOverride)
		}
		if after != want {
			t.Fatalf("body %q: dials %+v; want %+v", body, after, want)
		}
	})
}
