// Package safefile opens, writes and reads the files of a run's folder
// without following a symbolic link, in one place for every writer
// (events.jsonl, the engines' logs, the reports, sessions.json,
// stalls.json) and every reader of a record that `p2pfault cleanup` acts
// on.
//
// Why: p2pfault runs as root (the firewall) and a run folder may sit in a
// folder others can write (--out /tmp/...). A symbolic link planted where
// a run writes would make it truncate or overwrite the link's target, and
// a record planted or edited by someone else would make cleanup signal
// processes it names. So a link where a run writes is an error naming the
// file, never followed, and a record is read only when it is a regular
// file of the invoking user that no one else can write (as ssh treats its
// keys). Checks are made on the opened descriptor (O_NOFOLLOW, then fstat),
// so nothing can be swapped in between a check and the use.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Modes of the files of a run: records (what cleanup acts on) are the
// invoking user's alone; logs and reports are readable by all.
const (
	RecordPerm fs.FileMode = 0o600
	ReportPerm fs.FileMode = 0o644
)

// MaxRecord bounds a record file's size: a record names a handful of
// sessions and tables, so anything larger is not one of p2pfault's.
const MaxRecord = 16 << 20

// LinkError says a run found a symbolic link (or another non-regular
// file) where it writes or reads one of its files.
type LinkError struct {
	Path string
	What string // "a symbolic link", "a named pipe", ...
}

func (e *LinkError) Error() string {
	return fmt.Sprintf("%s is %s: refused (p2pfault never writes or reads a run's file through one; remove it or choose another --out)", e.Path, e.What)
}

// Create opens path for writing from its start, creating it with perm or
// truncating a regular file already there, never through a symbolic link.
func Create(path string, perm fs.FileMode) (*os.File, error) {
	return open(path, unix.O_WRONLY|unix.O_CREAT, perm, true)
}

// Append opens path for appending, creating it with perm, never through a
// symbolic link (an engine's log, kept across its restarts).
func Append(path string, perm fs.FileMode) (*os.File, error) {
	return open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_APPEND, perm, false)
}

func open(path string, flags int, perm fs.FileMode, truncate bool) (*os.File, error) {
	if err := refuseLink(path); err != nil {
		return nil, err
	}
	fd, err := openFd(path, flags, perm)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		unix.Close(fd)
		return nil, &LinkError{Path: path, What: kindOf(st.Mode)}
	case st.Nlink > 1: // another name elsewhere: a write would reach it
		unix.Close(fd)
		return nil, &LinkError{Path: path, What: fmt.Sprintf("a file with %d hard links", st.Nlink)}
	}
	if truncate {
		if err := unix.Ftruncate(fd, 0); err != nil {
			unix.Close(fd)
			return nil, &os.PathError{Op: "truncate", Path: path, Err: err}
		}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openFd opens path without following a link at its last component. With
// O_NONBLOCK, a named pipe planted there cannot hang the open; the caller
// refuses it like any file that is not a regular one, and a regular file's
// descriptor is made blocking again.
func openFd(path string, flags int, perm fs.FileMode) (int, error) {
	fd, err := unix.Open(path, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, uint32(perm.Perm()))
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return -1, &LinkError{Path: path, What: "a symbolic link"}
		}
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

// refuseLink is the check a rename needs (it would replace a link, not
// follow it, but a link where a run writes is still a mistake to report).
func refuseLink(path string) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return nil // missing (created next) or unreadable (the open says why)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return &LinkError{Path: path, What: kindOf(st.Mode)}
	}
	return nil
}

// kindOf names what a file that is not a regular one is, from its st_mode.
func kindOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return "a symbolic link"
	case unix.S_IFDIR:
		return "a folder"
	case unix.S_IFIFO:
		return "a named pipe"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device"
	}
	return "not a regular file"
}

// Write replaces path with data in one step: written to a new temporary
// file beside it (created exclusively, mode perm), synced and renamed, so
// a reader (or a crash) sees the old content or the new, and a link at
// path is refused, never followed.
func Write(path string, data []byte, perm fs.FileMode) error {
	if err := refuseLink(path); err != nil {
		return err
	}
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	// CreateTemp opens O_EXCL with a random name: nothing planted can be
	// followed.
	tmp, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	serr := tmp.Sync()
	merr := tmp.Chmod(perm)
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, merr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// TrustError says why a record file is not read.
type TrustError struct {
	Path string
	Why  string
}

func (e *TrustError) Error() string { return fmt.Sprintf("%s: %s: refused", e.Path, e.Why) }

// ReadRecord reads a record file that p2pfault acts on (sessions.json,
// stalls.json) only if it is a regular file, not a symbolic link, owned by
// the user p2pfault runs as and writable by no one else; otherwise a
// *TrustError naming the file and why. A missing file wraps
// fs.ErrNotExist.
func ReadRecord(path string) ([]byte, error) {
	fd, err := openFd(path, unix.O_RDONLY, 0)
	if err != nil {
		var le *LinkError
		if errors.As(err, &le) {
			return nil, &TrustError{Path: path, Why: le.What}
		}
		return nil, err
	}
	if err := trusted(fd, path); err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxRecord+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxRecord {
		return nil, &TrustError{Path: path, Why: fmt.Sprintf("larger than %d MiB, not a record of p2pfault's", MaxRecord>>20)}
	}
	return b, nil
}

// trusted checks the opened record as ssh checks a key file.
func trusted(fd int, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "stat", Path: path, Err: err}
	}
	mode := st.Mode & 0o777
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return &TrustError{Path: path, Why: kindOf(st.Mode)}
	case int(st.Uid) != os.Geteuid():
		return &TrustError{Path: path, Why: fmt.Sprintf("owned by uid %d, not by uid %d that runs p2pfault", st.Uid, os.Geteuid())}
	case mode&0o022 != 0:
		return &TrustError{Path: path, Why: fmt.Sprintf("writable by group or others (mode %04o)", mode)}
	}
	return nil
}

// RefuseLinks checks, before a run writes anything, that none of names in
// dir is a symbolic link or anything but a regular file (a missing one is
// fine): a run that would refuse to write one at its end says so at its
// start instead, naming the file.
func RefuseLinks(dir string, names ...string) error {
	for _, name := range names {
		if err := refuseLink(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}
