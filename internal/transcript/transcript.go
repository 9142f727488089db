// Package transcript reads the recorded peer transcripts and key logs in the
// module's testdata/transcripts (see testdata/README.md) for replay tests of
// the TLCP and TLS 1.3-SM stacks, and locates the test PKI beside them. It is
// test support only.
package transcript

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// root returns the module root: the first directory holding go.mod, walking
// up from the working directory (a test's working directory is its package).
func root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("module root (go.mod) not found above the working directory")
		}
		dir = parent
	}
}

// fixture returns the module's testdata/name, which must exist.
func fixture(name string) (string, error) {
	r, err := root()
	if err != nil {
		return "", err
	}
	d := filepath.Join(r, "testdata", name)
	if _, err := os.Stat(d); err != nil {
		return "", fmt.Errorf("test fixtures missing: %w", err)
	}
	return d, nil
}

// Dir returns the module's testdata/transcripts folder.
func Dir() (string, error) { return fixture("transcripts") }

// PKIDir returns the module's testdata/pki-tongsuo folder (the SM2 test PKI).
func PKIDir() (string, error) { return fixture("pki-tongsuo") }

// Conn is one recorded TCP connection: the two byte streams.
type Conn struct {
	C2S, S2C []byte
}

// Record is one record parsed from a stream, with the order in which it was
// completed across both directions (Seq of the chunk holding its last byte).
type Record struct {
	Dir   string // "c2s" or "s2c"
	Type  byte
	Vers  uint16
	Body  []byte
	Seq   int
	Index int // index of this record within its direction
}

type chunk struct {
	Conn int    `json:"conn"`
	Seq  int    `json:"seq"`
	Dir  string `json:"dir"`
	Off  int    `json:"off"`
	Hex  string `json:"hex"`
}

// File is one parsed transcript file.
type File struct {
	Conns map[int]*Conn
	// chunks per (conn, dir) in stream order, to recover record ordering.
	chunks map[string][]chunk
}

// Load parses a .jsonl transcript.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f := &File{Conns: map[int]*Conn{}, chunks: map[string][]chunk{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var c chunk
		if err := json.Unmarshal(line, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		key := fmt.Sprintf("%d/%s", c.Conn, c.Dir)
		f.chunks[key] = append(f.chunks[key], c)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for key, cs := range f.chunks {
		sort.Slice(cs, func(i, j int) bool { return cs[i].Off < cs[j].Off })
		var conn, dir = 0, ""
		fmt.Sscanf(strings.Replace(key, "/", " ", 1), "%d %s", &conn, &dir)
		var buf []byte
		for _, c := range cs {
			if c.Off != len(buf) {
				return nil, fmt.Errorf("%s: gap in %s at offset %d", path, key, c.Off)
			}
			d, err := hex.DecodeString(c.Hex)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			buf = append(buf, d...)
		}
		cn := f.Conns[conn]
		if cn == nil {
			cn = &Conn{}
			f.Conns[conn] = cn
		}
		if dir == "c2s" {
			cn.C2S = buf
		} else {
			cn.S2C = buf
		}
	}
	return f, nil
}

// Records splits connection conn's two streams into records and returns them
// in protocol order (by the seq of the chunk that completed each record;
// within one direction, in stream order). A truncated final record is an error.
func (f *File) Records(conn int) ([]Record, error) {
	var out []Record
	for _, dir := range []string{"c2s", "s2c"} {
		cs := f.chunks[fmt.Sprintf("%d/%s", conn, dir)]
		cn := f.Conns[conn]
		if cn == nil {
			return nil, fmt.Errorf("no connection %d", conn)
		}
		stream := cn.C2S
		if dir == "s2c" {
			stream = cn.S2C
		}
		idx := 0
		for off := 0; off < len(stream); {
			if len(stream)-off < 5 {
				return nil, fmt.Errorf("conn %d %s: truncated record header at %d", conn, dir, off)
			}
			n := int(stream[off+3])<<8 | int(stream[off+4])
			end := off + 5 + n
			if end > len(stream) {
				return nil, fmt.Errorf("conn %d %s: truncated record at %d", conn, dir, off)
			}
			seq := 0
			for _, c := range cs {
				if c.Off < end {
					seq = c.Seq
				}
			}
			out = append(out, Record{Dir: dir, Type: stream[off], Vers: uint16(stream[off+1])<<8 | uint16(stream[off+2]), Body: stream[off+5 : end], Seq: seq, Index: idx})
			idx++
			off = end
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Seq != out[j].Seq {
			return out[i].Seq < out[j].Seq
		}
		if out[i].Dir != out[j].Dir {
			return false
		}
		return out[i].Index < out[j].Index
	})
	return out, nil
}

// KeyLog maps a label ("CLIENT_RANDOM", "SERVER_HANDSHAKE_TRAFFIC_SECRET", …)
// and a hex client random to the secret.
type KeyLog map[string]map[string][]byte

// LoadKeyLog parses an NSS key log file.
func LoadKeyLog(path string) (KeyLog, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	kl := KeyLog{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 3 {
			return nil, fmt.Errorf("%s: bad key log line %q", path, line)
		}
		secret, err := hex.DecodeString(fs[2])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if kl[fs[0]] == nil {
			kl[fs[0]] = map[string][]byte{}
		}
		kl[fs[0]][strings.ToLower(fs[1])] = secret
	}
	return kl, nil
}

// Get returns the secret for label and client random.
func (k KeyLog) Get(label string, clientRandom []byte) ([]byte, bool) {
	s, ok := k[label][hex.EncodeToString(clientRandom)]
	return s, ok
}
