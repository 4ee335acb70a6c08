package controlplane

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/apiserver/pkg/audit/policy"
)

// checkAudit returns an error unless policyFile and logPath (Config.AuditPolicyFile and AuditLogPath) are both
// empty, or policyFile is a valid audit policy (ValidateAuditPolicy) and logPath a file path other than "-".
func checkAudit(policyFile, logPath string) error {
	switch {
	case policyFile == "" && logPath == "":
		return nil
	case policyFile == "":
		return errors.New("an audit log path needs an audit policy file: without one kube-apiserver audits nothing")
	case logPath == "":
		return errors.New("an audit policy file needs an audit log path to write the events to")
	case logPath == "-":
		return errors.New(`audit log path "-" (standard output) is not supported: give a file`)
	}
	if err := ValidateAuditPolicy(policyFile); err != nil {
		return fmt.Errorf("audit policy file %w", err)
	}
	return nil
}

// ValidateAuditPolicy reads path and returns an error unless it holds an audit policy kube-apiserver accepts (an
// audit.k8s.io/v1 Policy with valid rules): "P does not exist", or "P: " and kube-apiserver's own reason. It only
// reads path.
func ValidateAuditPolicy(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s does not exist", path)
	}
	if _, err := policy.LoadPolicyFromFile(path); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
