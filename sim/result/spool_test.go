package result

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSpool writes random records (NaN, infinities and negative zero
// among them) to a Spool on a file and to one in memory, and reads them
// back twice, bit for bit; the file leaves nothing in the temporary
// directory.
func TestSpool(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	r := rand.New(rand.NewPCG(3, 4))
	special := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), math.MaxFloat64, math.SmallestNonzeroFloat64}
	for _, inMemory := range []bool{false, true} {
		s := NewSpool()
		if inMemory {
			s = &Spool{}
		}
		if s.InMemory() != inMemory {
			t.Fatalf("InMemory() = %v, want %v", s.InMemory(), inMemory)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 && !inMemory && s.name == "" {
			t.Errorf("the spool's file is still in the temporary directory: %v", left)
		}
		var want [][]float64
		for range 20_000 {
			rec := make([]float64, 7)
			for j := range rec {
				rec[j] = r.NormFloat64()
				if r.IntN(10) == 0 {
					rec[j] = special[r.IntN(len(special))]
				}
			}
			want = append(want, rec)
			s.Append(rec)
		}
		if s.Len() != len(want) {
			t.Fatalf("Len() = %d, want %d", s.Len(), len(want))
		}
		for pass := range 2 {
			i := 0
			for rec := range s.Records() {
				if !slices.EqualFunc(rec, want[i], func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }) {
					t.Fatalf("pass %d, record %d: %v, want %v", pass, i, rec, want[i])
				}
				i++
			}
			if i != len(want) || s.Err() != nil {
				t.Fatalf("pass %d: %d records, err %v; want %d", pass, i, s.Err(), len(want))
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Errorf("left in the temporary directory: %v", left)
	}
}
