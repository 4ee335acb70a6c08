package image

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubedeploy/kubedeploy/internal/buildinfo"
)

const testVersion = "v0.0.0-imagetest"

// TestImageRunsTheControllersBinary is issue 9's image check, without a
// Docker daemon: build cmd/kubedeploy-controllers as a static binary, build
// the image, write it as a `docker load` tarball and an OCI layout, read the
// tarball back, and check the entrypoint, the non-root user, the platform and
// labels, and that the binary inside the image runs `--version`.
func TestImageRunsTheControllersBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the controllers binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "kubedeploy-controllers")
	build := exec.Command("go", "build", "-trimpath", "-o", bin,
		"-ldflags", "-X "+buildinfo.VersionVariable+"="+testVersion,
		"github.com/kubedeploy/kubedeploy/cmd/kubedeploy-controllers")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	img, err := Build(Options{Binary: bin, Version: testVersion, Platform: v1.Platform{OS: "linux", Architecture: runtime.GOARCH}})
	if err != nil {
		t.Fatal(err)
	}
	const tag = "ghcr.io/kubedeploy/kubedeploy-controllers:" + testVersion
	tarPath := filepath.Join(dir, "image.tar")
	if err := WriteTarball(tarPath, tag, img); err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := tarball.ImageFromPath(tarPath, &ref)
	if err != nil {
		t.Fatalf("reading the tarball back: %v", err)
	}
	checkConfig(t, loaded)
	if out := runFromImage(t, loaded, dir); !strings.Contains(out, "kubedeploy-controllers "+testVersion) {
		t.Errorf("%s --version printed %q, want the stamped version %s", Path, out, testVersion)
	}

	layoutDir := filepath.Join(dir, "oci")
	if err := WriteLayout(layoutDir, img); err != nil {
		t.Fatal(err)
	}
	checkLayout(t, layoutDir, img)
}

// checkConfig fails t unless img is an OCI image of one layer whose config
// has the entrypoint, user, platform and labels Build promises.
func checkConfig(t *testing.T, img v1.Image) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{Path}) || cfg.Config.User != User {
		t.Errorf("entrypoint %v, user %q; want [%s], %q", cfg.Config.Entrypoint, cfg.Config.User, Path, User)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, runtime.GOARCH)
	}
	if v := cfg.Config.Labels["org.opencontainers.image.version"]; v != testVersion {
		t.Errorf("version label %q, want %q", v, testVersion)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1: scratch plus the binary", len(layers), err)
	}
}

// runFromImage extracts Path from img's filesystem into dir, checks it is
// mode 0755 and runs it with --version, returning its output.
func runFromImage(t *testing.T, img v1.Image, dir string) string {
	t.Helper()
	fs := mutate.Extract(img)
	defer fs.Close()
	tr := tar.NewReader(fs)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s is not in the image", Path)
		}
		if err != nil {
			t.Fatal(err)
		}
		if "/"+strings.TrimPrefix(h.Name, "/") != Path {
			continue
		}
		if h.Mode&0o777 != 0o755 || h.Uid != 0 {
			t.Errorf("%s has mode %o, uid %d; want 755 owned by root", Path, h.Mode&0o777, h.Uid)
		}
		out := filepath.Join(dir, "from-image")
		f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		version, err := exec.Command(out, "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", Path, err, version)
		}
		return string(version)
	}
}

// checkLayout fails t unless dir is an OCI layout holding exactly img.
func checkLayout(t *testing.T, dir string, img v1.Image) {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Digest != want || m.Manifests[0].MediaType != types.OCIManifestSchema1 {
		t.Errorf("OCI layout manifests %+v, want one OCI manifest %s", m.Manifests, want)
	}
}

// TestBuildIsReproducible: the same binary always gives the same digest (no
// timestamps of the build machine in the layer or config).
func TestBuildIsReproducible(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var digests []v1.Hash
	for range 2 {
		img, err := Build(Options{Binary: bin, Version: "v1"})
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
	}
	if digests[0] != digests[1] {
		t.Errorf("digests %v differ", digests)
	}
}

// TestBuildErrors: a missing or empty binary is an error, not an image.
func TestBuildErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{filepath.Join(dir, "missing"), empty} {
		if _, err := Build(Options{Binary: bin}); err == nil {
			t.Errorf("Build(%s) succeeded, want an error", bin)
		}
	}
	if err := WriteTarball(filepath.Join(dir, "x.tar"), "Not A Tag!", nil); err == nil {
		t.Error("WriteTarball with an invalid tag succeeded")
	}
}
