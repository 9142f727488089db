package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gmproxy/gmproxy/conf"
)

func init() {
	register("reload", "ask a running gmproxy to reload its configuration (like nginx -s reload)", reloadMain)
}

// reloadMain asks a running gmproxy to reload: through the admin endpoint
// (POST /reload), which answers whether the new configuration was taken,
// or with SIGHUP to the process named by a pid file, which cannot tell.
func reloadMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("reload", stderr,
		"usage: gmproxy reload [-c FILE | -admin ADDR | -pid FILE] [-token-file FILE] [-timeout DURATION]",
		"  -c FILE reads the admin address from the configuration; -admin and -c report whether the",
		"  new configuration was taken (exit 1 when refused); -pid only signals (the log says the outcome).")
	file := fs.String("c", "", "configuration `file` of the running gmproxy: its admin control address (else admin address) and token file are used")
	admin := fs.String("admin", "", "control `address` of the running gmproxy: host:port or unix:/path")
	tokenFile := fs.String("token-file", "", "`file` holding the admin bearer token (admin.token_file)")
	pidFile := fs.String("pid", "", "pid `file` written by gmproxy run -pid: send SIGHUP")
	timeout := fs.Duration("timeout", reloadTimeout, "bound for the wait for the reload's outcome")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	switch {
	case *pidFile != "":
		return reloadByPID(*pidFile, stdout, stderr)
	case *admin == "" && *file != "":
		cfg, err := conf.Load(*file)
		if err != nil {
			reportUnusable(stderr, "reload", *file, err)
			return 1
		}
		*admin = cfg.ControlAddress()
		if *admin == "" {
			*admin = cfg.Admin.Address
		}
		if *admin == "" || *admin == "off" {
			fmt.Fprintf(stderr, "gmproxy reload: %s has no admin listener; use -pid\n", *file)
			return 2
		}
		if *tokenFile == "" {
			*tokenFile = cfg.Resolve(cfg.Admin.TokenFile)
		}
	case *admin == "":
		fs.Usage()
		return 2
	}
	var token []byte
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintf(stderr, "gmproxy reload: %s\n", err)
			return 1
		}
		token = bytes.TrimSpace(b)
	}
	return reloadByAdmin(*admin, token, *timeout, stdout, stderr)
}

func reloadByPID(file string, stdout, stderr io.Writer) int {
	b, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "gmproxy reload: %s\n", err)
		return 1
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		fmt.Fprintf(stderr, "gmproxy reload: %s does not hold a process ID\n", file)
		return 1
	}
	if exe, ok := otherProgram(pid); !ok {
		fmt.Fprintf(stderr, "gmproxy reload: process %d (from %s) runs %s, not gmproxy: the pid file is stale (gmproxy stopped and the ID was reused); nothing was signalled\n", pid, file, exe)
		return 1
	}
	if err := signalReload(pid); err != nil {
		fmt.Fprintf(stderr, "gmproxy reload: signalling process %d: %s\n", pid, err)
		return 1
	}
	fmt.Fprintf(stdout, "sent SIGHUP to gmproxy (pid %d); its log says whether the configuration was taken\n", pid)
	return 0
}

// otherProgram reports (ok false) when process pid runs a program other
// than this one, by the executable's file name, so that a stale pid file
// does not get SIGHUP, whose default action ends the process, sent to
// whatever process took the ID. A renamed or replaced executable (an
// upgrade: " (deleted)") still counts by its name. Where the executable
// cannot be read (no /proc, or another user's process, which kill then
// refuses anyway) it does not decide.
func otherProgram(pid int) (exe string, ok bool) {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return "", true
	}
	self, err := os.Executable()
	if err != nil {
		return exe, true
	}
	name := filepath.Base(strings.TrimSuffix(exe, " (deleted)"))
	return exe, name == filepath.Base(self) || name == "gmproxy"
}

// reloadTimeout is gmproxy reload's default wait for the outcome: longer
// than the longest reload a supervisor makes (a worker still starting,
// then the prepare and commit steps, each bounded by
// workerReloadTimeout), so that the command does not report as failed a
// reload that then succeeds.
const reloadTimeout = workerStartTimeout + 2*workerReloadTimeout + 30*time.Second

// reloadByAdmin posts /reload to addr (host:port, or unix:/path), with the
// bearer token when there is one.
func reloadByAdmin(addr string, token []byte, timeout time.Duration, stdout, stderr io.Writer) int {
	client := &http.Client{Timeout: timeout}
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		// ":9100" listens on every address, loopback included; its
		// Host would be ":9100", which the control endpoint refuses
		// (it takes an IP address or localhost only).
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	url := "http://" + addr + "/reload"
	if path, ok := strings.CutPrefix(addr, conf.UnixPrefix); ok {
		url = "http://localhost/reload"
		client.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}}
	}
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "gmproxy reload: %s\n", err)
		return 2
	}
	if len(token) > 0 {
		req.Header.Set("Authorization", "Bearer "+string(token))
	}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "gmproxy reload: %s\n", err)
		if te := (interface{ Timeout() bool })(nil); errors.As(err, &te) && te.Timeout() {
			fmt.Fprintf(stderr, "gmproxy reload: no outcome within %v (-timeout): the reload may still be under way; gmproxy's log gives its outcome\n", timeout)
		}
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "gmproxy reload: %s: %s", resp.Status, body)
		if resp.StatusCode == http.StatusUnauthorized && len(token) > 0 {
			// A token file just rewritten (a rotation) holds the
			// token the running gmproxy takes with this reload,
			// not the one it checks it with.
			fmt.Fprintln(stderr, "gmproxy reload: the running gmproxy holds another token: if the token file was rewritten since its last reload, reload with the previous token (-token-file) or by SIGHUP (-pid); the new token applies from then on")
		}
		return 1
	}
	stdout.Write(body)
	return 0
}
