package cliargs

import "strings"

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
