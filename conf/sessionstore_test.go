package conf

import (
	"os"
	"strings"
	"testing"
)

// TestSessionStoreFiles checks that the files of sessions.store and
// sessions.ticket_keys are loaded for the daemon.
func TestSessionStoreFiles(t *testing.T) {
	cfg, err := Load("testdata/good/fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st := cfg.Sessions.Store
	if st.Password != "s3cret" {
		t.Errorf("password = %q; want the file's content without its newline", st.Password)
	}
	if st.TLS.Config == nil || st.TLS.Config.RootCAs == nil || st.TLS.Config.ServerName != "redis.gmproxy.svc" {
		t.Errorf("store TLS config not built: %+v", st.TLS.Config)
	}
	if len(cfg.Sessions.TicketKeys.WrapKeys) != 1 {
		t.Errorf("wrap keys: %d; want 1", len(cfg.Sessions.TicketKeys.WrapKeys))
	}
}

// TestSentinelAuthFiles: sentinel_password_file is read for the daemon
// (without its newline), apart from password_file, and sentinel_username
// is kept with it.
func TestSentinelAuthFiles(t *testing.T) {
	cfg, err := Load("testdata/good/fleet_sentinel.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st := cfg.Sessions.Store
	want, err := os.ReadFile("testdata/pki/password.txt")
	if err != nil {
		t.Fatal(err)
	}
	if st.SentinelPassword != strings.TrimRight(string(want), "\n") || st.SentinelPassword == "" {
		t.Errorf("sentinel password = %q; want the content of password.txt without its newline", st.SentinelPassword)
	}
	if st.SentinelUsername != "watcher" || st.Password != "s3cret" {
		t.Errorf("sentinel user %q, store password %q; want watcher and the content of redis.pass", st.SentinelUsername, st.Password)
	}
}
