package metrics

import (
	"bytes"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

// keyServerText is m's exposition text, without the go_ and process_
// families.
func keyServerText(t *testing.T, m *KeyServer) string {
	t.Helper()
	var b bytes.Buffer
	for _, mf := range gather(t, m.Gatherer()) {
		if strings.HasPrefix(mf.GetName(), Namespace+"_keyserver") {
			expfmt.MetricFamilyToText(&b, mf)
		}
	}
	return b.String()
}

// TestKeyServerRetain: a reload's policy (Retain) deletes the series of
// the clients and keys it no longer names, and the events of a removed
// client's operations still running (their end, their count) do not bring
// them back; the names kept, and names added, are exported as before.
func TestKeyServerRetain(t *testing.T) {
	m, err := NewKeyServer()
	if err != nil {
		t.Fatal(err)
	}
	m.Retain([]string{"old", "kept"}, []string{"gone_key", "key"})
	m.InFlight("old", 1)
	m.Operation("old", "key", "sign", "ok", time.Millisecond)
	m.Operation("kept", "gone_key", "decrypt", "ok", time.Millisecond)
	m.Operation("kept", "key", "sign", "ok", time.Millisecond)
	text := keyServerText(t, m)
	for _, want := range []string{`client="old"`, `key="gone_key"`} {
		if !strings.Contains(text, want) {
			t.Fatalf("before the reload: no %s:\n%s", want, text)
		}
	}

	m.Retain([]string{"kept", "new"}, []string{"key"})
	m.InFlight("old", -1) // the removed client's operation ends
	m.Operation("old", "key", "sign", "ok", time.Millisecond)
	m.Operation("kept", "gone_key", "decrypt", "ok", time.Millisecond)
	m.Operation("new", "key", "sign", "ok", time.Millisecond)
	text = keyServerText(t, m)
	for _, gone := range []string{`client="old"`, `key="gone_key"`} {
		if strings.Contains(text, gone) {
			t.Errorf("after the reload: %s still exported:\n%s", gone, text)
		}
	}
	for _, want := range []string{
		`gmproxy_keyserver_operations_total{client="kept",key="key",op="sign",result="ok"} 1`,
		`gmproxy_keyserver_operations_total{client="new",key="key",op="sign",result="ok"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("after the reload: no %s:\n%s", want, text)
		}
	}
}

// TestKeyServerRetainFreesPlaces: the label places of removed clients go
// to new ones: a key server whose clients are renamed by reloads, more
// than MaxSites in all, exports every running client by its name, not as
// "other".
func TestKeyServerRetainFreesPlaces(t *testing.T) {
	m, err := NewKeyServer()
	if err != nil {
		t.Fatal(err)
	}
	for gen := 0; gen < 3; gen++ {
		var names []string
		for i := 0; i < MaxSites; i++ {
			names = append(names, "c"+strconv.Itoa(gen)+"_"+strconv.Itoa(i))
		}
		m.Retain(names, []string{"key"})
		for _, n := range names {
			m.Operation(n, "key", "sign", "ok", time.Millisecond)
		}
	}
	if text := keyServerText(t, m); strings.Contains(text, `client="other"`) {
		t.Errorf("renamed clients exported as other:\n%.2000s", text)
	}
}

// TestKeyServerProbes: the key server's metrics listener answers /healthz
// while it runs and /readyz with 503 until SetReady(true) and after
// SetReady(false), as the admin listener of gmproxy run does.
func TestKeyServerProbes(t *testing.T) {
	m, err := NewKeyServer()
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler()
	probe := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	for _, step := range []struct {
		ready     *bool
		code      int
		readyBody string
	}{
		{nil, 503, "not ready\n"},
		{new(true), 200, "ready\n"},
		{new(false), 503, "not ready\n"},
	} {
		if step.ready != nil {
			m.SetReady(*step.ready)
		}
		if code, body := probe("/readyz"); code != step.code || body != step.readyBody {
			t.Errorf("ready %v: /readyz %d %q, want %d %q", step.ready, code, body, step.code, step.readyBody)
		}
		if code, body := probe("/healthz"); code != 200 || body != "ok\n" {
			t.Errorf("/healthz %d %q, want 200 \"ok\\n\"", code, body)
		}
	}
}

// TestKeyServerRefusedReasons: every refusal reason of the key server,
// malformed framing included, is its own series, not folded into other.
func TestKeyServerRefusedReasons(t *testing.T) {
	m, err := NewKeyServer()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"malformed", "identity", "no such reason"} {
		m.Refused(r)
	}
	text := keyServerText(t, m)
	for _, want := range []string{
		`gmproxy_keyserver_connections_refused_total{reason="malformed"} 1`,
		`gmproxy_keyserver_connections_refused_total{reason="identity"} 1`,
		`gmproxy_keyserver_connections_refused_total{reason="other"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %s in:\n%s", want, text)
		}
	}
}
