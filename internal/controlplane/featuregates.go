package controlplane

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

// ValidateFeatureGates returns the error kube-apiserver would give for gates, in its --feature-gates syntax
// ("A=true,B=false"), applied over DefaultFeatureGates: a pair without "=", a value that is not a boolean, a gate
// this Kubernetes release does not know, or one locked to its default. "" is valid. It changes no gate.
func ValidateFeatureGates(gates string) error {
	_, err := featureGates(gates)
	return err
}

// featureGates returns DefaultFeatureGates with overrides (kube-apiserver's --feature-gates syntax) applied over
// them, as the value of kube-apiserver's --feature-gates: "Name=bool" pairs sorted by name. It returns
// ValidateFeatureGates' errors, checked on a copy of the process's feature gate reset to its defaults.
func featureGates(overrides string) (string, error) {
	gates, err := parseFeatureGates(DefaultFeatureGates)
	if err != nil {
		return "", err
	}
	more, err := parseFeatureGates(overrides)
	if err != nil {
		return "", err
	}
	maps.Copy(gates, more)
	if err := utilfeature.DefaultMutableFeatureGate.DeepCopyAndReset().SetFromMap(gates); err != nil {
		return "", err
	}
	pairs := make([]string, 0, len(gates))
	for _, name := range slices.Sorted(maps.Keys(gates)) {
		pairs = append(pairs, name+"="+strconv.FormatBool(gates[name]))
	}
	return strings.Join(pairs, ","), nil
}

// parseFeatureGates parses kube-apiserver's --feature-gates syntax, "A=true,B=false" (empty pairs and spaces
// around names and values ignored, a later pair overriding an earlier one), into gate name → enabled. It returns
// an error naming the first pair without "=" or with a value strconv.ParseBool refuses.
func parseFeatureGates(s string) (map[string]bool, error) {
	gates := map[string]bool{}
	for pair := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		name, value, ok := strings.Cut(pair, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not Name=true or Name=false", pair)
		}
		enabled, err := strconv.ParseBool(value)
		if err != nil {
			return nil, fmt.Errorf("%q is not Name=true or Name=false", pair)
		}
		gates[name] = enabled
	}
	return gates, nil
}

// resetFeatureGates puts the process-global feature gates of Kubernetes components back to how the process
// started: every gate at its default, and kube-apiserver's flags registry (which accumulates the values of every
// --feature-gates it has parsed and re-applies them on each Set) emptied. kube-apiserver, kube-controller-manager
// and kube-scheduler all read utilfeature.DefaultFeatureGate, so without this a control plane would inherit the
// gates an earlier one in the same process set. Call it only while no control plane runs. It cannot forget a gate
// name the process's gate does not know: kube-apiserver records one before refusing it, and every later Set fails
// on it; featureGates refuses unknown names (on a copy) so none ever gets that far. It returns an error when a
// gate cannot be reset.
func resetFeatureGates() error {
	compatibility.DefaultComponentGlobalsRegistry.Reset()
	gate := utilfeature.DefaultMutableFeatureGate
	for name := range gate.GetAll() {
		if gate.ExplicitlySet(name) {
			if err := gate.ResetFeatureValueToDefault(name); err != nil {
				return err
			}
		}
	}
	return nil
}
