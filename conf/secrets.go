package conf

import (
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"sync"
)

// Secrets hygiene: files holding secrets (private keys, key passwords,
// ticket keys) should be readable by their owner only, and a key password
// taken from the environment should not stay there for child processes and
// later readers of the environment.

// secretMode warns when file (the value of the key at path), which holds a
// secret described by what, can be read by others, or by a group this
// process is not in: gmproxy runs fine, but anyone in that group (or on the
// host) can copy the secret. Read access for one of gmproxy's own groups is
// how a key owned by another user (root, mode 0640) or a Kubernetes Secret
// mounted with the pod's fsGroup (mode 0440) is meant to be read.
func (v *validator) secretMode(path, file, what string) {
	if full := v.resolve(file); file != "" && v.secrets[full].path == "" {
		if v.secrets == nil {
			v.secrets = map[string]secretUse{}
		}
		v.secrets[full] = secretUse{path, file, what} // for filesRootSecrets
	}
	if runtime.GOOS == "windows" {
		return // permission bits do not describe Windows ACLs
	}
	full := v.resolve(file)
	if v.secretChecked[full] {
		return
	}
	if v.secretChecked == nil {
		v.secretChecked = map[string]bool{}
	}
	v.secretChecked[full] = true
	fi, err := os.Stat(full)
	if err != nil {
		return // reading it reported the problem
	}
	perm := fi.Mode().Perm()
	if perm&0o040 != 0 && ownGroup(fi) {
		perm &^= 0o040
	}
	if perm&0o044 != 0 {
		v.warnf(path, fmt.Sprintf("chmod 600 %s (readable by the owner only)", file),
			"%s %q is readable by %s (mode %04o)", what, file, readers(perm), fi.Mode().Perm())
	}
}

// readers names who besides the owner can read a file of mode perm.
func readers(perm fs.FileMode) string {
	switch {
	case perm&0o040 != 0 && perm&0o004 != 0:
		return "others and its group"
	case perm&0o040 != 0:
		return "its group, which gmproxy is not in"
	}
	return "others"
}

// envPasswords keeps the key passwords read from the environment: the
// variable is removed from the process environment once read (so child
// processes do not inherit it and os.Getenv no longer shows it), and a
// reload, which validates the configuration again, finds the password here.
// A variable set again later (a test, a wrapper) takes precedence.
var envPasswords struct {
	mu sync.Mutex
	m  map[string][]byte
}

// envPassword returns a copy of the password in environment variable name
// (the caller clears it after use), unsetting the variable.
func envPassword(name string) ([]byte, bool) {
	envPasswords.mu.Lock()
	defer envPasswords.mu.Unlock()
	if val, ok := os.LookupEnv(name); ok {
		if envPasswords.m == nil {
			envPasswords.m = map[string][]byte{}
		}
		if old := envPasswords.m[name]; old != nil {
			clear(old)
		}
		envPasswords.m[name] = []byte(val)
		os.Unsetenv(name)
	}
	pw, ok := envPasswords.m[name]
	if !ok {
		return nil, false
	}
	return append([]byte{}, pw...), true
}

// PasswordEnviron returns the key passwords this process took from its
// environment (and removed from it), as NAME=value entries for the
// environment of a process it starts to read the same configuration: the
// supervisor gives them to each worker it starts, which takes them from
// its own environment in turn. Only the variables read are passed, not
// every one the configuration could name later.
func PasswordEnviron() []string {
	envPasswords.mu.Lock()
	defer envPasswords.mu.Unlock()
	env := make([]string, 0, len(envPasswords.m))
	for name, pw := range envPasswords.m {
		env = append(env, name+"="+string(pw))
	}
	return env
}
