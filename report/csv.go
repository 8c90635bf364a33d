package report

import (
	"encoding/csv"
	"io"
	"iter"
	"strconv"

	"github.com/stormguard/stormguard/sim/result"
)

// Column suffixes of the CSV, after the client's or the service's name.
var (
	clientColumns  = []string{"demand", "goodput", "gave_up", "latency_p50", "latency_p99", "budget"}
	serviceColumns = []string{"offered_first", "offered_retries", "throughput", "goodput", "wasted", "shed", "expired_dropped", "queue", "limit"}
)

// writeCSV writes one row per time bin: t (the bin's start, seconds), then
// for every client NAME.demand … NAME.budget and for every service
// NAME.offered_first … NAME.limit, in the units of result.ClientBin and
// result.ServiceBin. A series shorter than the others leaves its cells empty.
func writeCSV(w io.Writer, r result.Result) error {
	header := []string{"t"}
	for _, c := range r.Clients {
		for _, col := range clientColumns {
			header = append(header, c.Name+"."+col)
		}
	}
	for _, v := range r.Services {
		for _, col := range serviceColumns {
			header = append(header, v.Name+"."+col)
		}
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return err
	}
	// The series side by side, a bin of each at a time (a series may
	// stream from a spool: see result.ClientSeries).
	var clients []func() (result.ClientBin, bool)
	for i := range r.Clients {
		next, stop := iter.Pull(r.Clients[i].Each())
		defer stop()
		clients = append(clients, next)
	}
	var services []func() (result.ServiceBin, bool)
	for i := range r.Services {
		next, stop := iter.Pull(r.Services[i].Each())
		defer stop()
		services = append(services, next)
	}
	row := make([]string, len(header))
	for i := 0; ; i++ {
		row = row[:0]
		row = append(row, num(float64(i)*r.BinS))
		more := false
		for _, next := range clients {
			if b, ok := next(); ok {
				row[0] = num(b.T)
				row = appendNums(row, b.Demand, b.Goodput, b.GaveUp.Sum(), b.LatencyP50, b.LatencyP99, b.Budget)
				more = true
			} else {
				row = append(row, make([]string, len(clientColumns))...)
			}
		}
		for _, next := range services {
			if b, ok := next(); ok {
				row[0] = num(b.T)
				row = appendNums(row, b.OfferedFirst, b.OfferedRetries, b.Throughput, b.Goodput, b.Wasted, b.Shed, b.Expired, b.Queue, b.Limit)
				more = true
			} else {
				row = append(row, make([]string, len(serviceColumns))...)
			}
		}
		if !more {
			break
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func appendNums(row []string, vs ...float64) []string {
	for _, v := range vs {
		row = append(row, num(v))
	}
	return row
}

// num writes v in the shortest decimal form that reads back exactly.
func num(v float64) string {
	return strconv.FormatFloat(v, 'f', -1, 64)
}
