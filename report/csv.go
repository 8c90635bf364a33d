package report

import (
	"encoding/csv"
	"io"
	"strconv"

	"github.com/stormguard/stormguard/sim"
)

// Column suffixes of the CSV, after the client's or the service's name.
var (
	clientColumns  = []string{"demand", "goodput", "gave_up", "latency_p50", "latency_p99", "budget"}
	serviceColumns = []string{"offered_first", "offered_retries", "throughput", "goodput", "wasted", "shed", "expired_dropped", "queue", "limit"}
)

// writeCSV writes one row per time bin: t (the bin's start, seconds), then
// for every client NAME.demand … NAME.budget and for every service
// NAME.offered_first … NAME.limit, in the units of sim.ClientBin and
// sim.ServiceBin. A series shorter than the others leaves its cells empty.
func writeCSV(w io.Writer, r sim.Result) error {
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
	rows := 0
	for _, c := range r.Clients {
		rows = max(rows, len(c.Bins))
	}
	for _, v := range r.Services {
		rows = max(rows, len(v.Bins))
	}
	row := make([]string, len(header))
	for i := range rows {
		row = row[:0]
		row = append(row, num(float64(i)*r.BinS))
		for _, c := range r.Clients {
			if i < len(c.Bins) {
				b := c.Bins[i]
				row[0] = num(b.T)
				row = appendNums(row, b.Demand, b.Goodput, b.GaveUp.Sum(), b.LatencyP50, b.LatencyP99, b.Budget)
			} else {
				row = append(row, make([]string, len(clientColumns))...)
			}
		}
		for _, v := range r.Services {
			if i < len(v.Bins) {
				b := v.Bins[i]
				row[0] = num(b.T)
				row = appendNums(row, b.OfferedFirst, b.OfferedRetries, b.Throughput, b.Goodput, b.Wasted, b.Shed, b.Expired, b.Queue, b.Limit)
			} else {
				row = append(row, make([]string, len(serviceColumns))...)
			}
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
