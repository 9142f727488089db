package tlcp

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	rec "github.com/gmproxy/gmproxy/internal/transcript"
)

// TestSeedCorpus checks that testdata/handshake and testdata/records hold
// the seeds cut from the recorded transcripts; GMPROXY_WRITE_SEEDS=1
// regenerates them.
func TestSeedCorpus(t *testing.T) {
	dir, err := rec.Dir()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "tlcp-*.jsonl"))
	out := testpeer.Files{}
	defer out.Sync(t, "GMPROXY_WRITE_SEEDS")
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
				out[filepath.Join("testdata/records", fmt.Sprintf("%s-%d.bin", base[:len(base)-6], i))] = whole
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
				out[filepath.Join("testdata/handshake", fmt.Sprintf("%s-%s-%d.bin", base[:len(base)-6], r.Dir, b[0]))] = b[:4+n]
				hand[r.Dir] = b[4+n:]
			}
		}
	}
}
