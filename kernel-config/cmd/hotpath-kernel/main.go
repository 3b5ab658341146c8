// Command hotpath-kernel builds hotpath's appliance kernel.
//
//	hotpath-kernel build  [-arch amd64|arm64] [-source tree|tarball] [-cache dir] [-initramfs f.cpio] [-cmdline s] [-j n] [-o out/bzImage]
//	hotpath-kernel config [-arch amd64|arm64] [-source tree|tarball] [-cache dir] [-print]
//	hotpath-kernel fragments
//
// build merges the fragments onto allnoconfig, verifies the policy, builds
// (or reuses from the cache) a bzImage (arm64: an Image, cross-built with
// gcc-aarch64-linux-gnu) with the initramfs and command line built in, and prints where it is, its size and the policy summary.
// config stops after the verification. fragments prints the fragments.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	kernelconfig "github.com/hotpath-dev/hotpath/kernel-config"
)

func usage() {
	fmt.Fprintf(os.Stderr, `usage: hotpath-kernel <command> [flags]

commands:
  build      configure, verify the policy and build the bzImage (cached)
  config     configure and verify the policy only; print the summary
  fragments  print the built-in Kconfig fragments

The kernel source defaults to %s (Debian's linux-source-6.12;
-source %s builds the previous 6.1 LTS);
the cache to $HOTPATH_CACHE, else $XDG_CACHE_HOME/hotpath, else ~/.cache/hotpath.
Run "hotpath-kernel <command> -h" for the flags of a command.
`, kernelconfig.DefaultSource, kernelconfig.Linux61Source)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "build":
		err = build(ctx, args)
	case "config":
		err = configure(ctx, args)
	case "fragments":
		err = fragments(os.Stdout)
	case "-h", "-help", "--help", "help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "hotpath-kernel: unknown command %q\n\n", cmd)
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "hotpath-kernel: %v\n", err)
		os.Exit(1)
	}
}

func commonFlags(fs *flag.FlagSet, o *kernelconfig.Options) {
	fs.StringVar(&o.Source, "source", "", "Linux source tree or tarball (default "+kernelconfig.DefaultSource+")")
	fs.StringVar(&o.Arch, "arch", "amd64", "target `architecture`: amd64 or arm64 (cross-built with gcc-aarch64-linux-gnu)")
	fs.StringVar(&o.CacheDir, "cache", "", "cache directory (default $HOTPATH_CACHE, $XDG_CACHE_HOME/hotpath or ~/.cache/hotpath)")
}

func build(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	var o kernelconfig.Options
	commonFlags(fs, &o)
	fs.StringVar(&o.Initramfs, "initramfs", "", "newc cpio archive to build in (default: none)")
	fs.StringVar(&o.Cmdline, "cmdline", "", "appended to the built-in command line (after \"console=ttyS0 mitigations=off\")")
	fs.IntVar(&o.Jobs, "j", 0, "parallel make jobs (default: number of CPUs)")
	out := fs.String("o", "", "also copy the bzImage here")
	fs.Parse(args)
	o.Log = os.Stderr
	r, err := kernelconfig.Build(ctx, o)
	if err != nil {
		return err
	}
	path := r.BzImage
	if *out != "" {
		if err := copyFile(r.BzImage, *out); err != nil {
			return err
		}
		path = *out
	}
	state := "built in " + r.Duration.Round(time.Second).String()
	if r.Cached {
		state = "from cache"
	}
	fmt.Printf("bzImage: %s\n", path)
	fmt.Printf("size:    %d bytes (%.1f MiB), sha256 %s\n", r.Size, float64(r.Size)/(1<<20), r.SHA256)
	fmt.Printf("kernel:  Linux %s, %s, %s\n", r.Version, r.Compiler, state)
	fmt.Printf("cmdline: %s\n", r.Cmdline)
	fmt.Printf("key:     %s\nconfig:  %s\nlog:     %s\n", r.Key, r.Config, r.LogFile)
	fmt.Print(r.Summary)
	return nil
}

func configure(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("config", flag.ExitOnError)
	var o kernelconfig.Options
	commonFlags(fs, &o)
	print := fs.Bool("print", false, "print the merged .config")
	fs.Parse(args)
	o.Log = os.Stderr
	c, err := kernelconfig.Configure(ctx, o)
	if err != nil {
		return err
	}
	if *print {
		fmt.Print(c.Config)
		return nil
	}
	fmt.Printf("source:  %s (Linux %s)\n", c.Source.Tree, c.Source.Version)
	fmt.Printf("         %s\n", c.Source.ID)
	fmt.Printf("compiler: %s\n", c.Toolchain.Compiler)
	fmt.Printf("config sha256: %s\nkey: %s\n", c.ConfigSHA256, c.Key)
	fmt.Printf("cmdline: %s\n", c.PolicyCmdline)
	fmt.Print(c.Summary)
	return nil
}

func fragments(w io.Writer) error {
	var names []string
	for _, t := range kernelconfig.Targets {
		names = append(names, t.Fragments...)
	}
	for _, name := range names {
		t, err := kernelconfig.FragmentText(name)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "### %s\n%s\n", name, t)
	}
	return nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
