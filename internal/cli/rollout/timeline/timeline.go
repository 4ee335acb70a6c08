package timeline

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The picture's size: Width x Height, and PNGs at DPI pixels per inch, so a
// PNG is 1440x720 pixels.
const (
	Width  = 10 * vg.Inch
	Height = 5 * vg.Inch
	DPI    = 144
)

// Recording is what `rollout watch` collects about one Deployment's
// rollout for its timeline (issue 11).
type Recording struct {
	Namespace, Deployment string
	// Replicas is the Deployment's spec.replicas.
	Replicas int32
	// MaxTotal is Replicas plus the resolved maxSurge, in pods: the most
	// pods the rollout may run at once. 0 when unknown or for the Recreate
	// strategy: then no line is drawn.
	MaxTotal int32
	// MinAvailable is Replicas minus the resolved maxUnavailable, in pods:
	// the fewest available pods the rollout may leave. 0 draws no line.
	MinAvailable int32
	// Start is time 0 of the x axis (seconds). Zero: the first sample's time.
	Start time.Time
	// End is when the watch stopped; the last state is drawn until then.
	// Zero: the last sample's or event's time.
	End time.Time
	// Samples are the states after each change, in time order.
	Samples []Sample
	// Events are the Deployment's events; those before the first of Start
	// and the first sample are not drawn.
	Events []Event
}

// Sample is the state of a Deployment and its ReplicaSets at Time.
type Sample struct {
	Time time.Time
	// ReplicaSets are all the Deployment's ReplicaSets at Time; one missing
	// from a sample is drawn with 0 replicas then.
	ReplicaSets []ReplicaSet
	// Available is the Deployment's status.availableReplicas (pods).
	Available int32
	// Total is the Deployment's status.replicas: the pods of all its
	// ReplicaSets, surge included.
	Total int32
}

// ReplicaSet is one ReplicaSet in a Sample, identified by Name.
type ReplicaSet struct {
	Name string
	// Revision is its deployment.kubernetes.io/revision annotation; the
	// highest is the new ReplicaSet.
	Revision string
	// Replicas is spec.replicas; Ready and Available are
	// status.readyReplicas and status.availableReplicas (pods).
	Replicas, Ready, Available int32
}

// Event is one Deployment event (Type is Normal or Warning).
type Event struct {
	Time                  time.Time
	Type, Reason, Message string
}

// ErrEmpty is returned by Write for a nil Recording or one without samples.
var ErrEmpty = errors.New("timeline: the recording has no samples")

// Write renders r's timeline (issue 11) to path, as a PNG (Width x Height
// at DPI) or an SVG as path's extension says (.png or .svg, in any case).
// It returns an error naming the allowed extensions for any other,
// ErrEmpty for an empty recording, and an error wrapping the file system's
// when path cannot be written. Nothing is written on error.
func Write(path string, r *Recording) error {
	format, err := formatOf(path)
	if err != nil {
		return err
	}
	if r == nil || len(r.Samples) == 0 {
		return ErrEmpty
	}
	c := newCanvas(format)
	drawRecording(draw.New(c), r)
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return fmt.Errorf("timeline: rendering %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	return nil
}

// CheckPath returns the error Write would return for path's extension, or
// for a directory that does not exist, so that the watch command can
// refuse a bad --timeline before it records a whole rollout.
func CheckPath(path string) error {
	if _, err := formatOf(path); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Dir(path)); err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	return nil
}

// formatOf returns "png" or "svg" from path's extension.
func formatOf(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".png", ".svg":
		return ext[1:], nil
	default:
		return "", fmt.Errorf("timeline %s: unsupported format %q, use .png or .svg", path, filepath.Ext(path))
	}
}

// newCanvas returns a Width x Height canvas for format "png" or "svg".
func newCanvas(format string) vg.CanvasWriterTo {
	if format == "svg" {
		return vgsvg.New(Width, Height)
	}
	return vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(Width, Height), vgimg.UseDPI(DPI))}
}
