// Package timeline draws the picture that `kubedeploy rollout watch
// --timeline FILE.png|FILE.svg` writes at the end of a rollout (issue 11):
// every ReplicaSet's size (spec.replicas, pods) and available pods over
// time (seconds since the rollout started), the Deployment's available and
// total pods, the maxSurge and maxUnavailable bounds as horizontal lines,
// and the Deployment's events as ticks labelled with their reason.
//
// It owns the Recorder, which builds a Recording from the objects a watch
// sees (package watcher tells it), and the rendering of a Recording. It must
// never talk to the API server, read the clock or print: every time comes
// from its caller and everything it draws from the Recording, so the same
// Recording always gives the same picture. The drawing is done by gonum.org/v1/plot
// (plot, plotter, vg, vg/draw), never by hand.
package timeline
