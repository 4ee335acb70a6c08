package timeline

import (
	"encoding/xml"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	oldRS = "nginx-deployment-5d59d67564"
	newRS = "nginx-deployment-7d9c6b8f5d"
)

// rollout returns the Recording of a 20-replica RollingUpdate with maxSurge
// and maxUnavailable 25% (5 pods each), as the controller does it: each
// step scales the new ReplicaSet up by 5 (25 pods), then the old one down
// by 5; the new pods become available over the next 5 s. A transient
// ReplicaSetCreateError comes before the first step, and an event of an
// earlier rollout ten minutes before the watch.
func rollout() *Recording {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	r := &Recording{
		Namespace: "default", Deployment: "nginx-deployment",
		Replicas: 20, MaxTotal: 25, MinAvailable: 15, Start: start,
		Events: []Event{
			{Time: at(-600), Type: "Normal", Reason: "BeforeTheWatch", Message: "an earlier rollout's"},
			{Time: at(0.2), Type: "Warning", Reason: "ReplicaSetCreateError", Message: "Failed to create new replica set: quota"},
		},
	}
	oldN, newN, newAvail := int32(20), int32(0), int32(0)
	add := func(s float64) {
		rss := []ReplicaSet{{Name: oldRS, Revision: "1", Replicas: oldN, Ready: oldN, Available: oldN}}
		if newN > 0 {
			rss = append(rss, ReplicaSet{Name: newRS, Revision: "2", Replicas: newN, Ready: newAvail, Available: newAvail})
		}
		r.Samples = append(r.Samples, Sample{Time: at(s), ReplicaSets: rss, Available: oldN + newAvail, Total: oldN + newN})
	}
	add(0)
	for step := range 4 {
		t := 0.5 + 5*float64(step)
		newN += 5
		add(t)
		r.Events = append(r.Events, Event{Time: at(t), Type: "Normal", Reason: "ScalingReplicaSet", Message: "Scaled up replica set " + newRS})
		oldN -= 5
		add(t + 0.1)
		r.Events = append(r.Events, Event{Time: at(t + 0.1), Type: "Normal", Reason: "ScalingReplicaSet", Message: "Scaled down replica set " + oldRS})
		for _, d := range []float64{2.5, 4} {
			newAvail += 2
			add(t + d)
		}
		newAvail = newN
		add(t + 4.8)
	}
	return r
}

// written writes rollout() to a file named name in a temporary directory
// and opens it for reading (closed when t ends).
func written(t *testing.T, name string) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := Write(path, rollout()); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestWritePNG(t *testing.T) {
	img, err := png.Decode(written(t, "x.png"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := img.Bounds().Size(), (image.Point{X: 10 * DPI, Y: 5 * DPI}); got != want {
		t.Fatalf("size %v, want %v", got, want)
	}
	colors := map[color.RGBA]int{}
	for y := range img.Bounds().Dy() {
		for x := range img.Bounds().Dx() {
			colors[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
		}
	}
	if len(colors) < 20 {
		t.Errorf("%d distinct colours, want a picture, not a blank", len(colors))
	}
	for name, c := range map[string]color.RGBA{"new ReplicaSet": newColor, "old ReplicaSet": oldColors[0].(color.RGBA), "available": availableColor, "warning": warningColor} {
		if colors[c] < 50 {
			t.Errorf("%s colour %v in %d pixels, want a visible line", name, c, colors[c])
		}
	}
	// The old ReplicaSet is above the new one early (x ≈ 3-5 s) and below
	// it at the end (x ≈ 17-20 s). The data spans about 6% to 65% of the
	// width (0 to 21 s); the legend, with both colours, is past 66%.
	w := img.Bounds().Dx()
	early, late := band{w * 14 / 100, w * 20 / 100}, band{w * 56 / 100, w * 63 / 100}
	if o, n := early.top(img, oldColors[0]), early.top(img, newColor); !(o < n) {
		t.Errorf("early: old ReplicaSet's top at row %d, new one's at %d; want old higher", o, n)
	}
	if o, n := late.top(img, oldColors[0]), late.top(img, newColor); !(n < o) {
		t.Errorf("late: new ReplicaSet's top at row %d, old one's at %d; want new higher", n, o)
	}
}

// band is a vertical strip of an image, columns [from, to).
type band struct{ from, to int }

// top returns the highest row (smallest y) where c appears in the strip,
// or the image's height when it does not.
func (b band) top(img image.Image, c color.Color) int {
	want := color.RGBAModel.Convert(c)
	for y := range img.Bounds().Dy() {
		for x := b.from; x < b.to; x++ {
			if color.RGBAModel.Convert(img.At(x, y)) == want {
				return y
			}
		}
	}
	return img.Bounds().Dy()
}

func TestWriteSVG(t *testing.T) {
	var texts strings.Builder
	dec := xml.NewDecoder(written(t, "x.SVG"))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		if cd, ok := tok.(xml.CharData); ok {
			texts.Write(cd)
		}
	}
	for _, want := range []string{
		"deployment default/nginx-deployment rollout",
		"rev 2 " + newRS, "rev 1 " + oldRS, "rev 2 available",
		"deployment available", "total pods",
		"max total (replicas+maxSurge) = 25", "min available (replicas-maxUnavailable) = 15",
		"ScalingReplicaSet ×2", "ReplicaSetCreateError", "seconds since 2026-03-01 12:00:00 UTC",
	} {
		if !strings.Contains(texts.String(), want) {
			t.Errorf("the SVG's texts lack %q", want)
		}
	}
	if strings.Contains(texts.String(), "BeforeTheWatch") {
		t.Error("the SVG shows an event from before the watch")
	}
}

func TestWriteErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		path string
		r    *Recording
		// is is the error Write must wrap; want are words its message must hold.
		is   error
		want []string
	}{
		{name: "jpg", path: filepath.Join(dir, "x.jpg"), r: rollout(), want: []string{".jpg", ".png", ".svg"}},
		{name: "no extension", path: filepath.Join(dir, "x"), r: rollout(), want: []string{".png", ".svg"}},
		{name: "nil recording", path: filepath.Join(dir, "x.png"), is: ErrEmpty},
		{name: "no samples", path: filepath.Join(dir, "x.svg"), r: &Recording{Deployment: "d"}, is: ErrEmpty},
		{name: "missing directory", path: filepath.Join(dir, "missing", "x.png"), r: rollout(), is: fs.ErrNotExist, want: []string{"missing"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Write(tc.path, tc.r)
			if err == nil {
				t.Fatal("Write succeeded")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q does not wrap %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, err := os.Stat(tc.path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s was written (stat: %v)", tc.path, err)
			}
		})
	}
}

func TestCheckPath(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, path string
		ok         bool
	}{
		{name: "png", path: filepath.Join(dir, "x.png"), ok: true},
		{name: "upper-case svg", path: filepath.Join(dir, "x.SVG"), ok: true},
		{name: "relative", path: "x.png", ok: true},
		{name: "pdf", path: filepath.Join(dir, "x.pdf")},
		{name: "missing directory", path: filepath.Join(dir, "missing", "x.png")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckPath(tc.path); (err == nil) != tc.ok {
				t.Errorf("CheckPath(%q) = %v, want ok %v", tc.path, err, tc.ok)
			}
		})
	}
}

// TestWriteSamplePicture writes the sample rollout's picture to the path
// in $TIMELINE_SAMPLE, for a person to look at.
func TestWriteSamplePicture(t *testing.T) {
	path := os.Getenv("TIMELINE_SAMPLE")
	if path == "" {
		t.Skip("TIMELINE_SAMPLE is not set")
	}
	if err := Write(path, rollout()); err != nil {
		t.Fatal(err)
	}
}
