package result

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"slices"
)

// WriteJSON writes out to w as one JSON value and a newline: the bytes
// json.NewEncoder(w).Encode(out) writes, or with indent those of
// json.MarshalIndent(out, "", "  ") and a newline (the report's
// summary.json). It writes the series one bin at a time, reading each
// from Each, so that a Result whose series stream from a [Spool] is
// written whole without its bins ever being held together: what it holds
// is the rest of out, encoded, and one bin.
//
// Written as a stream, the output may be cut short by an error that
// encoding/json would have reported before writing anything (a bin that
// holds a NaN); the error is returned either way.
func WriteJSON(w io.Writer, out Output, indent bool) error {
	// The skeleton: out with every series' bins left out (nil, written
	// "bins": null), and, in the order the encoder meets them, how to
	// write each series' bins in their place.
	skel := out
	skel.Runs = slices.Clone(out.Runs) // nil stays nil: "runs": null
	var series []func(bw *bufio.Writer, prefix string) error
	for i, r := range out.Runs {
		r.Clients = slices.Clone(r.Clients)
		for j := range r.Clients {
			c := &r.Clients[j]
			series = append(series, binsWriter(c.Bins == nil && c.Stream == nil, c.Each(), indent))
			c.Bins, c.Stream = nil, nil
		}
		r.Services = slices.Clone(r.Services)
		for j := range r.Services {
			v := &r.Services[j]
			series = append(series, binsWriter(v.Bins == nil && v.Stream == nil, v.Each(), indent))
			v.Bins, v.Stream = nil, nil
		}
		skel.Runs[i] = r
	}
	var b []byte
	var err error
	marker := []byte(`"bins":null`)
	if indent {
		b, err = json.MarshalIndent(skel, "", "  ")
		marker = []byte(`"bins": null`)
	} else {
		b, err = json.Marshal(skel)
	}
	if err != nil {
		return err
	}
	// A series' key and its null are the only place these bytes occur:
	// inside a string every quote is escaped.
	bw := bufio.NewWriter(w)
	for _, write := range series {
		i := bytes.Index(b, marker)
		if i < 0 {
			return errors.New("result: WriteJSON: a series' bins are missing from the encoding")
		}
		// The indentation of the line the key is on.
		line := bytes.LastIndexByte(b[:i], '\n') + 1
		prefix := string(b[line:i])
		bw.Write(b[:i+len(marker)-len("null")])
		if err := write(bw, prefix); err != nil {
			return err
		}
		b = b[i+len(marker):]
	}
	bw.Write(b)
	bw.WriteByte('\n')
	return bw.Flush()
}

// binsWriter returns a function that writes the bins of seq as a JSON
// array, as encoding/json writes a slice of them (null: the slice is nil),
// compact, or indented by two spaces below prefix, the indentation of the
// line the array's key is on.
func binsWriter[T any](null bool, seq iter.Seq[T], indent bool) func(*bufio.Writer, string) error {
	return func(bw *bufio.Writer, prefix string) error {
		if null {
			bw.WriteString("null")
			return nil
		}
		inner := prefix + "  "
		n := 0
		for bin := range seq {
			var b []byte
			var err error
			if indent {
				b, err = json.MarshalIndent(bin, inner, "  ")
			} else {
				b, err = json.Marshal(bin)
			}
			if err != nil {
				return err
			}
			switch {
			case n == 0 && indent:
				bw.WriteString("[\n" + inner)
			case n == 0:
				bw.WriteByte('[')
			case indent:
				bw.WriteString(",\n" + inner)
			default:
				bw.WriteByte(',')
			}
			bw.Write(b)
			n++
		}
		switch {
		case n == 0:
			bw.WriteString("[]")
		case indent:
			bw.WriteString("\n" + prefix + "]")
		default:
			bw.WriteByte(']')
		}
		return nil
	}
}
