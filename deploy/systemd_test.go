package deploy

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// unitService returns the [Service] directives of a systemd unit file, each
// key with its values in order (a key may repeat).
func unitService(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: bad line %q", path, line)
			}
			out[k] = append(out[k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSystemdUnits: both units are sandboxed the same way, `systemctl
// reload` checks the configuration before signalling (so a refused
// configuration fails the reload command), and the key server keeps no
// capability at all.
func TestSystemdUnits(t *testing.T) {
	hardening := map[string]string{
		"DynamicUser":             "yes",
		"NoNewPrivileges":         "yes",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"PrivateDevices":          "yes",
		"ProtectKernelTunables":   "yes",
		"ProtectKernelModules":    "yes",
		"ProtectKernelLogs":       "yes",
		"ProtectControlGroups":    "yes",
		"ProtectClock":            "yes",
		"ProtectHostname":         "yes",
		"ProtectProc":             "invisible",
		"RestrictRealtime":        "yes",
		"RestrictNamespaces":      "yes",
		"RestrictSUIDSGID":        "yes",
		"LockPersonality":         "yes",
		"MemoryDenyWriteExecute":  "yes",
		"SystemCallArchitectures": "native",
		"SystemCallFilter":        "@system-service",
		"UMask":                   "0077",
	}
	units := map[string]struct{ check, caps string }{
		"systemd/gmproxy.service":           {"/usr/local/bin/gmproxy check -q -c /etc/gmproxy/gmproxy.yaml", "CAP_NET_BIND_SERVICE"},
		"systemd/gmproxy-keyserver.service": {"/usr/local/bin/gmproxy keyserver -c /etc/gmproxy/keyserver.yaml -check", ""},
	}
	for path, want := range units {
		s := unitService(t, path)
		for k, v := range hardening {
			if got := s[k]; len(got) != 1 || got[0] != v {
				t.Errorf("%s: %s=%q, want %s=%s", path, k, got, k, v)
			}
		}
		if got := s["ExecReload"]; len(got) != 2 || got[0] != want.check || got[1] != "/bin/kill -HUP $MAINPID" {
			t.Errorf("%s: ExecReload %q, want the check and then SIGHUP", path, got)
		}
		if got := s["ExecStartPre"]; len(got) != 1 || !strings.Contains(got[0], "-c /etc/gmproxy/") {
			t.Errorf("%s: ExecStartPre %q, want a configuration check", path, got)
		}
		if got := s["CapabilityBoundingSet"]; len(got) != 1 || got[0] != want.caps {
			t.Errorf("%s: CapabilityBoundingSet=%q, want %q", path, got, want.caps)
		}
		if got := s["AmbientCapabilities"]; len(got) > 1 || len(got) == 1 && got[0] != want.caps {
			t.Errorf("%s: AmbientCapabilities=%q, want %q", path, got, want.caps)
		}
	}
}

// TestSystemdConfigFolderReadable: the units run as a DynamicUser, which owns
// nothing under /etc, and systemd leaves the mode of an existing
// ConfigurationDirectory as it finds it. The folder that the install lines
// in the units' comments create must therefore let others in, or the
// service cannot read its own configuration (ExecStartPre's check fails with
// "permission denied" and the service never starts).
func TestSystemdConfigFolderReadable(t *testing.T) {
	for _, path := range []string{"systemd/gmproxy.service", "systemd/gmproxy-keyserver.service"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "#"))
			if len(f) < 5 || f[0] != "install" || f[1] != "-d" || f[2] != "-m" || f[4] != "/etc/gmproxy" {
				continue
			}
			found = true
			mode, err := strconv.ParseUint(f[3], 8, 32)
			if err != nil {
				t.Fatalf("%s: %q: %v", path, line, err)
			}
			if mode&0o005 != 0o005 {
				t.Errorf("%s: %q: mode %04o keeps the service's DynamicUser out of /etc/gmproxy", path, strings.TrimSpace(line), mode)
			}
		}
		if !found {
			t.Errorf("%s: no install -d -m MODE /etc/gmproxy line", path)
		}
	}
}
