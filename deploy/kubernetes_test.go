package deploy

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/devpki"
)

// kinds are the object types the manifests may hold, by apiVersion/kind.
var kinds = map[string]func() any{
	"v1/ConfigMap":                       func() any { return new(corev1.ConfigMap) },
	"v1/Secret":                          func() any { return new(corev1.Secret) },
	"v1/Service":                         func() any { return new(corev1.Service) },
	"apps/v1/Deployment":                 func() any { return new(appsv1.Deployment) },
	"policy/v1/PodDisruptionBudget":      func() any { return new(policyv1.PodDisruptionBudget) },
	"networking.k8s.io/v1/NetworkPolicy": func() any { return new(networkingv1.NetworkPolicy) },
}

// decodeManifest decodes every document of a multi-document manifest into
// its Kubernetes API type, strictly: an unknown or duplicated field is an
// error, as is a kind not in kinds.
func decodeManifest(b []byte) ([]any, error) {
	var objs []any
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return nil, err
		}
		if tm.Kind == "" {
			continue // comments only
		}
		mk := kinds[tm.APIVersion+"/"+tm.Kind]
		if mk == nil {
			return nil, &unknownKind{tm.APIVersion + "/" + tm.Kind}
		}
		obj := mk()
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

type unknownKind struct{ kind string }

func (e *unknownKind) Error() string { return "unexpected object kind " + e.kind }

// certsHosts matches the -hosts of the `gmproxy certs` command a manifest's
// comments give for making its Secret's files.
var certsHosts = regexp.MustCompile(`(?m)^#.*gmproxy certs -out \S+ -hosts '?([^\s']+)`)

// manifests decodes every manifest (see decodeManifest) and returns, with
// it, the host names of its documented `gmproxy certs` command.
func manifests(t *testing.T) (objs map[string][]any, hosts map[string][]string) {
	t.Helper()
	files, _ := filepath.Glob("kubernetes/*.yaml")
	if len(files) < 2 {
		t.Fatalf("found %d manifests in deploy/kubernetes", len(files))
	}
	// The Kubernetes variant of the fleet example (examples/fleet).
	files = append(files, "examples/fleet/kubernetes.yaml")
	objs, hosts = map[string][]any{}, map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		o, err := decodeManifest(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		m := certsHosts.FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s: no `gmproxy certs -out DIR -hosts NAMES` command in the comments", f)
		}
		objs[filepath.Base(f)], hosts[filepath.Base(f)] = o, strings.Split(string(m[1]), ",")
	}
	return objs, hosts
}

// TestManifestsDecodeStrictly: every manifest decodes into the Kubernetes
// API types with no unknown field, and the decoder does catch a typo.
func TestManifestsDecodeStrictly(t *testing.T) {
	manifests(t)
	typo := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replica: 2\n")
	if _, err := decodeManifest(typo); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("a misspelt field decoded: %v", err)
	}
	if _, err := decodeManifest([]byte("apiVersion: v1\nkind: Pod\n")); err == nil {
		t.Fatal("an unexpected kind decoded")
	}
}

// gmproxyContainer returns the pod's gmproxy container (a container or a
// native-sidecar init container named gmproxy).
func gmproxyContainer(spec *corev1.PodSpec) (c *corev1.Container, sidecar bool) {
	for i := range spec.Containers {
		if spec.Containers[i].Name == "gmproxy" {
			return &spec.Containers[i], false
		}
	}
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == "gmproxy" {
			return &spec.InitContainers[i], true
		}
	}
	return nil, false
}

// TestManifestsDeploy checks what makes the manifests work in a cluster:
// the pod runs as the image's numeric user with an fsGroup that can read
// the Secrets, the gmproxy configuration in the ConfigMap loads without a
// problem against files made by `gmproxy certs` at the mounted paths (every
// file it names is inside a mounted volume), nothing is mounted with
// subPath (it would never update), GOMEMLIMIT follows the memory limit, and
// a sidecar is a native sidecar next to an application on 127.0.0.1 only.
func TestManifestsDeploy(t *testing.T) {
	all, hosts := manifests(t)
	for name, objs := range all {
		t.Run(name, func(t *testing.T) {
			configs := map[string]string{}
			// gmproxy's Deployment and the NetworkPolicies of its pods
			// (the fleet example also runs Redis).
			var deps []*appsv1.Deployment
			var policies []*networkingv1.NetworkPolicy
			for _, o := range objs {
				switch o := o.(type) {
				case *corev1.ConfigMap:
					configs[o.Name] = o.Data["gmproxy.yaml"]
				case *appsv1.Deployment:
					if c, _ := gmproxyContainer(&o.Spec.Template.Spec); c != nil {
						deps = append(deps, o)
					}
				case *networkingv1.NetworkPolicy:
					if o.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] == "gmproxy" {
						policies = append(policies, o)
					}
				}
			}
			if len(deps) != 1 {
				t.Fatalf("%d Deployments running gmproxy, want 1", len(deps))
			}
			pod := &deps[0].Spec.Template.Spec
			sc := pod.SecurityContext
			if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 ||
				sc.FSGroup == nil || *sc.FSGroup != 65532 || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod securityContext %+v: want runAsNonRoot, runAsUser and fsGroup 65532, seccomp RuntimeDefault", sc)
			}
			c, sidecar := gmproxyContainer(pod)
			if c == nil {
				t.Fatal("no container named gmproxy")
			}
			if c.Resources.Limits.Memory().IsZero() {
				t.Error("gmproxy has no memory limit")
			}
			memlimit := false
			for _, e := range c.Env {
				if e.Name == "GOMEMLIMIT" && strings.Contains(e.Value, "$(") {
					memlimit = true
				}
				if e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.Resource != "limits.memory" {
					t.Errorf("env %s: resource %s", e.Name, e.ValueFrom.ResourceFieldRef.Resource)
				}
			}
			if !memlimit {
				t.Error("GOMEMLIMIT is not derived from the memory limit")
			}
			volumes := map[string]corev1.Volume{}
			for _, v := range pod.Volumes {
				volumes[v.Name] = v
			}
			containers := append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...)
			for _, cc := range containers {
				for _, m := range cc.VolumeMounts {
					if m.SubPath != "" {
						t.Errorf("%s mounts %s with subPath: the file would never update", cc.Name, m.MountPath)
					}
				}
			}
			// The worker mode's supervisor keeps its private folder (the
			// workers' sockets, the configuration they run) in the
			// temporary folder, which a read-only root file system makes
			// read-only: gmproxy would exit at start with workers above 1.
			if sc := c.SecurityContext; sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
				tmp := "/tmp"
				for _, e := range c.Env {
					if e.Name == "TMPDIR" {
						tmp = e.Value
					}
				}
				writable := false
				for _, m := range c.VolumeMounts {
					if m.MountPath == tmp && !m.ReadOnly && volumes[m.Name].EmptyDir != nil {
						writable = true
					}
				}
				if !writable {
					t.Errorf("readOnlyRootFilesystem with no emptyDir mounted at %s: the worker mode cannot make its folder there", tmp)
				}
			}
			for _, v := range pod.Volumes {
				if s := v.Secret; s != nil && (s.DefaultMode == nil || *s.DefaultMode&0o040 == 0) {
					t.Errorf("secret volume %s: the mode must let the fsGroup read it", v.Name)
				}
			}
			if sidecar {
				if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
					t.Error("the gmproxy init container is not a native sidecar (restartPolicy: Always)")
				}
				if pod.SecurityContext.SeccompProfile == nil {
					t.Error("no seccomp profile")
				}
				for _, app := range pod.Containers {
					if app.Resources.Limits.Memory().IsZero() {
						t.Errorf("container %s has no memory limit", app.Name)
					}
					if !strings.Contains(strings.Join(append(app.Command, app.Args...), " "), "127.0.0.1:") {
						t.Errorf("container %s does not listen on 127.0.0.1 only", app.Name)
					}
				}
			} else {
				checkAdminPolicy(t, policies)
			}
			checkConfig(t, c, volumes, configs, hosts[name])
		})
	}
}

// checkAdminPolicy: a NetworkPolicy admits the proxy port from anywhere and
// the admin port only from selected (Prometheus) pods.
func checkAdminPolicy(t *testing.T, policies []*networkingv1.NetworkPolicy) {
	t.Helper()
	if len(policies) != 1 {
		t.Fatalf("%d NetworkPolicies, want 1 guarding the admin port", len(policies))
	}
	for _, r := range policies[0].Spec.Ingress {
		admin := len(r.Ports) == 0 // a rule without ports admits every port
		for _, p := range r.Ports {
			admin = admin || p.Port == nil || p.Port.IntValue() == 9100
		}
		if !admin {
			continue
		}
		if len(r.From) == 0 {
			t.Error("the admin port 9100 is open to every source")
		}
		for _, from := range r.From {
			if from.PodSelector == nil || from.IPBlock != nil {
				t.Errorf("the admin port 9100 admits %v, not only selected pods", from)
			}
		}
	}
}

// checkConfig finds the configuration file the gmproxy container runs with
// in its mounted ConfigMap, makes the files it names under a temporary root
// (a PKI by `gmproxy certs`, a ticket key), and checks it loads with no
// problem at all.
func checkConfig(t *testing.T, c *corev1.Container, volumes map[string]corev1.Volume, configs map[string]string, hosts []string) {
	t.Helper()
	var file string
	for i, a := range c.Args {
		if a == "-c" && i+1 < len(c.Args) {
			file = c.Args[i+1]
		}
	}
	var text string
	mounts := map[string]string{} // mount path -> volume
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
		v := volumes[m.Name]
		if v.ConfigMap != nil && filepath.Dir(file) == m.MountPath {
			text = configs[v.ConfigMap.Name]
		}
	}
	if text == "" {
		t.Fatalf("the file gmproxy runs with (%q) is not in a mounted ConfigMap of this manifest", file)
	}
	root := t.TempDir()
	for _, p := range regexp.MustCompile(`/etc/gmproxy/[^\s"',}\]]+`).FindAllString(text, -1) {
		if _, ok := mounts[filepath.Dir(p)]; !ok {
			t.Errorf("%s is not in a folder the gmproxy container mounts", p)
		}
	}
	pki, err := devpki.Generate(devpki.Options{Hosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pki.WriteFiles(filepath.Join(root, "etc/gmproxy/pki")); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	rand.Read(key)
	if err := os.MkdirAll(filepath.Join(root, "etc/gmproxy/tickets"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/gmproxy/tickets/ticket.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	// The fleet example's Secret: the wrap key of the fleet ticket keys
	// and the Redis password.
	if err := os.MkdirAll(filepath.Join(root, "etc/gmproxy/fleet"), 0o700); err != nil {
		t.Fatal(err)
	}
	rand.Read(key)
	for name, b := range map[string][]byte{"fleet-wrap.key": key, "redis.pass": []byte("pw\n")} {
		if err := os.WriteFile(filepath.Join(root, "etc/gmproxy/fleet", name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(root, "gmproxy.yaml")
	if err := os.WriteFile(cfg, bytes.ReplaceAll([]byte(text), []byte("/etc/gmproxy/"), []byte(root+"/etc/gmproxy/")), 0o600); err != nil {
		t.Fatal(err)
	}
	parsed, probs := conf.Check(cfg)
	for _, p := range probs {
		t.Errorf("gmproxy check on the ConfigMap's configuration: %s", p)
	}
	// workers: auto is one worker per CPU Go may use: without a CPU limit,
	// every CPU of the node, while the memory limit stays what it is. Each
	// worker maps the shared session table (21 MiB at the default
	// cache_size, for up to 12 workers at start) besides its own heap, so a
	// large node would take the pod past its memory limit.
	if parsed != nil && c.Resources.Limits.Cpu().IsZero() && (parsed.Workers == "" || parsed.Workers == "auto") {
		t.Errorf("workers: %q with no CPU limit: as many workers as the node has CPUs under a fixed memory limit of %s; set workers", parsed.Workers, c.Resources.Limits.Memory())
	}
}
