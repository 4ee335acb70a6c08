// Package faultproxy is a fault-injecting reverse proxy for fault tests: it
// sits between kubedeploy's controllers (or any client-go client) and a real
// kube-apiserver and, following Rules that a test can change at any moment,
// delays watch streams, closes them, or answers requests with the errors real
// clusters produce (429 TooManyRequests, 500 InternalError, 504 Timeout,
// optionally after the request has reached the API server).
//
// It owns: one plain-HTTP listener on 127.0.0.1, the forwarding of every
// request to the API server with the credentials of an upstream rest.Config
// (so the proxy's clients carry none), the classification of requests with
// kube-apiserver's own RequestInfoFactory, the bookkeeping of open watch
// streams, and replayable (seeded) random fault choice.
//
// It is test-only. It must never be imported by non-test code outside
// internal/testing and test/, must never listen on anything but loopback, and
// must never change the content of what it forwards: it only delays, cuts or
// replaces whole responses. It holds no controller logic.
package faultproxy
