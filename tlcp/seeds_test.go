package tlcp

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	rec "github.com/gmproxy/gmproxy/internal/transcript"
)

// TestWriteSeedCorpus regenerates testdata/handshake and testdata/records
// from the recorded transcripts when GMPROXY_WRITE_SEEDS=1.
func TestWriteSeedCorpus(t *testing.T) {
	if os.Getenv("GMPROXY_WRITE_SEEDS") != "1" {
		t.Skip("set GMPROXY_WRITE_SEEDS=1 to regenerate the seed corpus")
	}
	dir, err := rec.Dir()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "tlcp-*.jsonl"))
	os.MkdirAll("testdata/handshake", 0o755)
	os.MkdirAll("testdata/records", 0o755)
	seen := map[string]bool{}
	for _, f := range files {
		tf, err := rec.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(f)
		rs, err := tf.Records(1)
		if err != nil {
			t.Fatal(err)
		}
		hand := map[string][]byte{}
		for i, r := range rs {
			whole := append([]byte{r.Type, byte(r.Vers >> 8), byte(r.Vers), byte(len(r.Body) >> 8), byte(len(r.Body))}, r.Body...)
			key := fmt.Sprintf("%s-%d-%d", r.Dir, r.Type, len(r.Body))
			if !seen[key] && i < 12 && len(whole) < 4096 {
				seen[key] = true
				os.WriteFile(filepath.Join("testdata/records", fmt.Sprintf("%s-%d.bin", base[:len(base)-6], i)), whole, 0o644)
			}
			if recordType(r.Type) != recordTypeHandshake {
				if recordType(r.Type) == recordTypeChangeCipherSpec {
					hand[r.Dir+"ccs"] = []byte{1}
				}
				continue
			}
			if hand[r.Dir+"ccs"] != nil {
				continue // encrypted
			}
			hand[r.Dir] = append(hand[r.Dir], r.Body...)
			for b := hand[r.Dir]; len(b) >= 4; b = hand[r.Dir] {
				n := int(b[1])<<16 | int(b[2])<<8 | int(b[3])
				if len(b) < 4+n {
					break
				}
				os.WriteFile(filepath.Join("testdata/handshake", fmt.Sprintf("%s-%s-%d.bin", base[:len(base)-6], r.Dir, b[0])), b[:4+n], 0o644)
				hand[r.Dir] = b[4+n:]
			}
		}
	}
}
