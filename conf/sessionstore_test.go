package conf

import "testing"

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
