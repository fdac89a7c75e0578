package kube

import (
	"k8s.io/client-go/dynamic"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	networkingv1 "k8s.io/client-go/kubernetes/typed/networking/v1"
	"k8s.io/client-go/rest"
)

// clientset is the three API groups a run uses, alone: client-go's whole
// Clientset would build every group's typed client into p2pfault; and a
// dynamic client for Chaos Mesh's NetworkChaos (chaos.go), whose Go types
// would bring Chaos Mesh's module in.
type clientset struct {
	core corev1.CoreV1Interface
	net  networkingv1.NetworkingV1Interface
	auth authorizationv1.AuthorizationV1Interface
	dyn  dynamic.Interface
}

func newClientset(rc *rest.Config) (*clientset, error) {
	core, err := corev1.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	net, err := networkingv1.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	auth, err := authorizationv1.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &clientset{core: core, net: net, auth: auth, dyn: dyn}, nil
}

func (c *clientset) CoreV1() corev1.CoreV1Interface                            { return c.core }
func (c *clientset) NetworkingV1() networkingv1.NetworkingV1Interface          { return c.net }
func (c *clientset) AuthorizationV1() authorizationv1.AuthorizationV1Interface { return c.auth }
