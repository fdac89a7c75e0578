package netfault

import (
	"errors"
	"fmt"
	"os"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// SetupError says what a network fault needs that this host or process
// lacks, and how to get it. Callers report it as a setup error (exit 2)
// before the run starts, never as a fault that silently does nothing.
type SetupError struct {
	Need string // e.g. "partition needs CAP_NET_ADMIN"
	How  string // e.g. "run as root or grant it with setcap cap_net_admin+ep ..."
	Err  error  // the underlying error, if any
}

func (e *SetupError) Error() string { return e.Need + ": " + e.How }
func (e *SetupError) Unwrap() error { return e.Err }

// Check tells whether network faults can work here, before any is needed:
// the effective capability set must hold CAP_NET_ADMIN, and the kernel must
// answer nftables requests for family inet. what names the fault in the
// message ("partition", "loss").
func Check(what string) error {
	ok, err := hasNetAdmin()
	if err != nil {
		return fmt.Errorf("%s: read this process's capabilities: %w", what, err)
	}
	if !ok {
		return rightsError(what, nil)
	}
	c := &nftables.Conn{}
	if _, err := c.ListTablesOfFamily(nftables.TableFamilyINet); err != nil {
		return classifyAs(what, err)
	}
	return nil
}

// hasNetAdmin reads the effective capability set of the calling thread
// (the whole process's, as p2pfault never changes it per thread).
func hasNetAdmin() (bool, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false, err
	}
	bit := uint(unix.CAP_NET_ADMIN)
	return data[bit/32].Effective&(1<<(bit%32)) != 0, nil
}

func rightsError(what string, err error) error {
	exe, xerr := os.Executable()
	if xerr != nil {
		exe = "p2pfault"
	}
	return &SetupError{
		Need: what + " needs CAP_NET_ADMIN",
		How:  "run as root or grant it with setcap cap_net_admin+ep " + exe,
		Err:  err,
	}
}

// classify turns a netlink error into a SetupError where it means missing
// rights or a kernel without nftables, and otherwise names the operation.
func classify(op string, err error) error { return classifyAs(op, err) }

func classifyAs(what string, err error) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return rightsError(what, err)
	case errors.Is(err, unix.EPROTONOSUPPORT), errors.Is(err, unix.EAFNOSUPPORT),
		errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOPROTOOPT):
		// No nfnetlink, no nf_tables subsystem, or no inet family.
		return &SetupError{
			Need: what + " needs nftables (family inet) in the kernel",
			How:  "load it with `modprobe nf_tables` or use a kernel built with CONFIG_NF_TABLES and CONFIG_NF_TABLES_INET (" + err.Error() + ")",
			Err:  err,
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}
