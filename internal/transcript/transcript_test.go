package transcript

import (
	"path/filepath"
	"testing"
)

func TestLoadAllTranscripts(t *testing.T) {
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(files) < 20 {
		t.Fatalf("found %d transcripts in %s, want the recorded set", len(files), dir)
	}
	for _, p := range files {
		f, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		for id := range f.Conns {
			recs, err := f.Records(id)
			if err != nil {
				t.Fatalf("%s: %v", filepath.Base(p), err)
			}
			if len(recs) == 0 || recs[0].Dir != "c2s" || recs[0].Type != 22 {
				t.Fatalf("%s conn %d: first record is not a client handshake record", filepath.Base(p), id)
			}
		}
	}
}

func TestKeyLog(t *testing.T) {
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	kl, err := LoadKeyLog(filepath.Join(dir, "tlcp-tongsuo-ECC-SM4-GCM-SM3.keylog"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Load(filepath.Join(dir, "tlcp-tongsuo-ECC-SM4-GCM-SM3.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := f.Records(1)
	random := recs[0].Body[4+2 : 4+2+32]
	ms, ok := kl.Get("CLIENT_RANDOM", random)
	if !ok || len(ms) != 48 {
		t.Fatalf("master secret for the ClientHello random not found (ok=%v len=%d)", ok, len(ms))
	}
}
