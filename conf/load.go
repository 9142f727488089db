package conf

import (
	_ "embed"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

//go:embed default.yaml
var defaultYAML string

// DefaultYAML returns the embedded development configuration. Its
// certificate paths are relative to the development PKI folder and its
// upstream target is the placeholder ${BACKEND}; DevConfig fills both.
func DefaultYAML() []byte { return []byte(defaultYAML) }

// DevFile is the name reported for problems in the embedded configuration.
const DevFile = "(embedded default configuration)"

// DevConfig returns the embedded development configuration: a listener on
// 127.0.0.1:8443 with tlcp, tls13sm and tls, one site named "dev" whose
// certificates are the files devpki.LoadOrCreate(pkiDir, devpki.Options{})
// writes (ECDSA included), forwarding everything to backendAddr, and the
// admin listener on 127.0.0.1:9100.
func DevConfig(pkiDir, backendAddr string) (*Config, error) {
	if backendAddr == "" {
		return nil, errors.New("conf: DevConfig needs the demo backend's address")
	}
	abs, err := filepath.Abs(pkiDir)
	if err != nil {
		return nil, err
	}
	data := strings.ReplaceAll(defaultYAML, "${BACKEND}", backendAddr)
	cfg, probs := check(DevFile, abs, []byte(data))
	if probs.HasErrors() {
		return nil, probs
	}
	cfg.Warnings = probs
	return cfg, nil
}

// Load reads, validates and loads the configuration file at path. Relative
// file names inside it resolve against the file's folder. On failure the
// error is a Problems value listing every problem found (errors and
// warnings); on success cfg.Warnings holds the warnings.
func Load(path string) (*Config, error) {
	cfg, probs := Check(path)
	if probs.HasErrors() {
		return nil, probs
	}
	cfg.Warnings = probs
	return cfg, nil
}

// Parse is Load for configuration text already in memory; name is the file
// name used in messages and for resolving relative paths.
func Parse(name string, data []byte) (*Config, error) {
	dir, err := filepath.Abs(filepath.Dir(name))
	if err != nil {
		return nil, err
	}
	cfg, probs := check(name, dir, data)
	if probs.HasErrors() {
		return nil, probs
	}
	cfg.Warnings = probs
	return cfg, nil
}

// Check reads and validates the file at path and returns every problem,
// sorted by position. cfg is nil when there are errors.
func Check(path string) (*Config, Problems) {
	data, dir, probs := readFile(path)
	if probs != nil {
		return nil, probs
	}
	return check(path, dir, data)
}

// readFile reads the configuration file at path and returns it with the
// absolute directory its relative file names resolve against, or the
// problem that stopped it.
func readFile(path string) (data []byte, dir string, probs Problems) {
	data, err := ReadConfigFile(path)
	if err != nil {
		return nil, "", Problems{{File: path, Severity: SeverityError, Message: fmt.Sprintf("cannot read the configuration: %s", errText(err)), Fix: "check the -c argument"}}
	}
	dir, err = filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, "", Problems{{File: path, Severity: SeverityError, Message: err.Error()}}
	}
	return data, dir, nil
}

func check(name, dir string, data []byte) (*Config, Problems) {
	cfg := Default()
	cfg.File = name
	cfg.Dir = dir
	d := newDecoder(name)
	d.decodeFile(data, cfg)
	if d.probs.HasErrors() && len(d.valPos) == 0 {
		// Nothing could be decoded (syntax error, empty file).
		d.probs.sort()
		return nil, d.probs
	}
	cfg.finish()
	cfg.decoded = d
	v := &validator{decoder: d, cfg: cfg, dir: dir, files: map[string]*loadedFile{}, now: now()}
	v.validate()
	d.probs.sort()
	if d.probs.HasErrors() {
		return nil, d.probs
	}
	return cfg, d.probs
}
