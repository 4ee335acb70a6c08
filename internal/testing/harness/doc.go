// Package harness is the integration-test harness: it starts one embedded
// control plane per test package (from TestMain) with the kubedeploy
// controllers running on it, hands each test its own namespace, and watches
// the rolling-update invariants continuously while a test runs.
//
// It is imported only by tests. It must not hold controller logic: what it
// checks is computed from what the API server shows.
package harness
