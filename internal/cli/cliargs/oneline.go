package cliargs

import (
	"errors"
	"strings"
)

// OneLine returns err's message on one line, as the binaries' main functions print errors: the lines of an error
// joined from several (errors.Join puts each on its own) are separated by "; ", and blank ones dropped.
func OneLine(err error) string {
	var parts []string
	for line := range strings.Lines(err.Error()) {
		if line = strings.TrimSpace(line); line != "" {
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, "; ")
}

// ExitCode returns the process exit code for err, a command's error: the ExitCode of the first error in its
// chain that has one (e.g. 3 from `rollout watch` while an invalid kubedeploy.io/ value holds a rollout), else 1.
func ExitCode(err error) int {
	var coder interface{ ExitCode() int }
	if errors.As(err, &coder) {
		return coder.ExitCode()
	}
	return 1
}
