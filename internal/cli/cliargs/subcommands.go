package cliargs

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// RefuseUnknownSubcommands makes every command under root (root included) that has subcommands refuse an
// argument naming none of them, with UnknownCommandError, instead of printing its help and succeeding as cobra
// does for a command that cannot run. A group that cannot run itself (no Run or RunE) prints its help when given
// no argument, as before. A group that runs keeps its Args for what they accept; what they refuse is reported as
// an unknown subcommand. `help TOPIC` refuses an unknown topic the same way.
//
// Call it once the tree is complete: it adds cobra's default help and completion commands first, so that they
// are covered too. It returns nothing; commands added later are not covered.
func RefuseUnknownSubcommands(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	refuseUnknown(root)
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			refuseUnknownHelpTopic(c)
		}
	}
}

// refuseUnknown sets the Args (and, for a group that cannot run, RunE) of c and of every command below it.
func refuseUnknown(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknown(sub)
	}
	if !c.HasSubCommands() {
		return
	}
	if !c.Runnable() {
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		c.Args = cobra.NoArgs
	}
	accept := c.Args
	if accept == nil {
		accept = cobra.NoArgs
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if err := accept(cmd, args); err != nil {
			if len(args) > 0 {
				return UnknownCommandError(cmd, args[0])
			}
			return err
		}
		return nil
	}
}

// refuseUnknownHelpTopic makes cobra's help command return UnknownCommandError for a topic that names no command
// where cobra prints "Unknown help topic" and the usage and succeeds.
func refuseUnknownHelpTopic(help *cobra.Command) {
	show := help.Run
	help.Run = nil
	help.RunE = func(c *cobra.Command, args []string) error {
		found, rest, err := c.Root().Find(args)
		if err != nil {
			return err
		}
		if len(rest) > 0 {
			return UnknownCommandError(found, rest[0])
		}
		show(c, args)
		return nil
	}
}

// UnknownCommandError returns the one-line error for name given where c expects a subcommand:
// `unknown command "wacth" for "kubedeploy rollout"; did you mean "watch"?`, with cobra's suggestions (names
// within c.SuggestionsMinimumDistance edits, default 2, or starting with name), or without the question when
// there are none.
func UnknownCommandError(c *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, c.CommandPath())
	if c.DisableSuggestions {
		return fmt.Errorf("%s", msg)
	}
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	suggestions := c.SuggestionsFor(name)
	if len(suggestions) == 0 {
		return fmt.Errorf("%s", msg)
	}
	quoted := make([]string, len(suggestions))
	for i, s := range suggestions {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return fmt.Errorf("%s; did you mean %s?", msg, strings.Join(quoted, " or "))
}
