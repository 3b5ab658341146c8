package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/hotpath-dev/hotpath/image/netboot"
)

// serve serves a built image's EFI binary for UEFI HTTP boot and iPXE
// (see README.md, "Network boot"), and with -tftp-dir writes a TFTP root
// for UEFI PXE. It stops when ctx is cancelled (SIGINT, SIGTERM).
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "out", "the build's output `dir`ectory (hotpath.img and manifest.json)")
	listen := fs.String("listen", "127.0.0.1:8000", "`addr`ess to serve HTTP on; the machines that boot must reach it\n(e.g. 0.0.0.0:8000 on the provisioning network)")
	base := fs.String("url", "", "the `URL` the machines reach this server at (for boot.ipxe and the printed DHCP options);\ndefault: http://<listen address>")
	tftp := fs.String("tftp-dir", "", "also write a TFTP server root into `dir` (the EFI binary and boot.ipxe) and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: hotpath-image serve [flags]\n\nServes the image's EFI binary (checked against its manifest) for UEFI HTTP boot and iPXE:\n  /<BOOTX64.EFI|BOOTAA64.EFI>   the whole appliance: kernel, initramfs, command line\n  /boot.ipxe                    an iPXE script that chains it\nThe booted machine needs no disk. See README.md, \"Network boot\", for the DHCP options.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	im, err := netboot.Load(*dir)
	if err != nil {
		return err
	}
	if *base == "" {
		*base = "http://" + *listen
	}
	if *tftp != "" {
		if err := im.WriteTFTP(*tftp, *base); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "TFTP root %s: %s (UEFI PXE: DHCP option 67 = %s) and boot.ipxe (chains %s/%s)\n",
			*tftp, im.Name, im.Name, *base, im.Name)
		return nil
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	printServeBanner(stdout, im, *base)
	srv := &http.Server{Handler: logRequests(im.Handler(), stderr), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func printServeBanner(w io.Writer, im *netboot.Image, base string) {
	fmt.Fprintf(w, `hotpath-image serve: %s (%s, %d bytes, sha256 %s)
  UEFI HTTP boot:  DHCP option 60 = "HTTPClient", option 67 = %s/%s
  iPXE:            chain %s/boot.ipxe
`, im.Name, im.M.Architecture, len(im.EFI), im.M.EFI.SHA256, base, im.Name, base)
}

// logRequests logs each request: which machine fetched what.
func logRequests(h http.Handler, w io.Writer) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "serve: %s %s %s (range %q)\n", r.RemoteAddr, r.Method, r.URL.Path, r.Header.Get("Range"))
		h.ServeHTTP(rw, r)
	})
}
