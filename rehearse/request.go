package rehearse

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/stormguard/stormguard/sim/scenario"
)

// maxBody bounds a request body read from a file.
const maxBody = 1 << 20

// Request is what every attempt to an endpoint sends.
type Request struct {
	Method  string
	Headers [][2]string
	Body    []byte
	// tmpl, when set, renders the body and header values per request.
	body    *template.Template
	headers []*template.Template
}

// TemplateData is what a request template sees.
type TemplateData struct {
	// Client is the client's name; Seq the request's number in its
	// client, from 0, the same in every shard; Tap a person's tap, from 1.
	Client string
	Seq    int
	Tap    int
}

// newRequest reads a scenario request: method, headers, body (from its
// text, base64 or file, relative to dir), templates parsed.
func newRequest(kind string, r *scenario.Request, dir string) (Request, error) {
	out := Request{Method: http.MethodGet}
	if kind == scenario.EndpointGRPC {
		out.Method = http.MethodPost
	}
	if r == nil {
		return out, nil
	}
	if r.Method != "" {
		out.Method = r.Method
	}
	for _, h := range r.Headers {
		name, val, _ := strings.Cut(h, ":")
		out.Headers = append(out.Headers, [2]string{name, strings.TrimSpace(val)})
	}
	switch {
	case r.Body != "":
		out.Body = []byte(r.Body)
	case r.Body64 != "":
		b, err := base64.StdEncoding.DecodeString(r.Body64)
		if err != nil {
			return out, err
		}
		out.Body = b
	case r.BodyFile != "":
		path := r.BodyFile
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		st, err := os.Stat(path)
		if err != nil {
			return out, err
		}
		if st.Size() > maxBody {
			return out, fmt.Errorf("body_file %s: larger than %d bytes", path, maxBody)
		}
		if out.Body, err = os.ReadFile(path); err != nil {
			return out, err
		}
	}
	if r.Template {
		var err error
		if kind != scenario.EndpointGRPC {
			if out.body, err = parseTemplate(string(out.Body)); err != nil {
				return out, err
			}
		}
		for _, h := range out.Headers {
			t, err := parseTemplate(h[1])
			if err != nil {
				return out, err
			}
			out.headers = append(out.headers, t)
		}
	}
	return out, nil
}

func parseTemplate(s string) (*template.Template, error) {
	return template.New("").Option("missingkey=error").Parse(s)
}

// render returns the body and header values of one request.
func (r Request) render(d TemplateData) (body []byte, headers [][2]string, err error) {
	body, headers = r.Body, r.Headers
	if r.body != nil {
		var b bytes.Buffer
		if err := r.body.Execute(&b, d); err != nil {
			return nil, nil, err
		}
		body = b.Bytes()
	}
	if r.headers != nil {
		headers = make([][2]string, len(r.Headers))
		for i, t := range r.headers {
			var b strings.Builder
			if err := t.Execute(&b, d); err != nil {
				return nil, nil, err
			}
			headers[i] = [2]string{r.Headers[i][0], b.String()}
		}
	}
	return body, headers, nil
}

// describe is the request in a few words, for the plan.
func (r Request) describe(kind string) string {
	s := r.Method
	if kind == scenario.EndpointGRPC {
		s = "unary call"
	}
	if len(r.Headers) > 0 {
		s += fmt.Sprintf(", %d headers", len(r.Headers))
	}
	if len(r.Body) > 0 {
		s += fmt.Sprintf(", a %d-byte body", len(r.Body))
	}
	if r.body != nil || r.headers != nil {
		s += " (a template)"
	}
	return s
}
