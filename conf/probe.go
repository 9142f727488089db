package conf

import (
	"errors"
	"fmt"
	"net"
	"strconv"
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
		ln, err := net.Listen("tcp", l.Address)
		if err == nil {
			ln.Close()
			continue
		}
		path := fmt.Sprintf("listeners[%d].address", i)
		sev, fix := SeverityError, ""
		_, port, _ := net.SplitHostPort(l.Address)
		n, _ := strconv.Atoi(port)
		switch {
		case errors.Is(err, syscall.EACCES) && n > 0 && n < 1024:
			fix = "ports below 1024 need CAP_NET_BIND_SERVICE: AmbientCapabilities=CAP_NET_BIND_SERVICE in the systemd unit, " +
				"setcap cap_net_bind_service=+ep on the binary, or a port from 1024 up behind a port mapping"
		case errors.Is(err, syscall.EADDRINUSE):
			sev, fix = SeverityWarning, "another process listens there; if it is the gmproxy this configuration is for, reload it instead of starting a second one"
		case errors.Is(err, syscall.EADDRNOTAVAIL):
			fix = "use an address of this machine (ip addr), or 0.0.0.0 / [::] for all of them"
		}
		probs = append(probs, c.problem(sev, path, fix, fmt.Sprintf("cannot listen on %s: %s", l.Address, bindErrText(err))))
	}
	return probs
}

func bindErrText(err error) string {
	var se *net.OpError
	if errors.As(err, &se) && se.Err != nil {
		return se.Err.Error()
	}
	return err.Error()
}

// problem makes a Problem at path's place in the file the configuration
// was loaded from (no place for an in-memory configuration).
func (c *Config) problem(sev Severity, path, fix, msg string) Problem {
	p := Problem{File: c.File, Path: path, Severity: sev, Message: msg, Fix: fix}
	if c.decoded != nil {
		ps := c.decoded.posOf(path)
		p.Line, p.Column = ps.line, ps.col
	}
	return p
}
