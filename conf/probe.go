package conf

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
)

// ProbeListeners binds every listener address as gmproxy run would and
// releases it at once, and reports the addresses that cannot be bound, at
// their place in the file: a privileged port without the capability, an
// address in use (a warning: it may be the running gmproxy that check is
// testing a change for), or an address this machine does not have.
func (c *Config) ProbeListeners() Problems {
	var probs Problems
	for i, l := range c.Listeners {
		if sev, fix, msg, ok := probeTCP(l.Address); !ok {
			probs = append(probs, problemAt(c.File, c.decoded, sev, fmt.Sprintf("listeners[%d].address", i), fix, msg))
		}
	}
	return probs
}

// ProbeListen is ProbeListeners for gmproxy keyserver: its listen address
// (a host:port; a Unix socket is made at start) and its metrics_address.
func (f *KeyServerFile) ProbeListen() Problems {
	var probs Problems
	for _, a := range []struct{ path, addr string }{{"listen", f.Listen}, {"metrics_address", f.MetricsAddress}} {
		if a.addr == "" || strings.HasPrefix(a.addr, unixPrefix) {
			continue
		}
		if sev, fix, msg, ok := probeTCP(a.addr); !ok {
			probs = append(probs, problemAt(f.File, f.decoded, sev, a.path, fix, msg))
		}
	}
	return probs
}

// probeTCP binds addr and releases it at once; when it cannot, it says
// how bad that is (an address in use is a warning: it may be the running
// server the check is testing a change for) and how to fix it.
func probeTCP(addr string) (sev Severity, fix, msg string, ok bool) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		ln.Close()
		return 0, "", "", true
	}
	sev = SeverityError
	_, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	switch {
	case errors.Is(err, syscall.EACCES) && n > 0 && n < 1024:
		fix = "ports below 1024 need CAP_NET_BIND_SERVICE: AmbientCapabilities=CAP_NET_BIND_SERVICE in the systemd unit, " +
			"setcap cap_net_bind_service=+ep on the binary, or a port from 1024 up behind a port mapping"
	case errors.Is(err, syscall.EADDRINUSE):
		sev, fix = SeverityWarning, "another process listens there; if it is the one this configuration is for, reload it instead of starting a second one"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		fix = "use an address of this machine (ip addr), or 0.0.0.0 / [::] for all of them"
	}
	return sev, fix, fmt.Sprintf("cannot listen on %s: %s", addr, bindErrText(err)), false
}

func bindErrText(err error) string {
	var se *net.OpError
	if errors.As(err, &se) && se.Err != nil {
		return se.Err.Error()
	}
	return err.Error()
}

// problemAt makes a Problem at path's place in file, as d read it (no
// place when d is nil: an in-memory configuration).
func problemAt(file string, d *decoder, sev Severity, path, fix, msg string) Problem {
	p := Problem{File: file, Path: path, Severity: sev, Message: msg, Fix: fix}
	if d != nil {
		ps := d.posOf(path)
		p.Line, p.Column = ps.line, ps.col
	}
	return p
}

// WarningAt is a warning at path's place in c's file, for the checks made
// outside this package (gmproxy check's).
func (c *Config) WarningAt(path, fix, msg string) Problem {
	return problemAt(c.File, c.decoded, SeverityWarning, path, fix, msg)
}

// WarningAt is a warning at path's place in f's file, for the checks made
// outside this package (gmproxy keyserver -check's).
func (f *KeyServerFile) WarningAt(path, fix, msg string) Problem {
	return problemAt(f.File, f.decoded, SeverityWarning, path, fix, msg)
}
