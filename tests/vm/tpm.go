package vm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// TPMBanks are the PCR banks the software TPM is manufactured with:
// SHA-256, what OVMF and Linux use first, and SHA-384, the bank of
// NitroTPM's attestation document.
const TPMBanks = "sha256,sha384"

// SWTPM is one guest's software TPM 2.0 (Debian's swtpm): a fresh state
// in its own directory, a control socket QEMU's tpm-emulator backend
// connects to, gone with the guest (--terminate).
type SWTPM struct {
	Dir    string // the state and the socket
	Socket string
	cmd    *exec.Cmd
	done   chan struct{}
}

// StartSWTPM manufactures a TPM in dir (swtpm_setup) and starts swtpm on
// a control socket there.
func StartSWTPM(dir string) (*SWTPM, error) {
	state := filepath.Join(dir, "tpm")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, fmt.Errorf("vm: swtpm: %w", err)
	}
	setup := exec.Command("swtpm_setup", "--tpm2", "--tpmstate", state, "--pcr-banks", TPMBanks, "--overwrite")
	if out, err := setup.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("vm: swtpm_setup (image/deps.sh test installs swtpm-tools): %v\n%s", err, out)
	}
	t := &SWTPM{Dir: state, Socket: filepath.Join(dir, "swtpm.sock"), done: make(chan struct{})}
	t.cmd = exec.Command("swtpm", "socket", "--tpm2", "--tpmstate", "dir="+state,
		"--ctrl", "type=unixio,path="+t.Socket, "--terminate",
		"--log", "file="+filepath.Join(dir, "swtpm.log")+",level=1")
	t.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := t.cmd.Start(); err != nil {
		return nil, fmt.Errorf("vm: start swtpm: %w", err)
	}
	go func() { t.cmd.Wait(); close(t.done) }()
	// QEMU connects once, at start: wait for the socket.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(t.Socket); err == nil {
			return t, nil
		}
		select {
		case <-t.done:
			return nil, errors.New("vm: swtpm exited before it listened")
		default:
		}
		if time.Now().After(deadline) {
			t.Close()
			return nil, errors.New("vm: swtpm: no control socket after 10s")
		}
	}
}

// Args are QEMU's arguments for the TPM: the emulator backend on the
// socket, and the front end the architecture's firmware and kernel drive
// (CRB on q35, as EC2's NitroTPM; TIS on arm64's virt, the only one it has).
func (t *SWTPM) Args(arch string) []string {
	dev := "tpm-crb"
	if arch == "arm64" {
		dev = "tpm-tis-device"
	}
	return []string{
		"-chardev", "socket,id=chrtpm,path=" + t.Socket,
		"-tpmdev", "emulator,id=tpm0,chardev=chrtpm",
		"-device", dev + ",tpmdev=tpm0",
	}
}

// Close stops swtpm if it has not ended with QEMU.
func (t *SWTPM) Close() error {
	select {
	case <-t.done:
		return nil
	default:
	}
	t.cmd.Process.Kill()
	<-t.done
	return nil
}
