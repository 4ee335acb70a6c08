// Package cliargs is how kubedeploy's commands refuse the arguments they do not take, each with a one-line error
// that says what was wrong and what is allowed: a subcommand that does not exist (with cobra's suggestion), and a
// numeric flag outside its range; AddVersionFlag, the --version (and --version=raw) every command takes; and
// OneLine, how the binaries' main functions print an error. The kubedeploy
// binary (internal/cli) and kubedeploy-controllers both use it, so it imports cobra and nothing of kubedeploy:
// never internal/controlplane, k8s.io/kubernetes or kubectl.
package cliargs
