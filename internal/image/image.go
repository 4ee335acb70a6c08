// Package image builds the container image of the controllers-only binary
// (cmd/kubedeploy-controllers) without a Docker daemon, with
// go-containerregistry: a scratch base, one layer holding the static binary,
// an entrypoint and a non-root user. The Dockerfile at the repository root
// builds the same image with Docker for users who prefer it. It must not
// hold anything but the image recipe.
package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Path is where the binary sits in the image, and the entrypoint.
const Path = "/kubedeploy-controllers"

// User is the image's user: the distroless "nonroot" uid:gid, which
// deploy/20-statefulset.yaml's runAsUser expects.
const User = "65532:65532"

// Options describe the image. Binary is required.
type Options struct {
	// Binary is the path of a static linux binary (CGO_ENABLED=0) of
	// cmd/kubedeploy-controllers for Platform.
	Binary string
	// Version labels the image (org.opencontainers.image.version).
	Version string
	// Platform is the image's OS/architecture; default linux/amd64.
	Platform v1.Platform
}

// Build returns the image: scratch plus one layer with opts.Binary at Path
// (mode 0755, owned by root, so the non-root user can run but not replace
// it), entrypoint [Path], user User, and OCI labels. Layer and config times
// are the Unix epoch, so the same binary always gives the same digest. It
// returns an error when the binary cannot be read or is empty.
func Build(opts Options) (v1.Image, error) {
	data, err := os.ReadFile(opts.Binary)
	if err != nil {
		return nil, fmt.Errorf("image: reading the binary: %w", err)
	}
	if len(data) == 0 {
		return nil, errors.New("image: the binary is empty")
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(binaryTar(data))), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image: building the layer: %w", err)
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, fmt.Errorf("image: adding the layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	platform := opts.Platform
	if platform.OS == "" {
		platform = v1.Platform{OS: "linux", Architecture: "amd64"}
	}
	cfg.OS, cfg.Architecture = platform.OS, platform.Architecture
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cfg.Config.Entrypoint = []string{Path}
	cfg.Config.User = User
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   "kubedeploy-controllers",
		"org.opencontainers.image.source":  "https://github.com/kubedeploy/kubedeploy",
		"org.opencontainers.image.version": opts.Version,
	}
	return mutate.ConfigFile(img, cfg)
}

// binaryTar returns a tar stream holding data as the file Path.
func binaryTar(data []byte) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// Writes to a bytes.Buffer cannot fail.
	_ = tw.WriteHeader(&tar.Header{
		Name:     path.Base(Path),
		Mode:     0o755,
		Size:     int64(len(data)),
		Typeflag: tar.TypeReg,
		ModTime:  time.Unix(0, 0),
		Format:   tar.FormatPAX,
	})
	_, _ = tw.Write(data)
	_ = tw.Close()
	return buf.Bytes()
}

// WriteTarball writes img as a tarball that `docker load` and `crane push`
// read, tagged tag (e.g. "ghcr.io/kubedeploy/kubedeploy-controllers:v0.2.0").
// It returns an error for an invalid tag or a failed write.
func WriteTarball(file, tag string, img v1.Image) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("image: tag %q: %w", tag, err)
	}
	if err := tarball.WriteToFile(file, ref, img); err != nil {
		return fmt.Errorf("image: writing %s: %w", file, err)
	}
	return nil
}

// WriteLayout writes img as an OCI image layout in dir (created if needed),
// the format registries' tools (crane, skopeo, oras) copy from.
func WriteLayout(dir string, img v1.Image) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("image: OCI layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img); err != nil {
		return fmt.Errorf("image: OCI layout %s: %w", dir, err)
	}
	return nil
}
