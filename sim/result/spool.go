package result

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"iter"
	"math"
	"os"
)

// Spool keeps a run's bins out of memory while the run goes on and until
// they are written out: records of a fixed number of float64 values (a
// bin of every series), appended as the bins close and read back in
// order, as often as needed. They go to a temporary file, removed from its
// directory as soon as it is made (where the system allows: elsewhere when
// the Spool is closed), so that nothing is left behind however the program
// ends; when no temporary file can be made, the Spool keeps them in
// memory, 8 bytes a value. A Spool is not safe for concurrent use.
type Spool struct {
	f      *os.File
	name   string // to remove at Close, if it could not be removed at once
	w      *bufio.Writer
	mem    []byte // the records, when there is no file
	values int    // values a record; 0 before the first
	n      int    // records
	err    error  // the first write error
	buf    []byte
}

// NewSpool returns an empty Spool on a temporary file in os.TempDir, or
// in memory when that cannot be made.
func NewSpool() *Spool {
	s := &Spool{}
	f, err := os.CreateTemp("", "stormguard-series-*")
	if err != nil {
		return s
	}
	s.f, s.w = f, bufio.NewWriterSize(f, 64<<10)
	if os.Remove(f.Name()) != nil {
		s.name = f.Name()
	}
	return s
}

// InMemory reports whether the Spool keeps its records in memory (no
// temporary file could be made).
func (s *Spool) InMemory() bool { return s.f == nil }

// Append adds a record. Every record has the length of the first. A write
// error is kept (see Err) and the records after it are dropped.
func (s *Spool) Append(rec []float64) {
	if s.values == 0 {
		s.values = len(rec)
	}
	if len(rec) != s.values {
		panic("result: Spool.Append: records of different lengths")
	}
	if s.err != nil {
		return
	}
	s.buf = s.buf[:0]
	for _, v := range rec {
		s.buf = binary.LittleEndian.AppendUint64(s.buf, math.Float64bits(v))
	}
	if s.f == nil {
		s.mem = append(s.mem, s.buf...)
	} else if _, err := s.w.Write(s.buf); err != nil {
		s.err = err
		return
	}
	s.n++
}

// Len returns the number of records.
func (s *Spool) Len() int { return s.n }

// Err returns the first error the Spool met writing or reading its
// records.
func (s *Spool) Err() error { return s.err }

// Records returns the records in order; the slice each holds is reused by
// the next. A read error ends them early, and is kept (see Err).
func (s *Spool) Records() iter.Seq[[]float64] {
	return func(yield func([]float64) bool) {
		if s.err != nil || s.n == 0 {
			return
		}
		var r io.Reader
		size := int64(s.n) * int64(s.values) * 8
		if s.f == nil {
			r = bytes.NewReader(s.mem)
		} else {
			if err := s.w.Flush(); err != nil {
				s.err = err
				return
			}
			r = bufio.NewReaderSize(io.NewSectionReader(s.f, 0, size), 64<<10)
		}
		raw := make([]byte, 8*s.values)
		rec := make([]float64, s.values)
		for range s.n {
			if _, err := io.ReadFull(r, raw); err != nil {
				s.err = err
				return
			}
			for j := range rec {
				rec[j] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*j:]))
			}
			if !yield(rec) {
				return
			}
		}
	}
}

// Close releases the Spool's file or memory; it must not be used after.
func (s *Spool) Close() error {
	s.mem = nil
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	if s.name != "" {
		err = errors.Join(err, os.Remove(s.name))
	}
	s.f = nil
	return err
}
