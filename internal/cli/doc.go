// Package cli holds kubedeploy's cobra commands, one file each (up,
// controllers, kubectl, version; root.go wires them). Commands turn flags
// into the Config structs of the packages that do the work (controlplane,
// manager) and print what a user needs to know; they contain no controller
// or cluster logic of their own.
package cli
