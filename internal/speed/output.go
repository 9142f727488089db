package speed

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report in the layout of `openssl speed`: a header
// with the implementation, a throughput table in 1000s of bytes per second
// per buffer size, and an SM2 table with time per operation and operations
// per second.
func (r Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "gmproxy speed: %s\n", r.Impl)
	fmt.Fprintf(w, "%.3gs per measurement, %d worker(s)\n", r.Seconds, r.Multi)
	var tput, ops []Result
	w0 := 20 // name column width
	for _, res := range r.Results {
		w0 = max(w0, len(res.Name)+1)
		if res.Unit == "ops" {
			ops = append(ops, res)
		} else {
			tput = append(tput, res)
		}
	}
	if len(tput) > 0 {
		sizes := sortedSizes(tput)
		fmt.Fprintln(w, "The 'numbers' are in 1000s of bytes per second processed.")
		fmt.Fprintf(w, "%-*s", w0, "type")
		for _, s := range sizes {
			fmt.Fprintf(w, " %12s", fmt.Sprintf("%d bytes", s))
		}
		fmt.Fprintln(w)
		for _, res := range tput {
			fmt.Fprintf(w, "%-*s", w0, res.Name)
			if res.Error != "" && len(res.Sizes) == 0 {
				fmt.Fprintf(w, " error: %s\n", res.Error)
				continue
			}
			for _, s := range sizes {
				cell := "-"
				for _, sr := range res.Sizes {
					if sr.Bytes == s {
						cell = fmt.Sprintf("%.2fk", sr.BytesPerSec/1000)
					}
				}
				fmt.Fprintf(w, " %12s", cell)
			}
			if res.Error != "" {
				fmt.Fprintf(w, "  error: %s", res.Error)
			}
			fmt.Fprintln(w)
		}
	}
	if len(ops) > 0 {
		fmt.Fprintf(w, "%-*s %14s %12s\n", w0, "", "time/op", "op/s")
		for _, res := range ops {
			if res.Error != "" {
				fmt.Fprintf(w, "%-*s error: %s\n", w0, res.Name, res.Error)
				continue
			}
			fmt.Fprintf(w, "%-*s %13.1fµs %12.1f\n", w0, strings.ReplaceAll(res.Name, "-", " "), res.SecPerOp*1e6, res.OpsPerSec)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}
