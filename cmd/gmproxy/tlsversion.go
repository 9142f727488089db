package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"slices"
)

// tlsVersionFlags are -tls1_2 and -tls1_3 of get and s_time: ordinary TLS
// (crypto/tls) at exactly that version. Either implies -tls.
type tlsVersionFlags struct {
	tls12, tls13 bool
}

func (f *tlsVersionFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.tls12, "tls1_2", false, "ordinary TLS, version 1.2 only (implies -tls)")
	fs.BoolVar(&f.tls13, "tls1_3", false, "ordinary TLS, version 1.3 only (implies -tls)")
}

// set reports whether a version was chosen.
func (f *tlsVersionFlags) set() bool { return f.tls12 || f.tls13 }

// check validates the version flags against the protocol flags and says
// whether they select ordinary TLS.
func (f *tlsVersionFlags) check(ntls, tls13sm bool) (std bool, err error) {
	if !f.set() {
		return false, nil
	}
	if f.tls12 && f.tls13 {
		return false, errors.New("choose one of -tls1_2 and -tls1_3")
	}
	if ntls || tls13sm {
		return false, errors.New("-tls1_2 and -tls1_3 are versions of ordinary TLS (-tls), not of -ntls or -tls13sm")
	}
	return true, nil
}

// apply sets cfg's versions and cipher suites from the version flags and a
// -cipher list of Go suite names (comma or colon separated). crypto/tls
// offers TLS 1.2 suites only up to TLS 1.2 and does not let a client choose
// TLS 1.3 suites, so a list of TLS 1.2 suites limits the connection to
// TLS 1.2, and a TLS 1.3 suite or -tls1_3 with -cipher is refused rather
// than silently ignored.
func (f *tlsVersionFlags) apply(cfg *tls.Config, cipher string) error {
	switch {
	case f.tls12:
		cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	case f.tls13:
		cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS13, tls.VersionTLS13
	}
	ids, err := parseSuites(cipher, tlsSuiteByName)
	if err != nil || len(ids) == 0 {
		return err
	}
	if f.tls13 {
		return errors.New("-cipher cannot be combined with -tls1_3: crypto/tls does not let a client choose TLS 1.3 suites")
	}
	for _, id := range ids {
		if !tlsSuiteBelow13(id) {
			return fmt.Errorf("-cipher %s is a TLS 1.3 suite, which crypto/tls does not let a client choose; leave -cipher out or name TLS 1.2 suites", tls.CipherSuiteName(id))
		}
	}
	cfg.CipherSuites = ids
	cfg.MaxVersion = tls.VersionTLS12
	return nil
}

// tlsSuiteBelow13 reports whether suite id is used by a TLS version below 1.3.
func tlsSuiteBelow13(id uint16) bool {
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		if s.ID == id {
			return slices.ContainsFunc(s.SupportedVersions, func(v uint16) bool { return v < tls.VersionTLS13 })
		}
	}
	return false
}
