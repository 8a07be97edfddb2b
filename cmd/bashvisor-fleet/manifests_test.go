package main

// The tests in this file check the manifests in deploy/kubernetes against
// the program they deploy: the service account's verbs are the ones the
// Kubernetes membership uses, every container runs bashvisor-fleet with
// arguments its executor or mcp command accepts, the ports in the
// arguments are the ports the pods, the Service and the NetworkPolicies
// name, and the names that refer to each other match.

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/bashvisor/bashvisor/cluster/kubernetes"
	"github.com/bashvisor/bashvisor/cmd/internal/cli"
)

// manifests holds every object of the directory's YAML files, by kind.
type manifests struct {
	accounts    []corev1.ServiceAccount
	roles       []rbacv1.Role
	bindings    []rbacv1.RoleBinding
	deployments []appsv1.Deployment
	services    []corev1.Service
	policies    []networkingv1.NetworkPolicy
}

// load decodes every document strictly: a field the API does not know
// (a typo) fails the test.
func load(t *testing.T) manifests {
	t.Helper()
	files, _ := filepath.Glob("../../deploy/kubernetes/*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests")
	}
	var m manifests
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---$`).Split(string(data), -1) {
			var meta struct{ Kind string }
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			var err error
			switch meta.Kind {
			case "ServiceAccount":
				err = decode(doc, &m.accounts)
			case "Role":
				err = decode(doc, &m.roles)
			case "RoleBinding":
				err = decode(doc, &m.bindings)
			case "Deployment":
				err = decode(doc, &m.deployments)
			case "Service":
				err = decode(doc, &m.services)
			case "NetworkPolicy":
				err = decode(doc, &m.policies)
			case "":
				if strings.TrimSpace(regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(doc, "")) != "" {
					err = fmt.Errorf("a document without a kind")
				}
			default:
				err = fmt.Errorf("kind %s: not checked by this test", meta.Kind)
			}
			if err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
		}
	}
	return m
}

func decode[T any](doc string, into *[]T) error {
	var v T
	if err := yaml.UnmarshalStrict([]byte(doc), &v); err != nil {
		return err
	}
	*into = append(*into, v)
	return nil
}

// The fleet's program and its commands.
var fleet = &cli.Program{Name: "bashvisor-fleet", Commands: cli.Standard(), Memberships: memberships}

func TestRBAC(t *testing.T) {
	m := load(t)
	if len(m.roles) != 1 || len(m.bindings) != 1 || len(m.accounts) != 1 {
		t.Fatalf("want one Role, RoleBinding and ServiceAccount: %d, %d, %d", len(m.roles), len(m.bindings), len(m.accounts))
	}
	role, binding, account := m.roles[0], m.bindings[0], m.accounts[0]
	if len(role.Rules) != 1 {
		t.Fatalf("role rules: %+v", role.Rules)
	}
	r := role.Rules[0]
	verbs := slices.Sorted(slices.Values(r.Verbs))
	want := slices.Sorted(slices.Values(kubernetes.Verbs))
	if !slices.Equal(r.APIGroups, []string{""}) || !slices.Equal(r.Resources, []string{"pods"}) || !slices.Equal(verbs, want) {
		t.Errorf("role rule %+v: want pods in the core group with exactly %v (kubernetes.Verbs)", r, want)
	}
	if binding.RoleRef.Kind != "Role" || binding.RoleRef.Name != role.Name || binding.RoleRef.APIGroup != rbacv1.GroupName {
		t.Errorf("binding refers to %+v, not the Role %s", binding.RoleRef, role.Name)
	}
	if len(binding.Subjects) != 1 || binding.Subjects[0].Kind != "ServiceAccount" || binding.Subjects[0].Name != account.Name {
		t.Errorf("binding subjects %+v: want the ServiceAccount %s", binding.Subjects, account.Name)
	}
	for _, d := range m.deployments {
		if d.Spec.Template.Spec.ServiceAccountName != account.Name {
			t.Errorf("%s runs as %q, not %s: its membership cannot watch the pods", d.Name, d.Spec.Template.Spec.ServiceAccountName, account.Name)
		}
	}
}

// expand replaces $(VAR) as Kubernetes does in args, with a stand-in value
// for each variable the container defines, and fails on an undefined one.
func expand(t *testing.T, c corev1.Container, arg string) string {
	return regexp.MustCompile(`\$\(([A-Z_]+)\)`).ReplaceAllStringFunc(arg, func(v string) string {
		name := v[2 : len(v)-1]
		for _, e := range c.Env {
			if e.Name == name {
				if name == "POD_IP" {
					return "10.1.2.3"
				}
				return "value-of-" + name
			}
		}
		t.Errorf("container %s: %s is not defined in its env", c.Name, v)
		return v
	})
}

// port returns the port of a host:port argument.
func port(t *testing.T, hostport string) int32 {
	_, p, err := net.SplitHostPort(hostport)
	n, perr := strconv.Atoi(p)
	if err != nil || perr != nil {
		t.Fatalf("%q is not host:port", hostport)
	}
	return int32(n)
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func containerPorts(c corev1.Container) []int32 {
	var out []int32
	for _, p := range c.Ports {
		out = append(out, p.ContainerPort)
	}
	return out
}

// TestDeployments: each container runs bashvisor-fleet with arguments its
// command accepts (checked by the command's own flag parsing), with the
// tokens from a secret under the names the commands read, and opens the
// ports its arguments listen on.
func TestDeployments(t *testing.T) {
	m := load(t)
	byCommand := map[string]appsv1.Deployment{}
	for _, d := range m.deployments {
		if sel := d.Spec.Selector.MatchLabels; len(sel) == 0 || !mapContains(d.Spec.Template.Labels, sel) {
			t.Errorf("%s: selector %v does not match its pods' labels %v", d.Name, sel, d.Spec.Template.Labels)
		}
		cs := d.Spec.Template.Spec.Containers
		if len(cs) != 1 {
			t.Fatalf("%s: %d containers", d.Name, len(cs))
		}
		c := cs[0]
		if !slices.Equal(c.Command, []string{"bashvisor-fleet"}) {
			t.Errorf("%s runs %q: only bashvisor-fleet has the Kubernetes membership", d.Name, c.Command)
		}
		args := make([]string, len(c.Args))
		for i, a := range c.Args {
			args[i] = expand(t, c, a)
		}
		// The environment the container gets from its secrets.
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				t.Setenv(e.Name, "secret-"+e.Name)
				var usage bytes.Buffer
				fleet.Main([]string{args[0], "-h"}, &usage, &usage)
				if !strings.Contains(usage.String(), "$"+e.Name) {
					t.Errorf("%s: %s comes from a secret, but %s does not read it:\n%s", d.Name, e.Name, args[0], usage.String())
				}
			}
		}
		if err := fleet.CheckArgs(args); err != nil {
			t.Errorf("%s: bashvisor-fleet %q: %v", d.Name, args, err)
		}
		if flagValue(args, "-cluster") != "k8s" {
			t.Errorf("%s: %q has no -cluster k8s", d.Name, args)
		}
		ports := containerPorts(c)
		switch args[0] {
		case "executor":
			listen, adv := flagValue(args, "-listen"), flagValue(args, "-advertise")
			if !slices.Contains(ports, port(t, listen)) || port(t, adv) != port(t, listen) || !strings.HasPrefix(adv, "10.1.2.3:") {
				t.Errorf("%s: -listen %s and -advertise %s (the pod IP) must name one container port of %v", d.Name, listen, adv, ports)
			}
		case "mcp":
			cl, adv := flagValue(args, "-cluster-listen"), flagValue(args, "-cluster-advertise")
			if !slices.Contains(ports, port(t, cl)) || port(t, adv) != port(t, cl) || !strings.HasPrefix(adv, "10.1.2.3:") {
				t.Errorf("%s: -cluster-listen %s and -cluster-advertise %s (the pod IP) must name one container port of %v", d.Name, cl, adv, ports)
			}
			if !slices.Contains(ports, port(t, flagValue(args, "-http"))) {
				t.Errorf("%s: -http %s is not a container port of %v", d.Name, flagValue(args, "-http"), ports)
			}
			if dir := flagValue(args, "-C"); dir != "" && !mounted(d, c, dir) {
				t.Errorf("%s: -C %s is not a mounted volume", d.Name, dir)
			}
		default:
			t.Errorf("%s runs %q", d.Name, args[0])
		}
		byCommand[args[0]] = d
	}
	if len(byCommand) != 2 {
		t.Fatalf("want an executor and a front Deployment: %v", byCommand)
	}
	checkNetwork(t, m, byCommand["executor"], byCommand["mcp"])
}

func mounted(d appsv1.Deployment, c corev1.Container, dir string) bool {
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == dir {
			return slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })
		}
	}
	return false
}

func mapContains(m, sub map[string]string) bool {
	for k, v := range sub {
		if m[k] != v {
			return false
		}
	}
	return true
}

// checkNetwork: the MCP Service reaches the front's -http port; only the
// fronts reach the executors' port, and only the executors the front's
// cluster port.
func checkNetwork(t *testing.T, m manifests, executor, front appsv1.Deployment) {
	frontArgs := front.Spec.Template.Spec.Containers[0].Args
	execArgs := executor.Spec.Template.Spec.Containers[0].Args
	httpPort := port(t, flagValue(frontArgs, "-http"))
	frontCluster := port(t, flagValue(frontArgs, "-cluster-listen"))
	execPort := port(t, flagValue(execArgs, "-listen"))
	if len(m.services) != 1 {
		t.Fatalf("want one Service: %d", len(m.services))
	}
	svc := m.services[0]
	if !mapContains(front.Spec.Template.Labels, svc.Spec.Selector) || len(svc.Spec.Ports) != 1 {
		t.Fatalf("Service %s selects %v, not the front's pods %v", svc.Name, svc.Spec.Selector, front.Spec.Template.Labels)
	}
	tp := svc.Spec.Ports[0].TargetPort
	if tp.IntValue() != int(httpPort) && !slices.ContainsFunc(front.Spec.Template.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool {
		return p.Name == tp.String() && p.ContainerPort == httpPort
	}) {
		t.Errorf("Service %s targets %s, not the front's -http port %d", svc.Name, tp.String(), httpPort)
	}
	// allowed reports whether policy p lets pods labelled from reach port
	// (from nil: any source).
	allowed := func(p networkingv1.NetworkPolicy, from map[string]string, port int32) bool {
		for _, in := range p.Spec.Ingress {
			portOK := slices.ContainsFunc(in.Ports, func(pp networkingv1.NetworkPolicyPort) bool { return pp.Port != nil && pp.Port.IntValue() == int(port) })
			fromOK := len(in.From) == 0 || (from != nil && slices.ContainsFunc(in.From, func(f networkingv1.NetworkPolicyPeer) bool {
				return f.PodSelector != nil && mapContains(from, f.PodSelector.MatchLabels)
			}))
			if portOK && fromOK {
				return true
			}
		}
		return false
	}
	policy := func(d appsv1.Deployment) networkingv1.NetworkPolicy {
		for _, p := range m.policies {
			if mapContains(d.Spec.Template.Labels, p.Spec.PodSelector.MatchLabels) {
				return p
			}
		}
		t.Fatalf("no NetworkPolicy selects %s", d.Name)
		return networkingv1.NetworkPolicy{}
	}
	ep, fp := policy(executor), policy(front)
	el, fl := executor.Spec.Template.Labels, front.Spec.Template.Labels
	for _, c := range []struct {
		what string
		got  bool
		want bool
	}{
		{"the fronts reach the executors' port", allowed(ep, fl, execPort), true},
		{"any pod reaches the executors' port", allowed(ep, nil, execPort), false},
		{"the executors reach the front's cluster port", allowed(fp, el, frontCluster), true},
		{"any pod reaches the front's cluster port", allowed(fp, nil, frontCluster), false},
		{"clients reach the front's MCP port", allowed(fp, nil, httpPort), true},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
}
