// Package deploy holds gmproxy's deployment files (container, Kubernetes,
// systemd, example configurations); it has no code, only the tests that
// check those files without a cluster or a systemd host.
package deploy
