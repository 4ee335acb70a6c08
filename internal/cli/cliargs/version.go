package cliargs

import (
	"errors"
	"io"
	"runtime/debug"
	"strconv"

	"github.com/spf13/cobra"
)

// AddVersionFlag gives root, and every command under it that parses its flags, --version: given, the command
// prints summary (the one-line version report, buildinfo.Summary) on its output and exits 0 without running or
// checking its arguments, as `kubedeploy version` would; --version=raw prints the Go build information of the
// binary instead, as `go version -m` shows it (module versions and build settings); --version=false runs the
// command as usual. Any other value is refused by flag parsing. A command with DisableFlagParsing (`kubedeploy
// kubectl`, whose arguments are kubectl's) is left alone.
//
// The flag is root's persistent flag, so it also takes the place of component-base's global --version
// (k8s.io/component-base/version/verflag, which cobra would copy in from pflag.CommandLine and which prints
// nothing unless a program calls it). Call AddVersionFlag once the tree is complete and after
// RefuseUnknownSubcommands: it wraps each command's Args, the first thing cobra runs after parsing flags, so
// that --version wins over a missing or unknown argument.
func AddVersionFlag(root *cobra.Command, summary string) {
	v := &versionValue{}
	flag := root.PersistentFlags().VarPF(v, "version", "",
		"print the version and exit (--version=raw: the Go build information, module versions and build settings)")
	flag.NoOptDefVal = "true"
	var visit func(c *cobra.Command)
	visit = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			visit(sub)
		}
		if !c.DisableFlagParsing {
			interceptVersion(c, v, summary)
		}
	}
	visit(root)
}

// interceptVersion wraps c's Args: when v asks for the version, the rest of this run of c (its persistent and
// own hooks, and its Run) is replaced by printing it.
func interceptVersion(c *cobra.Command, v *versionValue, summary string) {
	accept := c.Args
	if accept == nil {
		accept = cobra.ArbitraryArgs // cobra's own default
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if !v.print {
			return accept(cmd, args)
		}
		skip := func(*cobra.Command, []string) error { return nil }
		// cobra runs the first persistent hook it finds from cmd up, so cmd's own no-op stops its parents'.
		cmd.PersistentPreRun, cmd.PersistentPreRunE = nil, skip
		cmd.PreRun, cmd.PreRunE = nil, nil
		cmd.PostRun, cmd.PostRunE = nil, nil
		cmd.PersistentPostRun, cmd.PersistentPostRunE = nil, skip
		cmd.Run, cmd.RunE = nil, func(cmd *cobra.Command, _ []string) error {
			return v.write(cmd.OutOrStdout(), summary)
		}
		return nil
	}
}

// versionValue is the value of --version: true, false or raw. Its Type is "bool" so that help shows the flag
// as a switch, --version, and pflag gives --version alone the value true (NoOptDefVal).
type versionValue struct {
	// print is whether to print the version; raw whether the build information instead of the summary.
	print, raw bool
}

// errVersionValue is Set's error: pflag prefixes it with the value and the flag.
var errVersionValue = errors.New("want true, false or raw")

// Set takes true or false (as strconv.ParseBool reads them) or raw.
func (v *versionValue) Set(s string) error {
	if s == "raw" {
		v.print, v.raw = true, true
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errVersionValue
	}
	v.print, v.raw = b, false
	return nil
}

// String returns "raw", "true" or "false".
func (v *versionValue) String() string {
	if v.raw {
		return "raw"
	}
	return strconv.FormatBool(v.print)
}

// Type is "bool": see versionValue.
func (v *versionValue) Type() string { return "bool" }

// write prints summary, or with raw the binary's build information, on out.
func (v *versionValue) write(out io.Writer, summary string) error {
	text := summary + "\n"
	if v.raw {
		info, ok := debug.ReadBuildInfo()
		if !ok {
			return errors.New("--version=raw: this binary has no Go build information")
		}
		text = info.String() // a line per field, each ending in a newline
	}
	_, err := io.WriteString(out, text)
	return err
}
