// crdcheck validates the prometheus-operator custom resources in a stream of Kubernetes
// manifests (multi-document YAML on stdin) by decoding each ServiceMonitor and PrometheusRule
// strictly into prometheus-operator's own Go API types: an unknown or misspelt field, or a
// value of the wrong type, is an error. Other kinds are skipped (they are validated against
// the Kubernetes JSON schemas elsewhere). It prints one line per checked resource and exits
// 1 when any resource is invalid.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

func check(doc []byte) (string, error) {
	var h header
	if err := yaml.Unmarshal(doc, &h); err != nil {
		return "", fmt.Errorf("not a Kubernetes object: %w", err)
	}
	var target any
	switch {
	case h.APIVersion == "monitoring.coreos.com/v1" && h.Kind == "ServiceMonitor":
		target = &monitoringv1.ServiceMonitor{}
	case h.APIVersion == "monitoring.coreos.com/v1" && h.Kind == "PrometheusRule":
		target = &monitoringv1.PrometheusRule{}
	case h.APIVersion == "monitoring.coreos.com/v1" && h.Kind == "PodMonitor":
		target = &monitoringv1.PodMonitor{}
	default:
		return "", nil
	}
	name := h.Kind + "/" + h.Metadata.Name
	if err := yaml.UnmarshalStrict(doc, target); err != nil {
		return name, err
	}
	return name, nil
}

func main() {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(os.Stdin))
	failed := 0
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "crdcheck: cannot read the manifests: %v\n", err)
			os.Exit(2)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		name, err := check(doc)
		switch {
		case err != nil:
			failed++
			fmt.Printf("INVALID %s: %v\n", name, err)
		case name != "":
			fmt.Printf("ok %s\n", name)
		}
	}
	if failed > 0 {
		os.Exit(1)
	}
}
