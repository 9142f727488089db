package speed

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestSelect(t *testing.T) {
	tests := []struct {
		names   []string
		want    []string
		wantErr bool
	}{
		{[]string{"sm4-gcm"}, []string{"sm4-gcm"}, false},
		{[]string{"SM3"}, []string{"sm3", "hmac-sm3"}, false},
		{[]string{"sm4-gcm", "sm2-sign"}, []string{"sm2-sign", "sm4-gcm"}, false},
		{[]string{"rc4"}, nil, true},
	}
	for _, tt := range tests {
		algs, err := Select(tt.names)
		if (err != nil) != tt.wantErr {
			t.Errorf("%v: err %v", tt.names, err)
			continue
		}
		var got []string
		for _, a := range algs {
			got = append(got, a.Name)
		}
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%v: got %v, want %v", tt.names, got, tt.want)
		}
	}
	all, _ := Select(nil)
	if len(all) < 15 {
		t.Errorf("default selection has %d algorithms", len(all))
	}
}

// TestEveryAlgorithmRuns runs each algorithm briefly at two sizes.
func TestEveryAlgorithmRuns(t *testing.T) {
	algs, err := Select(nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := Run(algs, Options{Seconds: 0.01, Sizes: []int{16, 1024}}, nil)
	if len(rep.Results) != len(algs) {
		t.Fatalf("%d results for %d algorithms", len(rep.Results), len(algs))
	}
	for _, r := range rep.Results {
		if r.Error != "" {
			t.Errorf("%s: %s", r.Name, r.Error)
			continue
		}
		switch r.Unit {
		case "ops":
			if r.Ops <= 0 || r.OpsPerSec <= 0 || r.SecPerOp <= 0 {
				t.Errorf("%s: %+v", r.Name, r)
			}
		case "bytes":
			if len(r.Sizes) != 2 {
				t.Errorf("%s: %d sizes", r.Name, len(r.Sizes))
			}
			for _, s := range r.Sizes {
				if s.Ops <= 0 || s.BytesPerSec <= 0 {
					t.Errorf("%s/%d: %+v", r.Name, s.Bytes, s)
				}
			}
		default:
			t.Errorf("%s: unit %q", r.Name, r.Unit)
		}
	}
	var tbl bytes.Buffer
	rep.WriteTable(&tbl)
	for _, want := range []string{"1000s of bytes", "sm4-gcm", "sm2 sign", "SM4 multi-block:", "1024 bytes"} {
		if !strings.Contains(tbl.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tbl.String())
		}
	}
}

func TestMultiAndJSON(t *testing.T) {
	algs, _ := Select([]string{"sm3", "sm2-verify"})
	rep := Run(algs, Options{Seconds: 0.02, Multi: 2, Sizes: []int{64}}, nil)
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Multi != 2 || len(back.Results) != 3 || back.Impl.GOARCH == "" || back.Impl.SM4Blocks == "" {
		t.Errorf("round trip: %+v", back)
	}
}

func TestErrorsAreReported(t *testing.T) {
	bad := Alg{Name: "bad", Group: "test", New: func(int) (func() error, func(), error) {
		return func() error { return errTest }, nil, nil
	}}
	rep := Run([]Alg{bad}, Options{Seconds: 0.01, Sizes: []int{16}}, nil)
	if rep.Results[0].Error == "" {
		t.Fatal("step error not reported")
	}
}

type testErr struct{}

func (testErr) Error() string { return "test error" }

var errTest error = testErr{}

func TestImplDescribesSelection(t *testing.T) {
	t.Setenv("FORCE_SM4BLOCK_AESNI", "1")
	im := DetectImpl()
	if im.Env["FORCE_SM4BLOCK_AESNI"] != "1" {
		t.Errorf("env switch not reported: %v", im.Env)
	}
	if im.SM4Blocks == "" || im.SM4Single == "" || im.GHASH == "" || im.SM3 == "" {
		t.Errorf("incomplete: %+v", im)
	}
	if !strings.Contains(im.String(), "FORCE_SM4BLOCK_AESNI=1") {
		t.Errorf("String lacks the switch: %s", im)
	}
}

func TestAlgSizes(t *testing.T) {
	a := Alg{Name: "sized", Group: "test", Sizes: []int{32, 48}, New: func(int) (func() error, func(), error) {
		return func() error { return nil }, nil, nil
	}}
	sizesOf := func(r Result) (out []int) {
		for _, s := range r.Sizes {
			out = append(out, s.Bytes)
		}
		return out
	}
	// The algorithm's own sizes replace the defaults...
	rep := Run([]Alg{a}, Options{Seconds: 0.001}, nil)
	if got := sizesOf(rep.Results[0]); len(got) != 2 || got[0] != 32 || got[1] != 48 {
		t.Errorf("default run sizes %v", got)
	}
	// ...but not sizes the user asked for.
	rep = Run([]Alg{a}, Options{Seconds: 0.001, Sizes: []int{16}}, nil)
	if got := sizesOf(rep.Results[0]); len(got) != 1 || got[0] != 16 {
		t.Errorf("-bytes run sizes %v", got)
	}
}
