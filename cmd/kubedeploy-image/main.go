// Command kubedeploy-image builds the container image of kubedeploy's
// controllers-only binary without a Docker daemon: it compiles
// ./cmd/kubedeploy-controllers as a static linux binary and writes the image
// (internal/image) as a `docker load` tarball and/or an OCI layout.
//
//	go run ./cmd/kubedeploy-image --tag ghcr.io/kubedeploy/kubedeploy-controllers:v0.2.0 --tarball image.tar
//	docker load -i image.tar    # or: crane push image.tar ghcr.io/...
//
// Run it from the repository root.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kubedeploy/kubedeploy/internal/buildinfo"
	"github.com/kubedeploy/kubedeploy/internal/image"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "kubedeploy-image: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("kubedeploy-image", flag.ContinueOnError)
	tag := fs.String("tag", "ghcr.io/kubedeploy/kubedeploy-controllers:latest", "image reference written into the tarball")
	version := fs.String("version", "", "version stamped into the binary (-ldflags) and the image label; default: the binary's own")
	tarballPath := fs.String("tarball", "", "write a `docker load` tarball here")
	layoutDir := fs.String("oci-layout", "", "write an OCI image layout into this directory")
	arch := fs.String("arch", "amd64", "GOARCH of the image")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tarballPath == "" && *layoutDir == "" {
		return errors.New("nothing to write: give --tarball and/or --oci-layout")
	}
	dir, err := os.MkdirTemp("", "kubedeploy-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "kubedeploy-controllers")
	if err := buildBinary(bin, *arch, *version); err != nil {
		return err
	}
	img, err := image.Build(image.Options{Binary: bin, Version: *version, Platform: v1.Platform{OS: "linux", Architecture: *arch}})
	if err != nil {
		return err
	}
	if *tarballPath != "" {
		if err := image.WriteTarball(*tarballPath, *tag, img); err != nil {
			return err
		}
	}
	if *layoutDir != "" {
		if err := image.WriteLayout(*layoutDir, img); err != nil {
			return err
		}
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("built %s (%s)\n", *tag, digest)
	return nil
}

// buildBinary compiles ./cmd/kubedeploy-controllers into out as a static
// linux/arch binary, stamping version when it is set.
func buildBinary(out, arch, version string) error {
	args := []string{"build", "-trimpath", "-o", out}
	if version != "" {
		args = append(args, "-ldflags", "-X "+buildinfo.VersionVariable+"="+version)
	}
	cmd := exec.Command("go", append(args, "./cmd/kubedeploy-controllers")...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/kubedeploy-controllers: %w", err)
	}
	return nil
}
