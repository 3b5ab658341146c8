package vm

// Debian's ovmf package ships a Secure Boot firmware whose variable store
// template already enrolls one "snakeoil" certificate as PK, KEK and db,
// with that certificate's private key beside it, so that tests can sign
// binaries the firmware accepts. The code is the Secure Boot build
// (OVMF_CODE_4M.snakeoil.fd links to OVMF_CODE_4M.secboot.fd), which keeps
// its variable store in SMM: the guest needs q35 with SMM on and the flash
// in secure mode (Config.SecureBoot sets both).
const (
	SnakeoilCode = "/usr/share/OVMF/OVMF_CODE_4M.snakeoil.fd"
	SnakeoilVars = "/usr/share/OVMF/OVMF_VARS_4M.snakeoil.fd"
	// SnakeoilKey is encrypted (PKCS#8) with SnakeoilKeyPassword, as
	// Debian's README.Debian says.
	SnakeoilKey         = "/usr/share/ovmf/PkKek-1-snakeoil.key"
	SnakeoilCert        = "/usr/share/ovmf/PkKek-1-snakeoil.pem"
	SnakeoilKeyPassword = "snakeoil"
)

// secureBootArgs are the QEMU arguments the Secure Boot firmware needs:
// SMM (a second -machine option adds to the first) and flash writable only
// from SMM.
func (cfg *Config) secureBootArgs() []string {
	if !cfg.SecureBoot {
		return nil
	}
	return []string{"-machine", "smm=on", "-global", "driver=cfi.pflash01,property=secure,value=on"}
}
