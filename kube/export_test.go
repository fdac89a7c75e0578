package kube

import "testing"

// Plane is the control plane TestMain started, for the package's tests
// that drive the p2pfault command (package kube_test: cli imports kube):
// its kubeconfig and the pods' namespace, or why the tests skip.
func Plane() (kubeconfig, ns, skip string) { return plane.kubeconfig, plane.ns, plane.skip }

// InstallChaosMesh is installChaosMesh, for package kube_test.
func InstallChaosMesh(t *testing.T) { installChaosMesh(t) }
