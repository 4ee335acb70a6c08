// Package cli holds the `kubedeploy` command (cmd/kubedeploy): one file per
// subcommand (up, kubectl, version; root.go wires them). `controllers` lives
// in the subpackage controllerscmd, which does not import internal/controlplane
// so that the controllers-only binary cmd/kubedeploy-controllers can share it
// without linking the embedded control plane; the root command adds it
// unchanged. Commands turn flags into the Config structs of the packages that
// do the work (controlplane, manager) and print what a user needs to know;
// they contain no controller or cluster logic of their own.
//
// kubeconfig.go decides which kubeconfig `kubedeploy kubectl` and `kubedeploy
// rollout` read (--data-dir, KUBECONFIG, KUBEDEPLOY_DATA_DIR, ~/.kubedeploy)
// and words the error when it is missing; hints.go builds what up's banner
// suggests running, runnable as printed. Errors reach main as one line
// (internal/cli/cliargs), and an unknown subcommand is one.
//
// kubectlversion.go gives the bundled kubectl its release version at run time
// (Kubernetes' builds set it with -ldflags), the one place this package links
// to another package's unexported variables.
package cli
